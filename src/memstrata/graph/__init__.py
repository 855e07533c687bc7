"""Storage for agent graphs: checkpoints with their pending writes, and store items.

The rows are what a graph framework's checkpointer and key-value store need (LangGraph's
first); the values are opaque bytes with the framework's type tag, so nothing here
imports a framework. ``mem.graphs`` is the facade over :mod:`memstrata.graph.ops`.
"""
