"""Ed25519 signing keys: the key store, key ids, and public-key export/import.

Key id
    ``"ed25519:" + hex(SHA-256(raw 32-byte public key))[:32]`` — the first 16 bytes of the digest.
    It is always *computed* from the key, never read from a label, so a file cannot claim to be a
    key it is not. 128 bits keeps ids short while collisions stay out of reach.

Key store (default ``<data dir>/keys``, directory mode 0700)::

    keyring.toml               which key is active; when each key was created and retired
    ed25519-<hex>.key          private key, PKCS#8 PEM, mode 0600
    ed25519-<hex>.pub.pem      public key, SubjectPublicKeyInfo PEM, mode 0644
    .lock                      serialises create/rotate across processes

Keys are never deleted: rotation makes a new key active and marks the old one retired, so records
signed under it stay verifiable. Every file is written atomically (temp file created with its final
mode, fsync, rename, fsync of the directory), so a crash leaves either the old or the new state.

Auditors do not use the store: they load public keys they obtained independently with
:func:`load_trusted_public_keys` (PEM, JWK or JWK Set; a file or a directory of them).

Private key material never appears in a repr, a log line or an error message; :class:`SigningKey`
shows only its id and refuses to be pickled.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import hashlib
import json
import os
import secrets
import threading
import tomllib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NoReturn

import tomli_w
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from rng_service.core.errors import Conflict, ErrorFamily, InvalidInput, NotFound, quote
from rng_service.core.files import write_exclusive
from rng_service.core.json_input import JsonObject, parse_json
from rng_service.core.times import parse_rfc3339

KEY_ID_PREFIX = "ed25519:"
KEYRING_FILE = "keyring.toml"
PRIVATE_MODE = 0o600
PUBLIC_MODE = 0o644
DIR_MODE = 0o700
# File suffixes read when load_trusted_public_keys is given a directory.
TRUSTED_SUFFIXES = (".pem", ".jwk", ".jwks", ".json")

_PEM_PUBLIC_BEGIN = "-----BEGIN PUBLIC KEY-----"
_PEM_PUBLIC_END = "-----END PUBLIC KEY-----"


class KeyStoreError(ErrorFamily):
    """A key store or key file problem. Messages name files and key ids, never key material."""


class KeyFileError(KeyStoreError, InvalidInput):
    """A key file or key ring that cannot be read or used (format, algorithm, mode, mismatch)."""


class KeyNotFound(KeyStoreError, NotFound):
    """No such key, no active key, or no key store where one was expected."""


class KeyExists(KeyStoreError, Conflict):
    """An active key exists already: creating another would silently replace it."""

    reason_code = "KEY_EXISTS"


def data_dir() -> Path:
    """The service data directory: ``$FAIRSHOE_DATA_DIR``, default ``./var``.

    Kept here until a shared ``rng_service.core.config`` provides it; then this should
    delegate there.
    """
    return Path(os.environ.get("FAIRSHOE_DATA_DIR", "var"))


def default_key_dir() -> Path:
    """Where keys live by default: ``keys`` in the service's data directory."""
    return data_dir() / "keys"


# --- key ids and the signing key ----------------------------------------------------------------


def raw_public_bytes(public_key: Ed25519PublicKey) -> bytes:
    """The 32 raw bytes of an Ed25519 public key (what a key id hashes). ``public_bytes_raw``,
    the same bytes as ``public_bytes(Encoding.Raw, PublicFormat.Raw)`` at about half its cost
    (0.4 µs against 0.75): every signature verified looks its key's id up."""
    return public_key.public_bytes_raw()


def key_id(public_key: Ed25519PublicKey) -> str:
    """The id of a public key: ``ed25519:`` + first 16 bytes of SHA-256(raw key), in hex."""
    return KEY_ID_PREFIX + hashlib.sha256(raw_public_bytes(public_key)).hexdigest()[:32]


