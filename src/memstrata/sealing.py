"""Sealing stored text with its owner's data key (encryption at rest, crypto-shredding).

One codec for every feature: a row codec calls :func:`seal` as it writes a user's text and
:func:`unseal` as it reads it back, and the keyword index calls :func:`index_terms` and
:func:`query_terms`. With encryption off (no sealer active) the codecs return their input,
and the keyword index gets each word's Porter stem behind its owner's prefix
(:func:`owner_prefix`); with encryption on, the stem hashed with the owner's term key.
Either way one token names one word of one owner, so the index finds an owner's messages
holding a word without reading the owner's other messages.

A sealed value is text (every backend stores it in the same column)::

    "\\x1bms1:" + key_id + ":" + base64(nonce || AES-256-GCM(data key, text, ad))

where ``ad`` (associated data) is the table, the row's id and the key id: ciphertext copied
to another row, table or user does not open. The key id names the owner's data key in the
keyring; once the key is destroyed (the user was deleted) the value opens to None, and the
reader treats the text as gone.

The active :class:`Sealer` is a context variable, set for the length of one plan by the
engine that runs it (:mod:`memstrata.storage.sealed`), so the row codecs need no argument
threaded through every operation.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import os
import re
import threading
import unicodedata
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Sequence
from contextvars import ContextVar
from functools import lru_cache, partial
from typing import Any

from memstrata.errors import ConfigurationError, Corruption, InvalidInput

__all__ = [
    "BYTES_PREFIX",
    "PREFIX",
    "KeyringError",
    "Sealer",
    "TermCaches",
    "active",
    "content_hash",
    "digest_key",
    "fold",
    "hashed_terms",
    "index_terms",
    "is_sealed",
    "lookup_key",
    "opener",
    "owner_prefix",
    "plain_index_terms",
    "query_terms",
    "seal",
    "seal_bytes",
    "stem",
    "unseal",
    "unseal_bytes",
    "using",
]

PREFIX = "\x1bms1:"
#: The same prefix on a binary value (a blob column or a blob store object).
BYTES_PREFIX = PREFIX.encode()
_NONCE = 12
#: Opened texts kept in memory, all keys together (about their size in bytes times this).
_OPENED_MAX = 20_000
#: Texts longer than this (checkpoints, snapshots) are opened each time, never remembered,
#: so the map stays within about _OPENED_MAX x _REMEMBER_MAX characters plus their keys.
_REMEMBER_MAX = 4_096
#: Words one owner's token cache remembers before it starts afresh.
_OWNER_WORDS = 100_000
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
#: Bytes of an ASCII text: letters lowered, digits kept, every other byte a space, so that
#: ``split()`` finds what ``_WORD`` finds in its case-folded text, five times faster.
_ASCII_WORDS = bytes(
    ord(chr(b).lower()) if chr(b).isalnum() and b < 128 else 32 for b in range(256)
)


class KeyringError(ConfigurationError):
    """The master key or the keyring is missing, wrong or unreadable: the store refuses to
    start rather than write or serve anything in plain text."""

    code = "keyring_error"


#: (key id, data key bytes) for an owner; None from ``lookup`` when the key is gone.
KeyLookup = Callable[[str], "bytes | None"]
KeyForOwner = Callable[[str, str], tuple[str, bytes]]


class _Key:
    __slots__ = ("aead", "digests", "id", "invalid", "terms")

    def __init__(self, key_id: str, secret: bytes) -> None:
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        self.invalid = InvalidTag
        self.id = key_id
        self.aead = AESGCM(secret)
        # The term key is derived, so the index never holds a key that opens content.
        self.terms = hashlib.blake2b(secret, digest_size=32, person=b"memstrata-terms").digest()
        # Digests of content kept beside sealed text (a context's prefix chain, a node
        # turn's): keyed, or a guessed text could be checked against them.
        self.digests = hashlib.blake2b(secret, digest_size=32, person=b"memstrata-digest").digest()


class Sealer:
    """Seals and opens texts with per-owner data keys from a keyring.

    ``key_for_owner(tenant, user)`` returns the owner's (key id, key), creating one when
    the owner has none; ``lookup(key_id)`` returns a key or None once it was destroyed.
    Keys are cached unwrapped for the life of the process (:meth:`forget` drops one).
    """

    def __init__(
        self,
        key_for_owner: KeyForOwner,
        lookup: KeyLookup,
        destroy: Callable[[str, str], bool] | None = None,
        keyring_id: str | None = None,
    ) -> None:
        self.keyring_id = keyring_id
        self._for_owner = key_for_owner
        self._lookup = lookup
        self._destroy = destroy
        self._by_owner: dict[tuple[str, str], _Key] = {}
        self._by_id: dict[str, _Key | None] = {}
        self._term_cache = TermCaches()
        # Opened texts: (table, row) -> (stored value, its text). The same rows are read
        # again and again (a branch's ancestors, every history call), so a value opened
        # once for its table and row is served from memory while the row holds that very
        # value (compared, not hashed: cheaper for a long value). A value moved elsewhere is
        # never served from here; all is dropped when any key is destroyed.
        self._opened: dict[tuple[str, str], tuple[str, str]] = {}

    def _owner_key(self, tenant: str, user: str) -> _Key:
        key = self._by_owner.get((tenant, user))
        if key is None:
            key_id, secret = self._for_owner(tenant, user)
            key = _Key(key_id, secret)
            self._by_owner[(tenant, user)] = key
            self._by_id[key_id] = key
        return key

    def _id_key(self, key_id: str) -> _Key | None:
        if key_id in self._by_id:
            return self._by_id[key_id]
        secret = self._lookup(key_id)
        key = None if secret is None else _Key(key_id, secret)
        if key is not None:  # a missing key may be created later only under a new id
            self._by_id[key_id] = key
        return key

    def forget(self, tenant: str, user: str) -> None:
        """Drop the owner's cached key (after the keyring destroyed it)."""
        key = self._by_owner.pop((tenant, user), None)
        if key is not None:
            self._by_id.pop(key.id, None)
            self._term_cache.discard(key.id)
            self._opened.clear()  # rare (a user deleted): simpler than an index by key

    def destroy(self, tenant: str, user: str) -> bool:
        """Destroy the owner's data key in the keyring; True when there was one."""
        key = self._by_owner.get((tenant, user))
        self.forget(tenant, user)
        if key is not None:
            self._by_id[key.id] = None
        return bool(self._destroy and self._destroy(tenant, user))

    def seal(self, table: str, row: str, tenant: str, user: str, text: str) -> str:
        key = self._owner_key(tenant, user)
        nonce = os.urandom(_NONCE)
        body = key.aead.encrypt(nonce, text.encode(), _ad(table, row, key.id))
        value = f"{PREFIX}{key.id}:{binascii.b2a_base64(nonce + body, newline=False).decode()}"
        # What is written is often read back soon (the keyword flush reads each new
        # message): remembered as if opened, it is not decrypted again.
        self._remember(table, row, value, text)
        return value

    def open(self, table: str, row: str, value: str) -> str | None:
        """``value``'s text (None once its key is destroyed); a value not sealed, as is."""
        known = self._opened.get((table, row))
        if known is not None and known[0] == value:
            return known[1]
        if not value.startswith(PREFIX):
            return value
        key_id, _, data = value[len(PREFIX) :].partition(":")
        key = self._id_key(key_id)
        if key is None:
            return None
        try:
            raw = binascii.a2b_base64(data)
            text = key.aead.decrypt(raw[:_NONCE], raw[_NONCE:], _ad(table, row, key_id)).decode()
        except (key.invalid, ValueError, binascii.Error) as exc:
            raise Corruption(
                f"a sealed value of {table} does not open with its key: it was altered or "
                "moved from another row",
                table=table,
            ) from exc
        self._remember(table, row, value, text)
        return text

    def _remember(self, table: str, row: str, value: str, text: str) -> None:
        if len(text) > _REMEMBER_MAX:
            return
        opened = self._opened
        if len(opened) >= _OPENED_MAX:  # a bound, not an LRU: start afresh
            opened.clear()
        opened[table, row] = (value, text)

    def seal_bytes(self, table: str, row: str, tenant: str, user: str, data: bytes) -> bytes:
        key = self._owner_key(tenant, user)
        nonce = os.urandom(_NONCE)
        body = key.aead.encrypt(nonce, data, _ad(table, row, key.id))
        return f"{PREFIX}{key.id}:".encode() + nonce + body

    def open_bytes(self, table: str, row: str, value: bytes) -> bytes | None:
        head, _, raw = value[len(PREFIX) :].partition(b":")
        key_id = head.decode("ascii", "replace")
        key = self._id_key(key_id)
        if key is None:
            return None
        try:
            return bytes(key.aead.decrypt(raw[:_NONCE], raw[_NONCE:], _ad(table, row, key_id)))
        except (key.invalid, ValueError) as exc:
            raise Corruption(
                f"a sealed value of {table} does not open with its key: it was altered or "
                "moved from another row",
                table=table,
            ) from exc

    def terms(self, tenant: str, user: str, words: Iterable[str]) -> list[str]:
        """``words`` (case-folded) stemmed and hashed with the owner's term key."""
        return self._owner_terms(tenant, user).words(words)

    def index_text(self, tenant: str, user: str, text: str) -> str:
        """What the keyword index stores for ``text``: its words hashed with the owner's
        term key (see :meth:`_Terms.text`)."""
        return self._owner_terms(tenant, user).text(text)

    def digest_key(self, tenant: str, user: str) -> bytes:
        """The owner's key for digests of their content (see :func:`content_hash`)."""
        return self._owner_key(tenant, user).digests

    def _owner_terms(self, tenant: str, user: str) -> _Terms:
        key = self._owner_key(tenant, user)
        return self._term_cache.get(key.id, lambda: _Terms(partial(_hashed, key.terms)))


