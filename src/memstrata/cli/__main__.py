"""``python -m memstrata.cli``: the command line."""

from memstrata.cli import main

main()
