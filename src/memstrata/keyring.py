"""The keyring: each user's data key, wrapped by the master key, kept apart from the data.

A directory (``MEMSTRATA_KEYRING``, default ``<home>/keyring``), never inside the database,
so a database backup or export never carries a key::

    keyring.json          the master key's fingerprint and a check value it must open
    keys/<key id>         {"master": fingerprint, "wrapped": base64(nonce || AES-GCM(master, data key))}
    owners/<owner hash>   the key id of the owner's current data key

Or (``MEMSTRATA_KEYRING=postgresql://...``) the same records as rows of a table
``memstrata_keyring`` (name, value) in a PostgreSQL database of its own, for deployments
whose processes share no volume; an exclusive insert claims an owner's key there.

The owner hash is a SHA-256 of tenant and user (the keyring names no user in clear).
Files are written whole and moved into place, and an owner's key is claimed with an
exclusive create, so processes sharing the directory agree on one key per owner.
Destroying a key unlinks both files: from then on every value sealed with it opens to
nothing, in the live store and in every earlier backup.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memstrata.config import Settings
from memstrata.errors import MissingDependency
from memstrata.sealing import KeyringError, Sealer

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

__all__ = [
    "Keyring",
    "create_master_key",
    "describe",
    "keyring_dir",
    "load_master_key",
    "open_sealer",
    "rotate_master_key",
]

_MASTER_HEADER = "memstrata-master-key-v1:"
_CHECK = b"memstrata keyring check"
_NONCE = 12


def _aead(key: bytes) -> AESGCM:
    try:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    except ImportError as exc:  # pragma: no cover - the extra is missing
        raise KeyringError(
            "encryption at rest needs the cryptography package: pip install 'memstrata[encryption]'"
        ) from exc
    return AESGCM(key)


def fingerprint(master: bytes) -> str:
    return hashlib.blake2b(master, digest_size=8, person=b"memstrata-master").hexdigest()


def create_master_key(path: Path) -> str:
    """Write a new random master key to ``path`` (never over an existing file, owner-only
    permissions); returns its fingerprint."""
    key = secrets.token_bytes(32)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise KeyringError(f"{path} exists; a master key is never overwritten") from None
    with os.fdopen(fd, "w") as f:
        f.write(_MASTER_HEADER + base64.b64encode(key).decode("ascii") + "\n")
    return fingerprint(key)


def load_master_key(path: Path | None) -> bytes:
    if path is None:
        raise KeyringError(
            "MEMSTRATA_ENCRYPT_AT_REST is on but MEMSTRATA_MASTER_KEY_FILE is not set "
            "(make one with `memstrata master-key create --out FILE`)"
        )
    try:
        text = path.read_text().strip()
    except OSError as exc:
        raise KeyringError(f"cannot read the master key file {path}: {exc.strerror}") from None
    if not text.startswith(_MASTER_HEADER):
        raise KeyringError(f"{path} is not a memstrata master key")
    try:
        key = base64.b64decode(text[len(_MASTER_HEADER) :], validate=True)
    except ValueError:
        key = b""
    if len(key) != 32:
        raise KeyringError(f"{path} is not a memstrata master key")
    return key


def _write(path: Path, data: str) -> None:
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
    tmp.write_text(data)
    os.replace(tmp, path)


class _Files:
    """The keyring's records as files under a directory (names are relative paths)."""

    def __init__(self, root: Path) -> None:
        self.where = str(root)
        self.root = root
        (root / "keys").mkdir(parents=True, exist_ok=True)
        (root / "owners").mkdir(exist_ok=True)

    def get(self, name: str) -> str | None:
        try:
            return (self.root / name).read_text()
        except FileNotFoundError:
            return None

    def put(self, name: str, value: str) -> None:
        _write(self.root / name, value)

    def create(self, name: str, value: str) -> bool:
        """Write ``name`` only if absent (an exclusive link): False when it exists."""
        path = self.root / name
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
        tmp.write_text(value)
        try:
            os.link(tmp, path)
            return True
        except FileExistsError:
            return False
        finally:
            tmp.unlink(missing_ok=True)

    def delete(self, name: str) -> bool:
        try:
            (self.root / name).unlink()
            return True
        except FileNotFoundError:
            return False

    def names(self, folder: str) -> list[str]:
        return sorted(p.name for p in (self.root / folder).iterdir() if not p.name.startswith("."))