class _Terms:
    """One owner's index tokens, remembered: words repeat a lot, so a word met before costs
    one lookup (no folding, stemming or hashing). ``make`` turns a folded word into its
    token."""

    __slots__ = ("found", "made", "make_token")

    def __init__(self, make: Callable[[str], str]) -> None:
        self.make_token = make
        self.made: dict[str, str] = {}  # a folded word -> its token
        # A word as found in a text (bytes when the text is ASCII) -> its token; a word
        # too long to index is never kept, so a text holding one takes the slow way.
        self.found: dict[str | bytes, str] = {}

    def size(self) -> int:
        return len(self.made) + len(self.found)

    def full(self) -> bool:
        return self.size() > _OWNER_WORDS

    def make(self, word: str) -> str:
        token = self.made[word] = self.make_token(word)
        return token

    def words(self, words: Iterable[str]) -> list[str]:
        """The tokens of ``words`` (case-folded and folded, as a query's are)."""
        get = self.made.get
        return [get(word) or self.make(word) for word in words]

    def index(self, word: str | bytes) -> str:
        """``word``'s token, remembered ("" for a word too long to index, not remembered)."""
        token = self.found.get(word)
        if token is None:
            folded = word.decode() if isinstance(word, bytes) else fold(word)
            if len(folded) > _STEM_MAX:
                return ""
            token = self.found[word] = self.made.get(folded) or self.make(folded)
        return token

    def text(self, text: str) -> str:
        """The tokens of ``text``'s words, joined by spaces: its words as FTS5's
        ``unicode61 remove_diacritics 2`` tokenizer finds them, case-folded. Words longer
        than 64 characters are left out."""
        words: Sequence[str | bytes]
        if text.isascii():  # the common case, split in C: the same words, as bytes
            words = text.encode().translate(_ASCII_WORDS).split()
        else:
            words = _WORD.findall(text.casefold())
        try:
            return " ".join(map(self.found.__getitem__, words))
        except KeyError:  # a word not met before (or one too long to index)
            return " ".join(filter(None, map(self.index, words)))


