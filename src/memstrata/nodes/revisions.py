"""Replaced turns, applied while a node memory is read newest first (pure).

Dify overwrites a run's turn when it is added again with other content. Stored
objects are write-once, so a replacement is a new flush whose turns carry a
``revision`` (the flush's id); the turns it replaces stay in the log, so
nothing is lost. A reader shows the newest revision of a message once, in the
place of the message's first turns, and skips the older ones. Nothing is read
for it: a revision met before its original is held until the reader gets there,
so a read still stops as soon as it has what it returns.
"""

from __future__ import annotations

from memstrata.nodes.layout import Turn

__all__ = ["Revisions"]


class Revisions:
    """Feeds on turns newest first; gives back the turns a reader shows, newest first."""

    def __init__(self) -> None:
        self._newest: dict[str, list[Turn]] = {}  # message id -> its newest revision's turns
        self._placed: set[str] = set()

    def apply(self, turns: list[Turn]) -> list[Turn]:
        out: list[Turn] = []
        for turn in turns:
            mid = turn.message_id
            held = self._newest.get(mid)
            if turn.revision is not None:
                if held is None:
                    self._newest[mid] = [turn]
                elif held[0].revision == turn.revision and mid not in self._placed:
                    held.append(turn)  # another loop iteration of the same revision
                continue  # older revisions are superseded; the newest waits for its place
            if held is None:
                out.append(turn)
            elif mid not in self._placed:
                self._placed.add(mid)
                out.extend(held)
        return out

    def unplaced(self) -> list[Turn]:
        """Revisions whose original was never met (damaged and skipped): shown last."""
        return [t for mid, ts in self._newest.items() if mid not in self._placed for t in ts]
