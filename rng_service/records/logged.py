"""A collected collection that carries its transparency log, as an export does.

``fairshoe collect rounds`` writes, beside its records, what ``fairshoe audit export`` writes: the
signing key's record (``keys/``), a commitment per shoe logged when the shoe is opened (``shoes/``),
then the shoe's rounds and its reveal, each file a leaf of a log in the order written, and
``log/`` (``leaves.jsonl`` with each leaf's inclusion proof, ``frontier.json`` of size 0 and the
signed ``checkpoint``; see :mod:`rng_service.audit.log_audit`). Without it, deleting rounds from a
collection (the last round of every shoe, the biggest wins) left no trace; with it, the audit
against that checkpoint (``audit verify --checkpoint``) names every leaf that is missing.

Durability: the envelopes a worker signs (:class:`BatchWriter`) are written without a sync each
(:func:`rng_service.records.durable.write_new`); :meth:`LoggedRecordWriter.finish` makes the whole
collection durable at once (:class:`~rng_service.records.durable.DurableTree`) and only then
writes ``log/``, each of its files atomically and fsynced, the signed checkpoint last. A crash
before that leaves a collection without a checkpoint (and perhaps a truncated file, which fails
its audit); a checkpoint on disk names only files that are on disk.

The log's origin is ``<base>/collect/<collection id>``: a slash cannot be in an operator id, so a
collection's checkpoints, even signed with the service's own key, are never those of an
operator's log (they would look like a split view of it).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import orjson

from game_math.rules import Rules
from rng_service.core.pools import stop_if_orphaned
from rng_service.crypto.keys import SigningKey, public_key_jwk
from rng_service.crypto.signing import sign_and_encode
from rng_service.log import DEFAULT_ORIGIN, Checkpoint, MemoryNodeStore, leaf_hash
from rng_service.log.checkpoint import sign_checkpoint
from rng_service.records.durable import DurableTree, write_new
from rng_service.records.schema import (
    KEYS_SUBDIR,
    LOG_CHECKPOINT_FILE,
    LOG_FRONTIER_FILE,
    LOG_LEAVES_FILE,
    LOG_SUBDIR,
    SHOES_SUBDIR,
    RecordWriter,
    key_payload,
    reveal_payload,
    rfc3339_now,
    rules_digest,
    shoe_commitment_payload,
    write_file,
)
from rng_service.rng.shoe import Shoe

#: the money a collected shoe's commitment names: a lab's rounds stake no one's money
COLLECT_MODE: Final = "DEMO"


def collect_operator(collection_id: str) -> str:
    """What ``audit verify --operator`` takes for a collection's log (``collect/<id>``)."""
    return f"collect/{collection_id}"


class _SignedFiles(RecordWriter):
    """A :class:`RecordWriter` that signs every envelope of a collection (the key record, shoe
    commitments, rounds, reveals), files it, and hands its bytes to :meth:`_logged` in the order
    written: the leaves of the collection's log."""

    def __init__(self, out_dir: Path, key: SigningKey) -> None:
        super().__init__(out_dir, key)
        for directory in (KEYS_SUBDIR, SHOES_SUBDIR):
            (out_dir / directory).mkdir(parents=True, exist_ok=True)

    def _log_envelope(self, rel: str, payload: dict[str, Any]) -> Path:
        data = sign_and_encode(payload, self.key)
        path = self.out_dir / rel
        self._write(path, data)
        self._logged(rel, data)
        return path

    def _write(self, path: Path, data: bytes) -> None:
        write_file(path, data)

    def _logged(self, rel: str, data: bytes) -> None:
        raise NotImplementedError

    def open_shoe(self, shoe: Shoe, rules: Rules) -> None:
        """Log the new shoe's commitment before any of its cards is dealt."""
        self._log_envelope(f"{SHOES_SUBDIR}/{shoe.id}.json", shoe_commitment_payload(
            shoe_id=shoe.id, commitment=shoe.commitment, game=rules.game,
            rules_digest=rules_digest(rules), decks=shoe.decks, mode=COLLECT_MODE,
            created_at=rfc3339_now()))

    def write_round(self, payload: dict[str, Any], rules: Rules) -> Path:
        """The round record, signed and logged (its rules document written once, unlogged)."""
        self.check_rules(payload, rules)
        self.write_rules(rules)
        return self._log_envelope(
            f"{self.rounds_dir.name}/{payload['round_id']}.json", payload)

    def write_reveal(self, shoe: Shoe) -> Path:
        """The finished shoe's reveal, signed and logged."""
        return self._log_envelope(f"{self.reveals_dir.name}/{shoe.id}.json",
                                  reveal_payload(shoe))