class SigningKey:
    """An Ed25519 private key with its id. Only the id is ever shown."""

    __slots__ = ("_private", "key_id", "public_key")

    def __init__(self, private_key: Ed25519PrivateKey) -> None:
        self._private = private_key
        self.public_key: Ed25519PublicKey = private_key.public_key()
        self.key_id: str = key_id(self.public_key)

    @classmethod
    def generate(cls) -> SigningKey:
        """A new random key."""
        return cls(Ed25519PrivateKey.generate())

    def sign(self, message: bytes) -> bytes:
        """The Ed25519 signature (64 bytes) of ``message``."""
        return self._private.sign(message)

    def __repr__(self) -> str:
        return f"SigningKey(key_id={self.key_id!r})"

    __str__ = __repr__

    def __reduce__(self) -> NoReturn:
        # Pickling would copy the private key into queues, caches or crash dumps.
        raise TypeError("SigningKey cannot be pickled")

    def _private_pem(self) -> bytes:
        return self._private.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )


# --- atomic files --------------------------------------------------------------------------------


def fsync_dir(directory: Path) -> None:
    """Make the entries of ``directory`` durable (a file renamed into it survives a crash)."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, mode: int, *, sync_dir: bool = True) -> None:
    """Write ``data`` to ``path`` so readers see the old file or the whole new one, never a part.

    The temp file is created with ``mode`` (and fchmod'ed to it, whatever the umask) before any byte
    is written, so a private key is never readable by others, not even for an instant.
    ``sync_dir=False`` leaves the directory's fsync (which makes the rename durable) to the
    caller, who writes many files into one directory and syncs it once (:func:`fsync_dir`).
    """
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    try:
        write_exclusive(tmp, data, mode, fsync=True)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if sync_dir:
        fsync_dir(path.parent)


# --- the key store -------------------------------------------------------------------------------


@dataclass(frozen=True)
class KeyInfo:
    """One key of the key ring: its id, when it was created and retired, and whether
    it is the active signing key."""

    key_id: str
    created_at: str
    retired_at: str | None
    active: bool

    @property
    def status(self) -> str:
        """``active`` or ``retired``, as ``fairshoe keys list`` shows it."""
        return "active" if self.active else "retired"


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _file_stem(kid: str) -> str:
    return kid.replace(":", "-")


class KeyStore:
    """The service's signing keys in one directory."""

    def __init__(self, root: Path | str | None = None) -> None:
        self.root = Path(root) if root is not None else default_key_dir()

    def __repr__(self) -> str:
        return f"KeyStore({str(self.root)!r})"

    def private_path(self, kid: str) -> Path:
        """The file of the private key ``kid``."""
        return self.root / f"{_file_stem(kid)}.key"

    def public_path(self, kid: str) -> Path:
        """The file of the public key ``kid`` (PEM)."""
        return self.root / f"{_file_stem(kid)}.pub.pem"

    # reading

    def _read_keyring(self) -> dict[str, Any]:
        path = self.root / KEYRING_FILE
        try:
            with path.open("rb") as fh:
                ring = tomllib.load(fh)
        except FileNotFoundError:
            return {"active": "", "keys": []}
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise KeyFileError(f"cannot read key ring {path}: {exc}") from None
        entries = ring.get("keys")
        well_formed = (
            isinstance(entries, list)
            and isinstance(ring.get("active", ""), str)
            and all(
                isinstance(e, dict)
                and isinstance(e.get("key_id"), str)
                and isinstance(e.get("created_at"), str)
                for e in entries
            )
        )
        if not well_formed:
            raise KeyFileError(f"key ring {path} is malformed")
        return ring

    def list_keys(self) -> list[KeyInfo]:
        """Every key in the key ring, in the ring's order."""
        ring = self._read_keyring()
        active = ring.get("active", "")
        return [
            KeyInfo(e["key_id"], e["created_at"], e.get("retired_at"), e["key_id"] == active)
            for e in ring["keys"]
        ]

    def active_key_id(self) -> str | None:
        """The id of the key that signs now, or None if there is none."""
        return self._read_keyring().get("active") or None

    def load_signing_key(self, kid: str | None = None) -> SigningKey:
        """The private key ``kid`` (default: the active one), checked against its id and mode."""
        kid = kid or self.active_key_id()
        if kid is None:
            raise KeyNotFound(f"no active signing key in {self.root}; run `fairshoe keys create`")
        path = self.private_path(kid)
        try:
            mode = path.stat().st_mode & 0o777
            if mode & 0o077:
                raise KeyFileError(
                    f"private key file {path} has mode {mode:04o}; it must be 0600 (chmod 600)"
                )
            pem = path.read_bytes()
        except OSError as exc:
            raise KeyFileError(f"cannot read private key file {path}: {exc.strerror}") from None
        key = SigningKey(_parse_private_pem(pem, path))
        if key.key_id != kid:
            raise KeyFileError(f"private key file {path} holds key {key.key_id}, not {kid}")
        return key

    def public_keys(self, kids: Iterable[str] | None = None) -> dict[str, Ed25519PublicKey]:
        """Public keys of the store (default: all, retired included), keyed by their computed id."""
        known = [k.key_id for k in self.list_keys()]
        wanted = list(kids) if kids is not None else known
        result: dict[str, Ed25519PublicKey] = {}
        for kid in wanted:
            if kid not in known:
                raise KeyNotFound(f"no key {kid} in {self.root}")
            path = self.public_path(kid)
            loaded = _load_pem_file(path)
            if kid not in loaded:
                raise KeyFileError(f"public key file {path} does not hold key {kid}")
            result[kid] = loaded[kid]
        return result

    # writing

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.root.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
        os.chmod(self.root, DIR_MODE)  # mkdir honours umask, and the directory may predate us
        fd = os.open(self.root / ".lock", os.O_WRONLY | os.O_CREAT, PRIVATE_MODE)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def create(self, *, force: bool = False) -> KeyInfo:
        """Make a new active key; refuses if one is active unless ``force`` (then it is retired)."""
        with self._locked():
            active = self.active_key_id()
            if active and not force:
                raise KeyExists(
                    f"an active key already exists ({active}); "
                    "use `keys rotate` or `keys create --force`"
                )
            return self._add_active_key()

    def rotate(self) -> tuple[KeyInfo, str]:
        """Make a new active key and retire the current one; returns (new key, retired key id)."""
        if not self.root.is_dir():  # checked before _locked, which would create the directory
            raise KeyNotFound(f"no key store at {self.root}; run `fairshoe keys create`")
        with self._locked():
            old = self.active_key_id()
            if old is None:
                raise KeyNotFound(
                    f"no active key in {self.root} to rotate; run `fairshoe keys create`"
                )
            return self._add_active_key(), old

    def _add_active_key(self) -> KeyInfo:
        key = SigningKey.generate()
        atomic_write(self.private_path(key.key_id), key._private_pem(), PRIVATE_MODE)
        atomic_write(self.public_path(key.key_id), public_key_pem(key.public_key), PUBLIC_MODE)
        ring = self._read_keyring()
        now = _now()
        for entry in ring["keys"]:
            if entry["key_id"] == ring.get("active"):
                entry["retired_at"] = now
        ring["keys"].append({"key_id": key.key_id, "created_at": now})
        ring["active"] = key.key_id
        # The key files land first: the ring never names a key whose files are missing.
        atomic_write(self.root / KEYRING_FILE, tomli_w.dumps(ring).encode(), PRIVATE_MODE)
        return KeyInfo(key.key_id, now, None, True)


@dataclass(frozen=True)
class ActiveSigningKey:
    """The key that signs now, with the time its key ring entry says it began to (RFC 3339)."""

    key: SigningKey
    valid_from: str


class ActiveKey:
    """The key store's active key, followed as it rotates: :meth:`current` re-reads the key ring
    when its file changed (one ``stat`` a call), so a running service signs with the key
    ``fairshoe keys rotate`` made, from the moment the new ring is in place, without a restart.
    A key signing after its ring entry says it was retired would fail every audit.

    A ring that cannot be read or names an unusable key keeps the key already loaded and raises
    the :class:`KeyStoreError` only while none was ever loaded: a half-finished edit by hand must
    not stop the service signing with the key that is still valid."""

    def __init__(self, store: KeyStore) -> None:
        self._store = store
        # stat'ed at every call: its path made once, as the str os.stat takes without a Path's
        # __fspath__
        self._ring = os.fspath(store.root / KEYRING_FILE)
        self._lock = threading.Lock()
        self._seen: tuple[int, int, int] | None = None
        self._active: ActiveSigningKey | None = None

    @property
    def store(self) -> KeyStore:
        """The key store followed."""
        return self._store

    def current(self) -> ActiveSigningKey:
        """The active key now (loaded again if the key ring changed since the last call)."""
        stamp = self._ring_stamp()
        with self._lock:
            if self._active is None or stamp != self._seen:
                self._reload(stamp)
            assert self._active is not None
            return self._active

    def _ring_stamp(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self._ring)
        except OSError:
            return None
        return st.st_ino, st.st_mtime_ns, st.st_size  # a rotation renames a new file in

    def _reload(self, stamp: tuple[int, int, int] | None) -> None:
        try:
            key = self._store.load_signing_key()
            info = next(k for k in self._store.list_keys() if k.key_id == key.key_id)
            loaded = ActiveSigningKey(key, rfc3339(info.created_at))
        except (KeyStoreError, StopIteration) as exc:
            if self._active is None:
                raise KeyFileError(f"{self._store}: no usable active key ({exc})") from None
            return  # keep signing with the key loaded before; try again at the next call
        self._active, self._seen = loaded, stamp


def load_signing_key(store_dir: Path | str | None = None) -> SigningKey:
    """The active signing key of the service's key store."""
    return KeyStore(store_dir).load_signing_key()


def _parse_private_pem(pem: bytes, path: Path) -> Ed25519PrivateKey:
    # `from None`: a parser's exception must not carry the file's bytes along.
    try:
        key = serialization.load_pem_private_key(pem, password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm):
        raise KeyFileError(f"private key file {path} is not an unencrypted PEM key") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise KeyFileError(f"private key file {path} is not an Ed25519 key")
    return key


# --- export ---------------------------------------------------------------------------------------


def public_key_pem(public_key: Ed25519PublicKey) -> bytes:
    """The public key as PEM (SubjectPublicKeyInfo), the form auditors import."""
    return public_key.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _b64url_decode(text: str) -> bytes:
    """Strict unpadded base64url: one encoding per byte string (re-encoding must give it back)."""
    try:
        data = base64.b64decode(text + "=" * (-len(text) % 4), altchars=b"-_", validate=True)
    except (ValueError, TypeError):
        raise ValueError("not base64url") from None
    if _b64url(data) != text:
        raise ValueError("not canonical unpadded base64url")
    return data


def rfc3339(stamp: str) -> str:
    """A key ring time (``2024-05-01T12:00:00+00:00``) as RFC 3339 UTC (``...T12:00:00Z``)."""
    try:
        when = datetime.fromisoformat(stamp)
    except ValueError:
        raise KeyStoreError(f"key ring time {stamp!r} is not ISO 8601") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC).isoformat().replace("+00:00", "Z")