class _Table:
    """The keyring's records in a table of a PostgreSQL database of its own (the same
    names as the directory's files), for deployments that share no volume."""

    def __init__(self, url: str) -> None:
        import threading

        try:
            import psycopg
        except ImportError:
            raise MissingDependency(
                "a PostgreSQL keyring needs psycopg: pip install 'memstrata[postgres]'"
            ) from None

        self.where = describe(url)
        self._lock = threading.Lock()
        try:
            self._conn = psycopg.connect(url, autocommit=True)
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS memstrata_keyring "
                "(name TEXT PRIMARY KEY, value TEXT NOT NULL)"
            )
        except psycopg.Error as exc:
            raise KeyringError(f"cannot open the keyring database {self.where}: {exc}") from None

    def _run(self, sql: str, params: tuple[str, ...]) -> Any:
        with self._lock:
            return self._conn.execute(sql, params)

    def get(self, name: str) -> str | None:
        row = self._run("SELECT value FROM memstrata_keyring WHERE name = %s", (name,)).fetchone()
        return None if row is None else str(row[0])

    def put(self, name: str, value: str) -> None:
        self._run(
            "INSERT INTO memstrata_keyring (name, value) VALUES (%s, %s) "
            "ON CONFLICT (name) DO UPDATE SET value = excluded.value",
            (name, value),
        )

    def create(self, name: str, value: str) -> bool:
        cur = self._run(
            "INSERT INTO memstrata_keyring (name, value) VALUES (%s, %s) ON CONFLICT DO NOTHING",
            (name, value),
        )
        return bool(cur.rowcount)

    def delete(self, name: str) -> bool:
        cur = self._run("DELETE FROM memstrata_keyring WHERE name = %s", (name,))
        return bool(cur.rowcount)

    def names(self, folder: str) -> list[str]:
        rows = self._run(
            "SELECT name FROM memstrata_keyring WHERE name LIKE %s ORDER BY name", (folder + "/%",)
        ).fetchall()
        return [str(r[0])[len(folder) + 1 :] for r in rows]


_Store = _Files | _Table


def _store(location: str | Path) -> _Store:
    text = str(location)
    if text.startswith(("postgresql://", "postgres://")):
        return _Table(text)
    return _Files(Path(text))


class Keyring:
    """Data keys in a directory or a PostgreSQL database, wrapped by ``master`` (checked
    on open)."""

    def __init__(self, location: str | Path, master: bytes) -> None:
        self.store = _store(location)
        self.root = self.store.where
        self._master = master
        self._fp = fingerprint(master)
        self._wrap = _aead(master)
        if self.store.get("keyring.json") is None:
            fresh = {"version": 1, "id": secrets.token_hex(8), **self._check_record()}
            self.store.create("keyring.json", json.dumps(fresh))
        record = json.loads(self.store.get("keyring.json") or "{}")
        self._verify(record)
        self.id = str(record["id"])

    def _check_record(self) -> dict[str, str]:
        nonce = secrets.token_bytes(_NONCE)
        sealed = self._wrap.encrypt(nonce, _CHECK, b"check")
        return {"master": self._fp, "check": base64.b64encode(nonce + sealed).decode("ascii")}

    def _verify(self, head: dict[str, str]) -> None:
        from cryptography.exceptions import InvalidTag

        raw = base64.b64decode(head.get("check", ""))
        try:
            self._wrap.decrypt(raw[:_NONCE], raw[_NONCE:], b"check")
        except (InvalidTag, ValueError):
            raise KeyringError(
                f"the master key ({self._fp}) does not open the keyring at {self.root} "
                f"(made with {head.get('master', '?')}): wrong MEMSTRATA_MASTER_KEY_FILE?"
            ) from None

    @staticmethod
    def owner_hash(tenant: str, user: str) -> str:
        return hashlib.sha256(f"{tenant}\x00{user}".encode()).hexdigest()

    def _unwrap(self, key_id: str, record: dict[str, str]) -> bytes:
        from cryptography.exceptions import InvalidTag

        raw = base64.b64decode(record["wrapped"])
        try:
            return bytes(self._wrap.decrypt(raw[:_NONCE], raw[_NONCE:], key_id.encode()))
        except InvalidTag:
            raise KeyringError(
                f"data key {key_id} is wrapped by master key {record.get('master')}, not "
                f"{self._fp}: finish `memstrata master-key rotate`"
            ) from None

    def _wrapped(self, key_id: str, secret: bytes, owner: str) -> str:
        nonce = secrets.token_bytes(_NONCE)
        body = self._wrap.encrypt(nonce, secret, key_id.encode())
        record = {"master": self._fp, "owner": owner}
        return json.dumps({**record, "wrapped": base64.b64encode(nonce + body).decode("ascii")})

    def lookup(self, key_id: str) -> bytes | None:
        """The data key ``key_id``, or None when it was destroyed (or never existed)."""
        if not key_id.isalnum():
            return None
        text = self.store.get(f"keys/{key_id}")
        return None if text is None else self._unwrap(key_id, json.loads(text))

    def key_for_owner(self, tenant: str, user: str) -> tuple[str, bytes]:
        """The owner's current data key, made (and claimed atomically) on first use."""
        owner = self.owner_hash(tenant, user)
        for _ in range(3):
            key_id = (self.store.get(f"owners/{owner}") or "").strip()
            secret = self.lookup(key_id) if key_id else None
            if secret is not None:
                return key_id, secret
            if key_id:  # a claim whose key is gone (destroyed): free the owner
                self.store.delete(f"owners/{owner}")
            key_id, secret = secrets.token_hex(8), secrets.token_bytes(32)
            self.store.put(f"keys/{key_id}", self._wrapped(key_id, secret, owner))
            # Exclusive: another process may have claimed the owner first.
            if self.store.create(f"owners/{owner}", key_id):
                return key_id, secret
            self.store.delete(f"keys/{key_id}")
        raise KeyringError(f"cannot claim a data key in {self.root}")  # pragma: no cover

    def destroy(self, tenant: str, user: str) -> bool:
        """Destroy the owner's data key; True when there was one."""
        owner = self.owner_hash(tenant, user)
        key_id = (self.store.get(f"owners/{owner}") or "").strip()
        if not key_id:
            return False
        existed = self.store.delete(f"keys/{key_id}")
        self.store.delete(f"owners/{owner}")
        return existed

    def key_ids(self) -> Iterator[str]:
        yield from self.store.names("keys")

    def rewrap(self, new_master: bytes) -> int:
        """Wrap every data key with ``new_master`` (keys already wrapped by it are left);
        resumable: run again after a crash. Returns the keys rewrapped now."""
        new = Keyring.__new__(Keyring)
        new.store, new.root, new._master, new._fp, new._wrap = (
            self.store, self.root, new_master, fingerprint(new_master), _aead(new_master)
        )  # fmt: skip
        done = 0
        for key_id in self.key_ids():
            text = self.store.get(f"keys/{key_id}")
            if text is None:
                continue
            record = json.loads(text)
            if record.get("master") == new._fp:
                continue
            secret = self._unwrap(key_id, record)
            self.store.put(f"keys/{key_id}", new._wrapped(key_id, secret, record.get("owner", "")))
            done += 1
        head = {"version": 1, "id": self.id, **new._check_record()}
        self.store.put("keyring.json", json.dumps(head))
        return done