class LoggedRecordWriter(_SignedFiles):
    """A :class:`RecordWriter` that logs every envelope it writes, in order, and writes
    ``log/`` when :meth:`finish` is called. ``valid_from``: the key's validity start (its key
    record's member, as the trusted keys give it). Leaves written elsewhere (a
    :class:`BatchWriter` in a worker process) join the log through :meth:`add_leaves`.

    The envelopes it writes itself (the key record; every one when a caller collects into it
    directly) are written atomically and fsynced one by one, as any :class:`RecordWriter`'s."""

    def __init__(self, out_dir: Path, key: SigningKey, *, valid_from: str,
                 base_origin: str = DEFAULT_ORIGIN) -> None:
        super().__init__(out_dir, key)
        # opened before any envelope is written, so its sync reports a failed write of any
        self._durable = DurableTree(out_dir)
        self.collection_id = uuid.uuid4().hex
        self.origin = f"{base_origin}/{collect_operator(self.collection_id)}"
        self._tree = MemoryNodeStore()
        self._paths: list[str] = []
        self._log_envelope(f"{KEYS_SUBDIR}/{key.key_id}.json", key_payload(
            key_id=key.key_id, jwk=public_key_jwk(key.public_key), valid_from=valid_from))

    def _logged(self, rel: str, data: bytes) -> None:
        self._tree.append_entry(data)
        self._paths.append(rel)

    def add_leaves(self, leaves: Iterable[tuple[str, bytes]]) -> None:
        """Append leaves whose files are already written under the collection (durable or not:
        :meth:`finish` syncs them all before the log): (path under the collection, the leaf
        hash of its bytes), in log order."""
        for rel, leaf in leaves:
            self._tree.append(leaf)
            self._paths.append(rel)
        # their files start on their way to the disk now, so that little is left for finish
        self._durable.start_sync()

    def finish(self) -> str:
        """Make every file of the collection durable, then write ``log/`` (every leaf with its
        proof, the empty frontier, the checkpoint signed now, last); the checkpoint's note."""
        self._durable.sync()
        self._durable.close()
        size = self._tree.size
        log = self.out_dir / LOG_SUBDIR
        log.mkdir(exist_ok=True)
        write_file(log / LOG_LEAVES_FILE, _leaves_lines(
            self._paths, self._tree.inclusion_proofs(size)))
        write_file(log / LOG_FRONTIER_FILE, b'{"size": 0, "hashes": []}\n')
        note = sign_checkpoint(Checkpoint(self.origin, size, self._tree.root(),
                                          datetime.now(UTC)), self.key)
        write_file(log / LOG_CHECKPOINT_FILE, note.encode("utf-8"))
        return note


def _leaves_lines(paths: list[str], proofs: Iterable[list[bytes]]) -> bytes:
    """``leaves.jsonl``: one compact JSON line per leaf, its index, path and proof (orjson:
    the same bytes as ``json.dumps`` with compact separators for these ASCII paths, 3x faster
    over a collection's tens of thousands of leaves)."""
    return b"".join(orjson.dumps({"index": i, "path": rel, "proof": [h.hex() for h in proof]})
                    + b"\n" for i, (rel, proof) in enumerate(zip(paths, proofs, strict=True)))


class BatchWriter(_SignedFiles):
    """Signs and files a batch of a collection's envelopes without logging them: a worker
    process's writer (``rng_service.records.collect_workers``). Each envelope is written as it
    is signed, as a new file not yet synced (:func:`~rng_service.records.durable.write_new`):
    the collection's :meth:`LoggedRecordWriter.finish` makes them all durable before its log.
    :meth:`drain` returns the batch's leaves, in order, for
    :meth:`LoggedRecordWriter.add_leaves`. ``rules_written``: the digests of the rules documents
    the collection has written already (the batch does not write them again). In a pool's
    worker, no file is begun once the collection's process has died
    (:func:`rng_service.core.pools.stop_if_orphaned`)."""

    def __init__(self, out_dir: Path, key: SigningKey, *,
                 rules_written: Iterable[str] = ()) -> None:
        super().__init__(out_dir, key)
        self._rules_written.update(rules_written)
        self._leaves: list[tuple[str, bytes]] = []

    def _write(self, path: Path, data: bytes) -> None:
        # a worker whose collection's process has died ends before the file, not after the
        # batch: one getppid, a fraction of a percent of writing the file
        stop_if_orphaned()
        write_new(path, data)

    def _logged(self, rel: str, data: bytes) -> None:
        self._leaves.append((rel, leaf_hash(data)))

    def drain(self) -> list[tuple[str, bytes]]:
        """The batch's leaves, (path, leaf hash) in the order signed, and a fresh batch begun."""
        leaves, self._leaves = self._leaves, []
        return leaves
