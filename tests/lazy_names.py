"""Names from a heavy framework, imported when a test first uses them, not at collection.

Collecting the suite imports every test module; the agent frameworks take seconds each to
import, so a module that names them at the top writes::

    if TYPE_CHECKING:
        from agents.memory import Session, SQLiteSession
    else:
        Session, SQLiteSession = lazy("agents.memory", "Session", "SQLiteSession")

Type checkers see the real names. Before a test of the module runs, ``resolve`` (called by
the root conftest) puts the real objects in the stand-ins' places, so tests and the
frameworks they call see only real objects. Used earlier (a call, an attribute,
``isinstance``, a subscript, a base class at import), a stand-in imports on the spot.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["lazy", "resolve"]


class _Lazy:
    __slots__ = ("_module", "_name")

    def __init__(self, module: str, name: str) -> None:
        self._module, self._name = module, name

    def _target(self) -> Any:
        return getattr(importlib.import_module(self._module), self._name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._target()(*args, **kwargs)

    def __getattr__(self, attr: str) -> Any:
        # Collection probes every module-level name for private names (``__test__``,
        # ``_mock_name``...): those must not import the framework.
        if attr.startswith("_"):
            raise AttributeError(attr)
        return getattr(self._target(), attr)

    def __getitem__(self, item: Any) -> Any:
        return self._target()[item]

    def __instancecheck__(self, obj: object) -> bool:
        return isinstance(obj, self._target())

    def __subclasscheck__(self, cls: type) -> bool:
        return issubclass(cls, self._target())

    def __mro_entries__(self, bases: tuple[Any, ...]) -> tuple[Any, ...]:
        return (self._target(),)

    def __repr__(self) -> str:
        return f"<lazy {self._module}.{self._name}>"


def resolve(namespace: dict[str, Any]) -> None:
    """Replace every stand-in in ``namespace`` (a test module's globals) by its object."""
    for key, value in list(namespace.items()):
        if type(value) is _Lazy:
            namespace[key] = value._target()


def lazy(module: str, *names: str) -> tuple[Any, ...]:
    """Stand-ins for ``from module import *names``, importing ``module`` on first use."""
    return tuple(_Lazy(module, name) for name in names)
