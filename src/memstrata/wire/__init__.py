"""One wire model per REST resource, grouped by feature.

A wire model (:class:`Wire`) is the single statement of a resource's JSON shape: the
server publishes its schema and sends ``Model.encode(obj)``, the remote client
rebuilds domain objects with ``Model.decode(data)``, and the domain type's
``to_dict()`` is ``Model.encode(self)``. Import the models from their feature module
(``memstrata.wire.conversations``, ``.jobs``, ``.longterm``, ``.nodes``, ``.recall``,
``.state``, ``.context``); this package's import stays light.
"""

from memstrata.wire._codec import Attr, Derived, OmitNone, Via, Wire

__all__ = ["Attr", "Derived", "OmitNone", "Via", "Wire"]
