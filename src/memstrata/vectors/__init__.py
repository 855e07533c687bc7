"""Vector search: the port, its exact (numpy) and pgvector (HNSW) implementations,
and the factory that picks one for a database.

    index = open_vector_index(engine, Space(embedder.identity, embedder.dim))
    index.kind                      # "exact" or "pgvector-hnsw"
    index.add([VectorItem(id, scope, conversation_id, message_id, vector)])
    index.search(scope, query_vector, k=10, exclude_message_ids=recent_ids)

numpy is imported here, so features import this package only when they need it.
"""

from memstrata.vectors.detect import (
    VectorCapability,
    adetect,
    aopen_vector_index,
    detect,
    open_vector_index,
)
from memstrata.vectors.port import (
    IndexKind,
    Space,
    VectorHit,
    VectorIndex,
    VectorItem,
    delete_for_conversations,
    delete_for_user,
)

__all__ = [
    "IndexKind",
    "Space",
    "VectorCapability",
    "VectorHit",
    "VectorIndex",
    "VectorItem",
    "adetect",
    "aopen_vector_index",
    "delete_for_conversations",
    "delete_for_user",
    "detect",
    "open_vector_index",
]
