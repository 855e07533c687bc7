"""The domain types: what the facade returns and the remote client decodes into.

Plain data with their ``to_dict()`` (the REST shape, see :mod:`memstrata.encoding`) and
the pure renderers they use; no storage, no feature. The features build them, the wire
models describe them, and :mod:`memstrata.client` rebuilds them from JSON, so both sides
return the same classes while ``import memstrata.client`` loads no local-stack module.
"""