def key_validity(info: KeyInfo) -> dict[str, str]:
    """When a key signs, as JWK members: ``valid_from`` (it was created) and ``valid_until`` (it
    was rotated out; absent while it is the active key), RFC 3339 UTC. They are not registered
    JWK members, so a JWK reader that does not know them ignores them (RFC 7517 section 4), as
    :func:`load_trusted_public_keys` does; a retired key still verifies what it signed."""
    members = {"valid_from": rfc3339(info.created_at)}
    if info.retired_at:
        members["valid_until"] = rfc3339(info.retired_at)
    return members


def public_key_jwk(public_key: Ed25519PublicKey, validity: KeyInfo | None = None
                   ) -> dict[str, str]:
    """RFC 8037 OKP JWK of an Ed25519 public key, with ``kid`` = its key id, and with its
    validity period (:func:`key_validity`) if given."""
    jwk = {
        "kty": "OKP",
        "crv": "Ed25519",
        "x": _b64url(raw_public_bytes(public_key)),
        "kid": key_id(public_key),
        "alg": "EdDSA",
        "use": "sig",
    }
    if validity is not None:
        jwk.update(key_validity(validity))
    return jwk


def export_pem(keys: Mapping[str, Ed25519PublicKey]) -> str:
    """PEM blocks, one per key, each preceded by a ``# key_id`` comment line (ignored on load)."""
    return "".join(
        f"# {kid}\n{public_key_pem(pk).decode('ascii')}" for kid, pk in sorted(keys.items())
    )


