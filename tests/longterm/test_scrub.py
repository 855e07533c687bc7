"""Sentences about file uploads are removed from what long-term memory keeps."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memstrata.longterm.scrub import mentions_upload, scrub_uploads


@pytest.mark.parametrize(
    "text",
    [
        "The user uploaded a file.",
        "User uploaded three PDF documents about taxes",
        "They are uploading the attachment now!",
        "Upload files here",
        "The file upload failed?",
        "Reads /mnt/user-data/uploads/report.csv daily",
        "Saw <uploaded_files> in the message",
        "Saw <CURRENT_UPLOADS> in the message",
    ],
)
def test_mentions(text: str):
    assert mentions_upload(text)


@pytest.mark.parametrize(
    "text",
    [
        "The user prefers Python.",
        "Uploaded a photo to Instagram",  # no file/document/attachment noun
        "uploaded one two three four files",  # more than three words between
        "A file about uploads",
        "",
    ],
)
def test_does_not_mention(text: str):
    assert not mentions_upload(text)


def test_scrub_removes_only_the_upload_sentences():
    text = (
        "Works as a data engineer. The user uploaded two CSV files for analysis. "
        "Prefers concise answers!  Mentioned a file upload earlier? Lives in Oslo."
    )
    assert (
        scrub_uploads(text) == "Works as a data engineer. Prefers concise answers! Lives in Oslo."
    )


def test_scrub_tidies_spaces_even_without_mentions():
    assert scrub_uploads("  Likes  tea.   Hates coffee. ") == "Likes tea. Hates coffee."


def test_scrub_can_empty_a_text():
    assert scrub_uploads("The user uploaded a document.") == ""


_PIECES = st.sampled_from(
    [
        "uploaded",
        "upload",
        "the",
        "file",
        "files",
        "document",
        "attachment",
        "file upload",
        "/mnt/user-data/uploads/",
        "<uploaded_files>",
        "Likes tea",
        ".",
        "!",
        "?",
        " ",
        "  ",
        "\n",
    ]
)


@given(st.text() | st.lists(_PIECES, max_size=20).map(" ".join))
def test_scrub_leaves_no_mention(text: str):
    # A mention never spans a sentence end, so removing whole sentences removes all.
    scrubbed = scrub_uploads(text)
    assert not mentions_upload(scrubbed)
    assert len(scrubbed) <= len(text)
    assert scrub_uploads(scrubbed) == scrubbed
