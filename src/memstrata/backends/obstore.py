"""Blob stores on obstore: local files, process memory and S3-compatible servers.

obstore errors are translated here, at the backend boundary, into memstrata
errors; a key that is not a plain relative path is refused before any call.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from memstrata.blobs import Blob, BlobCapabilities, BlobMeta, IfMatch, PutMode
from memstrata.errors import (
    BackendUnavailable,
    ConfigurationError,
    InvalidInput,
    MemstrataError,
    MissingDependency,
    NotFound,
    PreconditionFailed,
)

if TYPE_CHECKING:
    from memstrata.config import Settings

__all__ = ["ObstoreBlobStore", "open_obstore"]

log = logging.getLogger(__name__)


def _import() -> Any:
    try:
        import obstore
    except ImportError:  # pragma: no cover - obstore is a core dependency
        raise MissingDependency("blob stores need obstore: pip install obstore") from None
    return obstore


def _check_key(key: str) -> str:
    if "\x00" in key or any(p in ("", ".", "..") for p in key.split("/")):
        raise InvalidInput(f"blob key {key!r} is not a plain relative path", field="key")
    return key


def _translate(exc: Exception, key: str) -> MemstrataError:
    from obstore import exceptions as ox

    if isinstance(exc, MemstrataError):
        return exc
    if isinstance(exc, FileNotFoundError | ox.NotFoundError):
        return NotFound(f"blob {key} not found", kind="blob", key=key)
    if isinstance(exc, ox.AlreadyExistsError | ox.PreconditionError):
        return PreconditionFailed(f"blob {key} changed or already exists", key=key)
    # The store's own text (URLs, paths, request ids) goes to the log, not to a client.
    first = str(exc).splitlines()[0][:300] if str(exc) else ""
    log.warning("blob store error on %s: %s: %s", key, type(exc).__name__, first)
    if isinstance(exc, ox.PermissionDeniedError | ox.UnauthenticatedError):
        return BackendUnavailable(f"blob store refused access to {key}", key=key)
    if isinstance(exc, ox.BaseError | OSError | TimeoutError):
        return BackendUnavailable(f"blob store unavailable ({key}): {type(exc).__name__}", key=key)
    return BackendUnavailable(f"blob store error ({key}): {type(exc).__name__}", key=key)


def _mode(mode: PutMode) -> Any:
    if isinstance(mode, IfMatch):
        return {"e_tag": mode.etag}
    return mode


def _meta(m: Any) -> BlobMeta:
    return BlobMeta(
        key=m["path"],
        size=int(m["size"]),
        etag=m.get("e_tag"),
        last_modified=m["last_modified"].timestamp(),
    )


class ObstoreBlobStore:
    """One obstore store behind the :class:`~memstrata.blobs.BlobStore` port."""

    def __init__(self, url: str, store: Any, capabilities: BlobCapabilities) -> None:
        self.url = url
        self.capabilities = capabilities
        self._store = store
        self._obs = _import()

    def _check_mode(self, mode: PutMode) -> None:
        if isinstance(mode, IfMatch) and not self.capabilities.if_match:
            raise ConfigurationError(f"blob store {self.url} cannot overwrite on if-match")

    def get(self, key: str) -> Blob:
        try:
            result = self._obs.get(self._store, _check_key(key))
            return Blob(bytes(result.bytes()), result.meta.get("e_tag"))
        except Exception as exc:
            raise _translate(exc, key) from None

    def put(self, key: str, data: bytes, mode: PutMode = "overwrite") -> str | None:
        self._check_mode(mode)
        try:
            out = self._obs.put(
                self._store, _check_key(key), data, mode=_mode(mode), use_multipart=False
            )
            return out.get("e_tag")  # type: ignore[no-any-return]
        except Exception as exc:
            raise _translate(exc, key) from None

    def list_prefix(self, prefix: str) -> list[BlobMeta]:
        try:
            return [
                _meta(m) for batch in self._obs.list(self._store, prefix or None) for m in batch
            ]
        except Exception as exc:
            raise _translate(exc, prefix) from None

    def delete(self, keys: Sequence[str]) -> None:
        for key in keys:
            try:
                self._obs.delete(self._store, _check_key(key))
            except Exception as exc:
                err = _translate(exc, key)
                if not isinstance(err, NotFound):
                    raise err from None

    async def aget(self, key: str) -> Blob:
        try:
            result = await self._obs.get_async(self._store, _check_key(key))
            return Blob(bytes(await result.bytes_async()), result.meta.get("e_tag"))
        except Exception as exc:
            raise _translate(exc, key) from None

    async def aput(self, key: str, data: bytes, mode: PutMode = "overwrite") -> str | None:
        self._check_mode(mode)
        try:
            out = await self._obs.put_async(
                self._store, _check_key(key), data, mode=_mode(mode), use_multipart=False
            )
            return out.get("e_tag")  # type: ignore[no-any-return]
        except Exception as exc:
            raise _translate(exc, key) from None

    async def alist_prefix(self, prefix: str) -> list[BlobMeta]:
        try:
            out: list[BlobMeta] = []
            async for batch in self._obs.list(self._store, prefix or None):
                out.extend(_meta(m) for m in batch)
            return out
        except Exception as exc:
            raise _translate(exc, prefix) from None

    async def adelete(self, keys: Sequence[str]) -> None:
        for key in keys:
            try:
                await self._obs.delete_async(self._store, _check_key(key))
            except Exception as exc:
                err = _translate(exc, key)
                if not isinstance(err, NotFound):
                    raise err from None


def _file_path(url: str) -> Path:
    rest = url[len("file://") :]
    if not rest:
        raise ConfigurationError(f"file blob URL needs a directory: {url!r}")
    return Path(rest)


def open_obstore(url: str, settings: Settings) -> ObstoreBlobStore:
    obstore_store = _import().store
    scheme = url.split(":", 1)[0].lower()
    if scheme == "memory":
        return ObstoreBlobStore(url, obstore_store.MemoryStore(), BlobCapabilities(if_match=True))
    if scheme == "file":
        path = _file_path(url)
        path.mkdir(parents=True, exist_ok=True)
        store = obstore_store.LocalStore(prefix=path.resolve())
        # obstore's local store has no conditional overwrite: write-once objects only.
        return ObstoreBlobStore(url, store, BlobCapabilities(if_match=False))
    parts = urlsplit(url)
    if not parts.netloc:
        raise ConfigurationError(f"s3 blob URL needs a bucket: {url!r}")
    config: dict[str, Any] = {"region": settings.s3_region}
    client: dict[str, Any] = {
        "timeout": timedelta(seconds=settings.blob_timeout_s),
        "connect_timeout": timedelta(seconds=min(settings.blob_timeout_s, 5.0)),
    }
    if settings.s3_endpoint:
        config["endpoint"] = settings.s3_endpoint
        client["allow_http"] = settings.s3_endpoint.startswith("http://")
    if settings.s3_access_key_id:
        config["access_key_id"] = settings.s3_access_key_id
    if settings.s3_secret_access_key:
        config["secret_access_key"] = settings.s3_secret_access_key
    retry = {
        "max_retries": settings.blob_retries,
        "retry_timeout": timedelta(seconds=settings.blob_timeout_s),
        "backoff": {
            "init_backoff": timedelta(milliseconds=50),
            "max_backoff": timedelta(seconds=1),
            "base": 2,
        },
    }
    try:
        store = obstore_store.S3Store(
            parts.netloc,
            prefix=parts.path.strip("/") or None,
            client_options=client,
            retry_config=retry,
            **config,
        )
    except Exception as exc:
        raise ConfigurationError(f"cannot configure S3 store {url}: {exc}") from None
    return ObstoreBlobStore(url, store, BlobCapabilities(if_match=True))