def export_jwk(keys: Mapping[str, Ed25519PublicKey], *, as_set: bool = True,
               validity: Mapping[str, KeyInfo] | None = None) -> str:
    """A JWK Set (``{"keys": [...]}``), or with ``as_set=False`` the one key as a bare JWK; each
    key with its validity period if ``validity`` (key id -> its key ring entry) has it."""
    known = validity or {}
    jwks = [public_key_jwk(pk, known.get(kid)) for kid, pk in sorted(keys.items())]
    if not as_set:
        if len(jwks) != 1:
            raise KeyFileError(f"a single JWK needs exactly one key, got {len(jwks)}")
        return json.dumps(jwks[0], indent=2) + "\n"
    return json.dumps({"keys": jwks}, indent=2) + "\n"


# --- import: keys an auditor trusts --------------------------------------------------------------


@dataclass(frozen=True)
class KeyValidity:
    """When a trusted key signs: ``valid_from`` up to ``valid_until`` (None: open-ended), as the
    JWK members :func:`key_validity` writes. A PEM key, or a JWK without them, is always valid.

    The key ring keeps times to the second, so a time is compared at one-second precision, both
    ends included: a record stamped 12:00:05.4 is within a key retired at 12:00:05.
    """

    valid_from: datetime | None = None
    valid_until: datetime | None = None

    def covers(self, when: datetime) -> bool:
        """True if the key may have signed at ``when`` (compared to the second, both ends
        included)."""
        second = when.astimezone(UTC).replace(microsecond=0)
        return ((self.valid_from is None or self.valid_from <= second)
                and (self.valid_until is None or second <= self.valid_until))

    def describe(self) -> str:
        """``valid from X until Y`` in RFC 3339 UTC, for a report."""
        def show(when: datetime | None, missing: str) -> str:
            return missing if when is None else when.isoformat().replace("+00:00", "Z")
        return (f"valid from {show(self.valid_from, 'any time')} "
                f"until {show(self.valid_until, 'now')}")