def _hashed(key: bytes, word: str) -> str:
    """A sealed index token: the word's stem hashed with the owner's term key."""
    return "h" + hashlib.blake2b(stem(word).encode(), digest_size=10, key=key).hexdigest()


_HASHED_TERMS = re.compile(r"h[0-9a-f]{20}(?: h[0-9a-f]{20})*")


def hashed_terms(body: str) -> bool:
    """Whether ``body`` is sealed index tokens alone (what :meth:`Sealer.index_text` makes)."""
    return _HASHED_TERMS.fullmatch(body) is not None


#: ASCII bytes other than letters and digits: a folded word may hold one ("⑴" folds to
#: "(1)"), which FTS5's ``ascii`` tokenizer would split the token at.
_NOT_ALNUM = re.compile(r"[\x00-\x2f\x3a-\x40\x5b-\x60\x7b-\x7f]")


def _prefixed(prefix: str, word: str) -> str:
    """A plain index token: the word's stem behind its owner's prefix."""
    if not word.isalnum():
        word = _NOT_ALNUM.sub("", word)
    return prefix + stem(word)


def owner_prefix(tenant: str, user: str) -> str:
    """The 13 characters every plain index token of one owner starts with (a 64-bit digest
    of the owner, in lowercase base32: letters and digits, a fixed length, so a token
    splits into its owner and its stem one way only)."""
    digest = hashlib.blake2b(f"{tenant}\x00{user}".encode(), digest_size=8).digest()
    return base64.b32encode(digest).decode().rstrip("=").lower()


