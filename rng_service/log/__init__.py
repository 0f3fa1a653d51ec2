"""The append-only transparency log of everything Fairshoe signs: pure, no storage.

* :mod:`~rng_service.log.hashing`: RFC 9162 leaf and node hashes.
* :mod:`~rng_service.log.tree`: the tree's shape (node ids, which subtrees a proof is made of).
* :mod:`~rng_service.log.compact`: :class:`CompactRange`, the O(log n) state that appends and
  computes roots without rehashing; serialises to bytes or JSON for a database row.
* :mod:`~rng_service.log.nodes`: :class:`NodeReader`, the port storage implements over its stored
  perfect nodes, and :class:`MemoryNodeStore`, the in-memory reference.
* :mod:`~rng_service.log.proofs`: making inclusion and consistency proofs from a reader, and
  verifying them (pure, hostile-input safe).
* :mod:`~rng_service.log.note`, :mod:`~rng_service.log.checkpoint`: C2SP signed notes and
  tlog-checkpoints signed with the service's Ed25519 key.
* :mod:`~rng_service.log.tiles`: C2SP tlog-tiles paths, the stored nodes each hash tile holds,
  and entry bundles.

Appending, as a storage layer does it in one transaction::

    state = CompactRange.from_bytes(row.state)           # O(log n) bytes
    state.append(leaf_hash(entry), visit=insert_node)    # insert_node(NodeID, hash) -> nodes table
    row.state = state.to_bytes()

>>> store = MemoryNodeStore()
>>> for entry in (b"a", b"b", b"c"):
...     _ = store.append_entry(entry)
>>> proof = inclusion_proof(store, 1, store.size)
>>> verify_inclusion(leaf_hash(b"b"), 1, store.size, proof, store.root())
"""

from rng_service.log.checkpoint import (
    DEFAULT_ORIGIN,
    Checkpoint,
    SignedCheckpoint,
    checkpoint_verifier,
    parse_checkpoint,
    sign_checkpoint,
    verify_checkpoint,
)
from rng_service.log.compact import CompactRange, NodeVisitor
from rng_service.log.hashing import EMPTY_ROOT, HASH_SIZE, empty_root, leaf_hash, node_hash
from rng_service.log.nodes import (
    MemoryNodeStore,
    NodeReader,
    compact_range_at,
    fetch_nodes,
    root_at,
)
from rng_service.log.note import NoteSignature, NoteVerifier, open_note, sign_note, vkey
from rng_service.log.proofs import (
    consistency_proof,
    inclusion_proof,
    verify_consistency,
    verify_inclusion,
)
from rng_service.log.tiles import TileRef, decode_bundle, encode_bundle, parse_tile_path
from rng_service.log.tree import NodeID, consistency_ranges, inclusion_ranges, range_nodes

#: the names above, and the modules used on their own (checkpoint, cosignature, hashing, note,
#: partial, proofs, witness_protocol); compact, nodes, tiles and tree are reached through the names
__all__ = [
    "DEFAULT_ORIGIN",
    "EMPTY_ROOT",
    "HASH_SIZE",
    "Checkpoint",
    "CompactRange",
    "MemoryNodeStore",
    "NodeID",
    "NodeReader",
    "NodeVisitor",
    "NoteSignature",
    "NoteVerifier",
    "SignedCheckpoint",
    "TileRef",
    "checkpoint",
    "checkpoint_verifier",
    "compact_range_at",
    "consistency_proof",
    "consistency_ranges",
    "cosignature",
    "decode_bundle",
    "empty_root",
    "encode_bundle",
    "fetch_nodes",
    "hashing",
    "inclusion_proof",
    "inclusion_ranges",
    "leaf_hash",
    "node_hash",
    "note",
    "open_note",
    "parse_checkpoint",
    "parse_tile_path",
    "partial",
    "proofs",
    "range_nodes",
    "root_at",
    "sign_checkpoint",
    "sign_note",
    "verify_checkpoint",
    "verify_consistency",
    "verify_inclusion",
    "vkey",
    "witness_protocol",
]