ALWAYS_VALID = KeyValidity()


@dataclass(frozen=True)
class TrustedKey:
    """A public key an auditor trusts, with the period in which it signed."""

    public_key: Ed25519PublicKey
    validity: KeyValidity = ALWAYS_VALID


def load_trusted_public_keys(path: Path | str) -> dict[str, Ed25519PublicKey]:
    """Public keys from a PEM file, a JWK, a JWK Set, or a directory of such files.

    Returns ``{key id: public key}`` with ids computed from the keys themselves; a JWK ``kid`` that
    disagrees with its key is an error, not a label to believe. A directory is read file by file
    (suffixes :data:`TRUSTED_SUFFIXES`); any file there that does not parse is an error rather than
    silently skipped, and so is finding no key at all. Private keys are refused.
    """
    return {kid: key.public_key for kid, key in load_trusted_keys(path).items()}


def load_trusted_keys(path: Path | str) -> dict[str, TrustedKey]:
    """:func:`load_trusted_public_keys` with each key's validity period (``valid_from`` and
    ``valid_until`` of a JWK, RFC 3339); a key listed twice with different periods is an error."""
    path = Path(path)
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix in TRUSTED_SUFFIXES)
        if not files:
            raise KeyNotFound(f"no key files ({', '.join(TRUSTED_SUFFIXES)}) in {path}")
    else:
        files = [path]
    result: dict[str, TrustedKey] = {}
    for file in files:
        for kid, key in _load_key_file(file).items():
            if result.setdefault(kid, key) != key:
                raise KeyFileError(f"{file}: key {kid} is listed with two validity periods")
    if not result:
        raise KeyNotFound(f"no public keys found in {path}")
    return result


def _load_key_file(path: Path) -> dict[str, TrustedKey]:
    try:
        text = path.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise KeyFileError(f"cannot read key file {path}: {exc}") from None
    if "PRIVATE KEY-----" in text:
        raise KeyFileError(f"{path} holds a private key; give public keys only")
    if text.lstrip().startswith("{"):
        return _load_jwk_text(text, path)
    return {kid: TrustedKey(key) for kid, key in _load_pem_text(text, path).items()}


def _load_pem_file(path: Path) -> dict[str, Ed25519PublicKey]:
    try:
        text = path.read_text("ascii")
    except (OSError, UnicodeDecodeError) as exc:
        raise KeyFileError(f"cannot read key file {path}: {exc}") from None
    return _load_pem_text(text, path)