class TermCaches:
    """Owners' :class:`_Terms`: at most ``owners`` of them and about ``words`` remembered
    words in all (checked on every new owner and every ``check_every`` uses), the least
    recently used owner leaving first; one owner's cache starts afresh past
    :data:`_OWNER_WORDS`. A server meets many owners, and each cache grows with the words
    its owner wrote."""

    def __init__(self, owners: int = 1_024, words: int = 250_000, check_every: int = 256) -> None:
        self.owners, self.words, self.check_every = owners, words, check_every
        self._by_owner: OrderedDict[Hashable, _Terms] = OrderedDict()
        self._lock = threading.Lock()
        self._uses = 0

    def __len__(self) -> int:
        return len(self._by_owner)

    def size(self) -> int:
        """The words remembered, all owners together."""
        return sum(t.size() for t in list(self._by_owner.values()))

    def get(self, owner: Hashable, make: Callable[[], _Terms]) -> _Terms:
        self._uses += 1
        terms = self._by_owner.get(owner)
        if terms is not None and not terms.full() and self._uses % self.check_every:
            with contextlib.suppress(KeyError):  # another thread may have evicted it
                self._by_owner.move_to_end(owner)
            return terms
        with self._lock:
            terms = self._by_owner.pop(owner, None)
            if terms is None or terms.full():
                terms = make()
            self._by_owner[owner] = terms
            total = self.size()
            while len(self._by_owner) > 1 and (
                len(self._by_owner) > self.owners or total > self.words
            ):
                _, gone = self._by_owner.popitem(last=False)
                total -= gone.size()
        return terms

    def discard(self, owner: Hashable) -> None:
        with self._lock:
            self._by_owner.pop(owner, None)


#: Plain index tokens, for the owners met most recently.
_PLAIN = TermCaches()


def _plain_terms(tenant: str, user: str) -> _Terms:
    return _PLAIN.get(
        (tenant, user), lambda: _Terms(partial(_prefixed, owner_prefix(tenant, user)))
    )


def plain_index_terms(tenant: str, user: str, text: str) -> str:
    """What the keyword index stores for ``text`` with encryption off: each word's Porter
    stem behind the owner's prefix, joined by spaces."""
    return _plain_terms(tenant, user).text(text)


def _ad(table: str, row: str, key_id: str) -> bytes:
    return f"{table}\x1f{row}\x1f{key_id}".encode()


_current: ContextVar[Sealer | None] = ContextVar("memstrata_sealer", default=None)


def active() -> Sealer | None:
    """The sealer of the plan being run (None: encryption is off)."""
    return _current.get()


class using:  # noqa: N801 - a context manager read as a phrase: ``with using(sealer):``
    """Make ``sealer`` the active one for a block (the sealed engine wraps each plan)."""

    __slots__ = ("_sealer", "_token")

    def __init__(self, sealer: Sealer | None) -> None:
        self._sealer = sealer
        self._token: Any = None

    def __enter__(self) -> None:
        self._token = _current.set(self._sealer)

    def __exit__(self, *exc: object) -> None:
        _current.reset(self._token)


def is_sealed(value: object) -> bool:
    """Whether a stored text (or a blob) is sealed."""
    if isinstance(value, bytes):
        return value.startswith(BYTES_PREFIX)
    return isinstance(value, str) and value.startswith(PREFIX)


def seal(table: str, row: str, tenant: str, user: str, text: str | None) -> str | None:
    """``text`` sealed for ``(tenant, user)`` in ``table`` row ``row`` (as is when off).

    A text that starts with :data:`PREFIX` is refused (InvalidInput), encryption on or
    off: stored clear, it would read back as a sealed value, and a store must read the
    same whichever way it was written."""
    if not text:
        return text
    if text.startswith(PREFIX):
        column = table.rpartition(".")[2]
        raise InvalidInput(
            f"{column} may not start with ESC 'ms1:', the mark of an encrypted value",
            field=column,
        )
    sealer = _current.get()
    if sealer is None:
        return text
    return sealer.seal(table, row, tenant, user, text)


def _reader() -> Sealer:
    """The active sealer, to open a sealed value: with encryption off, a sealed value is a
    configuration error, never served as ciphertext nor silently dropped."""
    sealer = _current.get()
    if sealer is None:
        raise KeyringError(
            "this store holds encrypted text: set MEMSTRATA_ENCRYPT_AT_REST=true and "
            "MEMSTRATA_MASTER_KEY_FILE to read it"
        )
    return sealer


