"""The web UI, driven in a real browser."""