def _pem_blocks(text: str) -> Iterator[str]:
    """Each PUBLIC KEY block in ``text``; lines outside blocks (comments, labels) are ignored."""
    start = text.find(_PEM_PUBLIC_BEGIN)
    while start != -1:
        end = text.find(_PEM_PUBLIC_END, start)
        if end == -1:
            raise ValueError("unterminated PEM block")
        yield text[start : end + len(_PEM_PUBLIC_END)] + "\n"
        start = text.find(_PEM_PUBLIC_BEGIN, end)


def _load_pem_text(text: str, path: Path) -> dict[str, Ed25519PublicKey]:
    result: dict[str, Ed25519PublicKey] = {}
    try:
        for block in _pem_blocks(text):
            key = serialization.load_pem_public_key(block.encode("ascii"))
            if not isinstance(key, Ed25519PublicKey):
                raise KeyFileError(f"{path}: a public key that is not Ed25519")
            result[key_id(key)] = key
    except (ValueError, UnsupportedAlgorithm) as exc:
        raise KeyFileError(f"{path}: bad PEM public key: {exc}") from None
    if not result:
        raise KeyFileError(f"{path}: no PEM public key (-----BEGIN PUBLIC KEY-----) found")
    return result


def _load_jwk_text(text: str, path: Path) -> dict[str, TrustedKey]:
    try:
        doc = parse_json(text)
    except InvalidInput as exc:
        raise KeyFileError(f"{path}: {exc.detail}") from None
    if isinstance(doc, dict) and "keys" in doc:
        entries = doc["keys"]
        if not isinstance(entries, list):
            raise KeyFileError(f'{path}: "keys" of a JWK Set must be a list')
    else:
        entries = [doc]
    result: dict[str, TrustedKey] = {}
    for index, entry in enumerate(entries):
        where = f"{path} key #{index}"
        key = jwk_to_public_key(entry, where=where)
        result[key_id(key)] = TrustedKey(key, jwk_validity(entry, where=where))
    return result


class _JwkFields(JsonObject):
    """A JWK's members, read with the one typed reader; a bad one is a KeyFileError."""

    @staticmethod
    def error(field: str, message: str) -> Exception:
        return KeyFileError(f"member {field} {message}")


def jwk_validity(jwk: object, *, where: str = "JWK") -> KeyValidity:
    """The ``valid_from``/``valid_until`` members of a JWK (RFC 3339 with a zone), if any."""
    try:
        doc = _JwkFields(jwk)
        bounds = [_jwk_time(doc, name) for name in ("valid_from", "valid_until")]
    except KeyFileError as exc:
        raise KeyFileError(f"{where}: {exc}") from None
    validity = KeyValidity(*bounds)
    if validity.valid_from and validity.valid_until and validity.valid_until < validity.valid_from:
        raise KeyFileError(f"{where}: valid_until is before valid_from")
    return validity


def _jwk_time(doc: JsonObject, name: str) -> datetime | None:
    text = doc.get_str(name, None)
    if text is None:
        return None
    when = parse_rfc3339(text)
    if when is None:
        raise KeyFileError(f"member {name} {quote(text)} is not an RFC 3339 time")
    return when


def jwk_to_public_key(jwk: object, *, where: str = "JWK") -> Ed25519PublicKey:
    """An Ed25519 public key from an RFC 8037 OKP JWK; a ``kid``, if present, must be its key id."""
    if not isinstance(jwk, dict):
        raise KeyFileError(f"{where}: a JWK must be a JSON object")
    if "d" in jwk:
        raise KeyFileError(f"{where}: holds a private key (member d); give public keys only")
    if jwk.get("kty") != "OKP" or jwk.get("crv") != "Ed25519":
        raise KeyFileError(f"{where}: not an Ed25519 key (need kty OKP, crv Ed25519)")
    doc = _JwkFields(jwk)
    try:
        raw = _b64url_decode(doc.get_str("x", ""))
    except ValueError as exc:
        raise KeyFileError(f"{where}: member x: {exc}") from None
    except KeyFileError:
        raw = b""
    if len(raw) != 32:
        raise KeyFileError(f"{where}: member x must be 32 bytes of base64url")
    key = Ed25519PublicKey.from_public_bytes(raw)
    kid = jwk.get("kid")
    if kid is not None and kid != key_id(key):
        raise KeyFileError(f"{where}: kid {quote(kid)} does not match its key (id {key_id(key)})")
    return key
