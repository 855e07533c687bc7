"""Conversation memory over a message tree.

The operations the facade runs, by concern: :mod:`.conversations`, :mod:`.messages`,
:mod:`.branch` (leaf resolution, branch walks, history) and :mod:`.users`.
"""

from memstrata.conversation.branch import (
    Leaf,
    branch_chunk,
    history,
    load_leaf,
    path,
    resolve_leaf,
    system_run,
    token_counter,
    tokenizer_for,
    turn_start,
    walk_branch,
)
from memstrata.conversation.conversations import (
    create_conversation,
    delete_conversation,
    get_conversation,
    hold_conversation,
    list_conversations,
    update_conversation,
)
from memstrata.conversation.lookup import require_message
from memstrata.conversation.messages import (
    append_message,
    delete_message,
    find_message,
    get_message,
    list_leaves,
    list_messages,
    patch_message,
)
from memstrata.conversation.users import delete_user, list_users

__all__ = [
    "Leaf",
    "append_message",
    "branch_chunk",
    "create_conversation",
    "delete_conversation",
    "delete_message",
    "delete_user",
    "find_message",
    "get_conversation",
    "get_message",
    "history",
    "hold_conversation",
    "list_conversations",
    "list_leaves",
    "list_messages",
    "list_users",
    "load_leaf",
    "patch_message",
    "path",
    "require_message",
    "resolve_leaf",
    "system_run",
    "token_counter",
    "tokenizer_for",
    "turn_start",
    "update_conversation",
    "walk_branch",
]
