"""``fairshoe audit export --address HOST:PORT``: a collection written from a running server.

For an auditor with gRPC access and no database: ExportRecords in its leaf-range mode streams every
leaf of the caller's operator log from a tree size (``--since``'s, else 0) up to the latest
checkpoint, after one ``log_start`` holding that checkpoint and the frontier of the leaves before
the range. The collection is written by the same writer as a database export
(:func:`rng_service.service.audit.write_log_collection`), so ``fairshoe audit verify --checkpoint``
checks its completeness. Checked here before anything is trusted for the layout: the stream starts
with ``log_start``, its range starts at ``--since``'s size and its frontier hashes to ``--since``'s
root, the leaves come in index order up to the checkpoint's size, each names its id in its payload.
Nothing else is trusted: ``audit verify`` checks signatures, proofs and completeness.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from typing import Any, Final

from rng_service.cli.main import CommandError

#: where each kind of leaf names its id in its payload
_ID_FIELD: Final = {"key": "key_id", "shoe_commitment": "shoe_id", "round": "round_id",
                    "shoe_reveal": "shoe_id", "rng": "draw_id", "rng_reveal": "draw_id"}


def export_remote(args: argparse.Namespace, since: str | None) -> str:
    """Write the collection of ``args.out`` from the server at ``args.address``; a summary."""
    import grpc

    from rng_service.api.proto_gen.fairshoe.audit.v1 import audit_pb2
    from rng_service.cli.log import call, stub
    from rng_service.service.audit import write_log_collection

    audit = stub(args)
    jwks = call(args, audit.GetSigningKeys, audit_pb2.GetSigningKeysRequest()).jwks_json
    first = 0 if since is None else _parse(since, "--since").size
    request = audit_pb2.ExportRecordsRequest(
        leaf_range=audit_pb2.LeafRange(from_tree_size=first))
    try:
        stream = audit.ExportRecords(request, timeout=args.timeout)
        found = _start(stream, first, since)
        stats = write_log_collection(args.out, jwks, found)
    except grpc.RpcError as err:
        code = err.code().name if isinstance(err, grpc.Call) else "error"
        detail = err.details() if isinstance(err, grpc.Call) else str(err)
        raise CommandError(f"{args.address}: {code}: {detail}") from None
    counts = ", ".join(f"{n} {kind}" for kind, n in [*stats.counts.items(),
                                                      *stats.logged.items()])
    return (f"exported {counts} and {len(stats.rule_sets)} rule sets ({stats.leaves} log "
            f"leaves [{found.first}, {found.first + stats.leaves})) from {args.address} to "
            f"{args.out}")


def _parse(note: str, what: str) -> Any:
    from rng_service.core.errors import InvalidInput
    from rng_service.log import parse_checkpoint

    try:
        return parse_checkpoint(note).checkpoint
    except InvalidInput as exc:
        raise CommandError(f"{what}: not a checkpoint: {exc}") from None


def _start(stream: Iterator[Any], first: int, since: str | None) -> Any:
    """The stream's log_start as a LeafRangeExport whose leaves are the rest of the stream."""
    from rng_service.core.errors import InvalidInput
    from rng_service.log import CompactRange
    from rng_service.service.audit import LeafRangeExport

    head = next(stream, None)
    if head is None or head.WhichOneof("item") != "log_start":
        raise CommandError("the server's export did not start with log_start")
    start = head.log_start
    checkpoint = _parse(start.checkpoint, "the server's checkpoint")
    if start.from_tree_size != first or first > checkpoint.size:
        raise CommandError(f"the server's export starts at leaf {start.from_tree_size}, not "
                           f"{first}, or beyond its checkpoint's {checkpoint.size}")
    try:
        frontier = CompactRange(first, list(start.frontier_hashes))
    except InvalidInput as exc:
        raise CommandError(f"the server's frontier is malformed: {exc}") from None
    if since is not None:
        _check_since(_parse(since, "--since"), checkpoint, frontier)
    leaves = _leaves(stream, first, checkpoint.size)
    return LeafRangeExport(start.checkpoint, first, frontier, leaves)


def _check_since(earlier: Any, checkpoint: Any, frontier: Any) -> None:
    if earlier.origin != checkpoint.origin:
        raise CommandError(f"--since is a checkpoint of {earlier.origin!r}, the server's log is "
                           f"{checkpoint.origin!r}")
    if frontier.root() != earlier.root_hash:
        raise CommandError(f"the server's log at size {earlier.size} is not --since's: it was "
                           "not only appended to since")


def _leaves(stream: Iterator[Any], first: int, size: int) -> Iterator[tuple[Any, list[bytes]]]:
    """Each streamed item as (LogLeaf, proof), in index order ``[first, size)``."""
    from rng_service.api.audit_api import LEAF_ITEM_FIELD
    from rng_service.log import leaf_hash
    from rng_service.service.ports import LogLeaf

    kinds = {name: kind for kind, name in LEAF_ITEM_FIELD.items()}
    expected = first
    for item in stream:
        if expected >= size:  # checked before writing: an endless stream must not fill the disk
            raise CommandError(f"the server's export sends more than the {size} leaves of "
                               "its checkpoint: leaves beyond its checkpoint")
        kind = kinds.get(str(item.WhichOneof("item")))
        if kind is None or item.log.leaf_index != expected or item.log.tree_size != size:
            raise CommandError(f"the server's export sent {item.WhichOneof('item')} leaf "
                               f"{item.log.leaf_index} of {item.log.tree_size} where leaf "
                               f"{expected} of {size} was due")
        entry = getattr(item, LEAF_ITEM_FIELD[kind]).envelope
        ident = _ident(entry, _ID_FIELD[str(kind)], expected)
        yield LogLeaf(expected, kind, ident, leaf_hash(entry), entry), list(item.log.hashes)
        expected += 1
    if expected != size:
        raise CommandError(f"the server's export ended at leaf {expected}, before its "
                           f"checkpoint's size {size}")


def _ident(entry: bytes, name: str, index: int) -> str:
    """The id a leaf's payload names (checked as a file name by the collection writer)."""
    try:
        ident = json.loads(entry)["payload"][name]
    except (ValueError, KeyError, TypeError):
        ident = None
    if not isinstance(ident, str):
        raise CommandError(f"leaf {index}: its payload names no {name}")
    return ident
