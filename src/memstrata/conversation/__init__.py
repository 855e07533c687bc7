"""Conversation memory over a message tree."""