def rotate_master_key(keyring_dir: str | Path, current: Path) -> tuple[str, int]:
    """Replace the master key in ``current`` with a new one, rewrapping every data key.

    The new key is written to ``<current>.new`` first; a rotation interrupted at any point
    is finished by running it again (the keys already rewrapped are left as they are), and
    the old key file is replaced only once every data key opens with the new one.
    Returns the new fingerprint and how many keys were rewrapped.
    """
    pending = current.with_name(current.name + ".new")
    if not pending.exists():
        create_master_key(pending)
    new_master = load_master_key(pending)
    old_master = load_master_key(current)
    try:
        ring = Keyring(keyring_dir, old_master)
    except KeyringError:
        # The check value is rewritten last: once it opens with the new key only, every
        # data key was rewrapped already and only the file swap below was left undone.
        ring = Keyring(keyring_dir, new_master)
    n = ring.rewrap(new_master)
    os.replace(pending, current)
    return fingerprint(new_master), n


def describe(location: str | Path) -> str:
    """``location`` fit to print: a URL without its user and password."""
    text = str(location)
    if text.startswith(("postgresql://", "postgres://")) and "@" in text:
        scheme, _, rest = text.partition("://")
        return f"{scheme}://{rest.rpartition('@')[2]}"
    return text


def keyring_dir(settings: Settings) -> str | Path:
    """Where the keyring is: a directory, or a ``postgresql://`` URL of its own database."""
    if settings.keyring and settings.keyring.startswith(("postgresql://", "postgres://")):
        return settings.keyring
    return Path(settings.keyring) if settings.keyring else settings.home / "keyring"


def open_sealer(settings: Settings) -> Sealer | None:
    """The sealer of these settings: None with encryption off; a :class:`KeyringError`
    when it is on and the master key is missing or does not open the keyring."""
    if not settings.encrypt_at_rest:
        return None
    master = load_master_key(settings.master_key_file)
    ring = Keyring(keyring_dir(settings), master)
    return Sealer(ring.key_for_owner, ring.lookup, ring.destroy, keyring_id=ring.id)