def opener() -> Callable[[str, str, str], str | None]:
    """The active sealer's :meth:`Sealer.open`, to open the sealed values of one row with
    one lookup of the sealer; with encryption off, :func:`unseal`'s configuration error."""
    return _reader().open


def unseal(table: str, row: str, value: str | None) -> str | None:
    """The text of a stored value: as is when not sealed, None when its key is destroyed.

    A sealed value read with encryption off is a configuration error, never served as
    ciphertext nor silently dropped.
    """
    if value is None or not value.startswith(PREFIX):
        return value
    return _reader().open(table, row, value)


def seal_bytes(table: str, row: str, tenant: str, user: str, data: bytes) -> bytes:
    """:func:`seal` for a binary value (a blob column or a blob store object): the prefix,
    the key id, then the nonce and ciphertext as bytes."""
    sealer = _current.get()
    if sealer is None or not data:
        return data
    return sealer.seal_bytes(table, row, tenant, user, data)


def unseal_bytes(table: str, row: str, value: bytes) -> bytes | None:
    """:func:`unseal` for a binary value: as is when not sealed, None once the key is gone."""
    if not value.startswith(BYTES_PREFIX):
        return value
    return _reader().open_bytes(table, row, value)


#: FTS5's porter tokenizer leaves these alone, so the hashed index does the same.
_STEM_MIN, _STEM_MAX = 3, 64


@lru_cache(maxsize=1)
def _porter() -> Any:
    # The Snowball project's Porter stemmer: the algorithm of SQLite's FTS5 ``porter``
    # tokenizer, which the keyword index used before it made its tokens in Python (7,748 of
    # 7,773 distinct words of a chat corpus stem identically; the rest are rare -logy/-ly
    # words). snowballstemmer hands out PyStemmer's C build of the same algorithm (both are
    # dependencies; about 20x faster than the pure-Python one). Imported on first use.
    import snowballstemmer

    return snowballstemmer.stemmer("porter")


@lru_cache(maxsize=1 << 16)
def stem(word: str) -> str:
    """``word``'s Porter stem, as the keyword index stores it (behind the owner's prefix,
    or hashed with the owner's key when sealing)."""
    if not _STEM_MIN <= len(word) <= _STEM_MAX:
        return word
    return str(_porter().stemWord(word))


def fold(word: str) -> str:
    """Diacritics removed, as FTS5's ``remove_diacritics 2`` does ("café" meets "cafe")."""
    if word.isascii():
        return word
    return "".join(c for c in unicodedata.normalize("NFKD", word) if not unicodedata.combining(c))


def index_terms(tenant: str, user: str, text: str, *, owner_tokens: bool = False) -> str:
    """What the keyword index stores for ``text``: with ``owner_tokens`` (SQLite's index by
    owner and word), each word's stem behind the owner's prefix; without (PostgreSQL's
    full-text column, which tokenizes and stems itself), the text as is. Either way, when
    sealing, the stems hashed with the owner's term key."""
    sealer = _current.get()
    if sealer is not None:
        return sealer.index_text(tenant, user, text)
    return plain_index_terms(tenant, user, text) if owner_tokens else text


def query_terms(
    tenant: str, user: str, terms: Iterable[str], *, owner_tokens: bool = False
) -> list[str]:
    """A query's terms as the index holds them for the owner (see :func:`index_terms`)."""
    sealer = _current.get()
    if sealer is None and not owner_tokens:
        return list(terms)
    folded = [fold(t.casefold()) for t in terms]
    if sealer is not None:
        return sealer.terms(tenant, user, folded)
    return _plain_terms(tenant, user).words(folded)


def digest_key(tenant: str, user: str) -> bytes | None:
    """The owner's key for digests of their content when sealing (None when off)."""
    sealer = _current.get()
    return None if sealer is None else sealer.digest_key(tenant, user)


def content_hash(key: bytes | None) -> Any:
    """A hash for a digest of content that is stored: SHA-256 when encryption is off; with
    the owner's :func:`digest_key`, BLAKE2b keyed with it (32 bytes, the same length), so
    the stored digest neither confirms a guessed text without the key nor outlives it."""
    return hashlib.sha256() if key is None else hashlib.blake2b(key=key, digest_size=32)


def lookup_key(tenant: str, user: str, text: str) -> str:
    """A text's lookup key as stored (a fact's ``content_key``): keyed with the owner's term
    key when sealing, so equal texts of one owner still meet in an index and nothing of
    the text is stored (as is when off)."""
    sealer = _current.get()
    if sealer is None:
        return text
    return "k" + sealer.terms(tenant, user, [text])[0][1:]
