"""Keep file uploads out of long-term memory.

An upload is an event of one conversation ("the user uploaded three PDFs"), not a fact
about the user, and the file it names is usually gone by the next conversation. The
prompt tells the model not to record uploads; this module is the check behind that
rule: sentences that mention an upload are removed from profile summaries, and a fact
that mentions one is dropped.
"""

from __future__ import annotations

import re

__all__ = ["UPLOAD_SENTENCE", "mentions_upload", "scrub_uploads"]

# A mention of an upload: "uploaded (up to three words) file/document/attachment",
# "file upload", the sandbox upload folder, or an upload block tag.
_MENTION = (
    r"(?:\bupload(?:ed|ing|s)?(?:\s+\w+){0,3}\s+(?:files?|documents?|attachments?)\b"
    r"|\bfile\s+uploads?\b"
    r"|/mnt/user-data/uploads/"
    r"|<(?:uploaded_files|current_uploads)>)"
)
#: One sentence that mentions an upload, up to its ``.``, ``!`` or ``?`` and the spaces
#: after it.
UPLOAD_SENTENCE = re.compile(
    # The sentence starts at its first non-space character, so the space that separated
    # it from the previous sentence stays.
    r"(?:[^.!?\s][^.!?]*)?" + _MENTION + r"[^.!?]*[.!?]?\s*",
    re.IGNORECASE,
)

# The mention alone: a linear-time test, so text without any mention never pays for the
# sentence pattern's backtracking.
_MENTION_RE = re.compile(_MENTION, re.IGNORECASE)

_SPACES = re.compile(r" {2,}")


def mentions_upload(text: str) -> bool:
    """Whether ``text`` talks about a file upload."""
    return _MENTION_RE.search(text) is not None


def scrub_uploads(text: str) -> str:
    """``text`` without the sentences that mention file uploads, spaces tidied."""
    if mentions_upload(text):
        text = UPLOAD_SENTENCE.sub("", text)
    return _SPACES.sub(" ", text).strip()
