"""Prompt provenance: a record of what entered each prompt, linked to the reply.

``mem.context(..., record=True)`` stores a context record (:mod:`.record`): its id,
time, branch, budget, the assembly's report and the ids of every injected item
(messages, facts with their versions, summary, working memory, plan), never their
text. Appending the assistant reply with ``context_id`` links the two (:mod:`.link`);
``mem.provenance.get`` answers what the model saw before a reply and
``mem.provenance.fact_usage`` which replies a fact went into (:mod:`.read`).
Records follow the cascades (:mod:`.cascade`) and retention (kind ``context_records``).
"""

from memstrata.domain.provenance import ContextRecord, FactUse, Provenance, RecordItem
from memstrata.provenance.link import append_linked, link_reply
from memstrata.provenance.read import fact_usage, get_record, reply_provenance
from memstrata.provenance.record import entries, record_context, stored_report
from memstrata.provenance.usage import fact_use_counts

__all__ = [
    "ContextRecord",
    "FactUse",
    "Provenance",
    "RecordItem",
    "append_linked",
    "entries",
    "fact_usage",
    "fact_use_counts",
    "get_record",
    "link_reply",
    "record_context",
    "reply_provenance",
    "stored_report",
]
