"""`fairshoe log checkpoint|prove|verify`: the transparency log of a running server, checked here.

* ``checkpoint``: print the latest signed checkpoint (a C2SP note) and, with ``--out``, save it
  (keep it: a later ``verify`` or ``audit export --since`` proves the log only grew since);
  with ``--keys``, its signature is checked first.
* ``prove``: an inclusion proof (``--round ID``, ``--shoe-reveal ID``, or ``--leaf-index N`` with
  ``--entry FILE``, the envelope of that leaf) or, with ``--since FILE``, a consistency proof from
  a saved checkpoint to the latest; each verified locally before it is printed as OK. Nothing the
  server says is taken for what was asked: the envelope must name the round or shoe asked for, the
  proof must be of the leaf index asked for and of the checkpoint's tree size.
* ``verify CHECKPOINT_FILE --keys K``: the saved checkpoint's signature under the trusted keys, the
  server's latest checkpoint's, and the consistency proof between them (a latest checkpoint
  smaller than the saved one is a FAIL: the log shrank).

Every checkpoint read from the server or a file must not be dated in the future (beyond the
audit's clock skew): ``log checkpoint --out`` would save what ``audit verify`` later refuses.

Exit status: 0 when everything checked holds, 1 when a proof or signature fails (one FAIL line),
2 for a wrong command line or a server that cannot be asked. Registration only here: grpc,
protobuf and cryptography load when a command runs.
"""

from __future__ import annotations

import argparse
import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

if TYPE_CHECKING:
    Subparsers: TypeAlias = argparse._SubParsersAction[argparse.ArgumentParser]


def _connection(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--address", default=os.environ.get("FAIRSHOE_ADDRESS",
                                                            "127.0.0.1:50051"),
                        help="host:port of the server (default $FAIRSHOE_ADDRESS or "
                             "127.0.0.1:50051)")
    tls_options(parser)
    parser.add_argument("--keys", type=Path, metavar="PATH",
                        help="the operator's trusted public keys (PEM, JWK or JWK Set; a file "
                             "or directory): checkpoint signatures are checked with them")


def tls_options(parser: argparse.ArgumentParser, timeout: float = 10.0) -> None:
    """``--tls``, ``--tls-ca``, ``--tls-cert``, ``--tls-key`` and ``--timeout`` (seconds each
    call may take, default ``timeout``): what :func:`stub` connects with."""
    parser.add_argument("--tls", action="store_true",
                        help="connect with TLS, trusting the system's CAs (implied by --tls-ca)")
    parser.add_argument("--tls-ca", default=os.environ.get("FAIRSHOE_TLS_CA"),
                        help="PEM CA certificate to trust")
    parser.add_argument("--tls-cert", default=None, help="PEM client certificate")
    parser.add_argument("--tls-key", default=None, help="the client certificate's PEM key")
    parser.add_argument("--timeout", type=float, default=timeout,
                        help="seconds each call may take (default %(default)s)")


def register(subparsers: Subparsers) -> None:
    """Add ``log checkpoint|prove|verify``."""
    log = subparsers.add_parser(
        "log", help="the server's transparency log: checkpoints and proofs, verified here",
        description="Ask a running server for its log's signed checkpoint, inclusion and "
                    "consistency proofs, and verify them locally.")
    commands = log.add_subparsers(dest="log_command", required=True, metavar="COMMAND")
    checkpoint = commands.add_parser("checkpoint", help="print (and save) the latest checkpoint")
    _connection(checkpoint)
    checkpoint.add_argument("--out", type=Path, metavar="FILE", help="also save it to FILE")
    checkpoint.set_defaults(func=cmd_checkpoint)

    prove = commands.add_parser("prove", help="an inclusion or consistency proof, verified")
    _connection(prove)
    which = prove.add_mutually_exclusive_group(required=True)
    which.add_argument("--round", metavar="ID", help="the record of round ID")
    which.add_argument("--shoe-reveal", metavar="ID", help="the reveal of shoe ID")
    which.add_argument("--leaf-index", type=int, metavar="N",
                       help="leaf N (give its envelope with --entry to verify it)")
    which.add_argument("--since", type=Path, metavar="CHECKPOINT_FILE",
                       help="consistency of a saved checkpoint with the latest")
    prove.add_argument("--entry", type=Path, metavar="FILE", help="the envelope of --leaf-index")
    prove.set_defaults(func=cmd_prove)

    verify = commands.add_parser(
        "verify", help="a saved checkpoint: its signature, and consistency with the latest")
    _connection(verify)
    verify.add_argument("checkpoint", type=Path, metavar="CHECKPOINT_FILE")
    verify.set_defaults(func=cmd_verify)


# --- helpers (run time only) -------------------------------------------------------------------


def stub(args: argparse.Namespace) -> Any:
    """An AuditService stub over the channel ``args`` name (address and TLS options)."""
    from rng_service.api.proto_gen.fairshoe.audit.v1 import audit_pb2_grpc
    from rng_service.cli.play import channel

    return audit_pb2_grpc.AuditServiceStub(channel(args))


def call(args: argparse.Namespace, method: Any, request: Any) -> Any:
    """``method(request)`` within ``--timeout``; a failed call is a CommandError naming the
    address, the status code and the details."""
    import grpc

    from rng_service.cli.main import CommandError

    try:
        return method(request, timeout=args.timeout)
    except grpc.RpcError as err:
        code = err.code().name if isinstance(err, grpc.Call) else "error"
        detail = err.details() if isinstance(err, grpc.Call) else str(err)
        raise CommandError(f"{args.address}: {code}: {detail}") from None


def _read_text(path: Path, option: str) -> str:
    from rng_service.cli.main import CommandError

    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CommandError(f"{option} {path}: {getattr(exc, 'strerror', None) or exc}") from None


def _checked(args: argparse.Namespace, note: str, what: str) -> Any:
    """The checkpoint of ``note``: signature-checked with ``--keys`` when given, else parsed;
    IntegrityFailure if it is dated in the future (beyond the audit's clock skew): a
    checkpoint saved now is later an auditor's ``--since``, which ``audit verify`` refuses."""
    from rng_service.core.errors import IntegrityFailure
    from rng_service.core.times import CLOCK_SKEW
    from rng_service.crypto.keys import load_trusted_public_keys
    from rng_service.log import checkpoint_verifier, parse_checkpoint, verify_checkpoint
    from rng_service.log.checkpoint import format_time

    claimed = parse_checkpoint(note).checkpoint
    if args.keys is None:
        print(f"note: {what}'s signature not checked (no --keys)", file=sys.stderr)
    else:
        trusted = [checkpoint_verifier(key, claimed.origin)
                   for key in load_trusted_public_keys(args.keys).values()]
        claimed = verify_checkpoint(note, trusted)
    if claimed.time is not None and claimed.time > datetime.now(UTC) + CLOCK_SKEW:
        raise IntegrityFailure(f"{what} is dated {format_time(claimed.time)}, in the future",
                               reason="CHECKPOINT_FROM_THE_FUTURE")
    return claimed


def _failed(message: str) -> int:
    print(f"FAIL {message}")
    return 1


# --- the commands ------------------------------------------------------------------------------


def cmd_checkpoint(args: argparse.Namespace) -> int:
    """Print (and save) the latest checkpoint."""
    from rng_service.api.proto_gen.fairshoe.audit.v1 import audit_pb2
    from rng_service.core.errors import IntegrityFailure

    audit = stub(args)
    found = call(args, audit.GetCheckpoint, audit_pb2.GetCheckpointRequest())
    try:
        checkpoint = _checked(args, found.checkpoint, "the checkpoint")
    except IntegrityFailure as exc:
        return _failed(f"checkpoint signature: {exc}")
    if args.keys is not None:  # stderr: stdout is the note alone, to save or pipe
        print(f"OK the checkpoint of {checkpoint.size} leaves ({checkpoint.origin}) is signed by "
              "a trusted key", file=sys.stderr)
    if args.out is not None:
        from rng_service.records.schema import write_file

        write_file(args.out, found.checkpoint.encode("utf-8"))
    print(found.checkpoint, end="")
    return 0


def cmd_prove(args: argparse.Namespace) -> int:
    """Fetch a proof and verify it here."""
    from rng_service.core.errors import IntegrityFailure

    try:
        if args.since is not None:
            return _prove_consistency(args, _read_text(args.since, "--since"))
        return _prove_inclusion(args)
    except IntegrityFailure as exc:
        return _failed(str(exc))


def _leaf_and_entry(args: argparse.Namespace, stub: Any) -> tuple[Any, bytes | None]:
    from rng_service.api.proto_gen.fairshoe.audit.v1 import audit_pb2

    kinds = audit_pb2.LeafRef
    if args.round is not None:
        record = call(args, stub.GetRoundRecord,
                       audit_pb2.GetRoundRecordRequest(round_id=args.round))
        ref = kinds(kind=kinds.KIND_ROUND, id=args.round)
        return audit_pb2.GetInclusionProofRequest(leaf_ref=ref), record.record.envelope
    if args.shoe_reveal is not None:
        reveal = call(args, stub.GetShoeReveal,
                       audit_pb2.GetShoeRevealRequest(shoe_id=args.shoe_reveal))
        ref = kinds(kind=kinds.KIND_SHOE_REVEAL, id=args.shoe_reveal)
        return audit_pb2.GetInclusionProofRequest(leaf_ref=ref), reveal.reveal.envelope
    from rng_service.cli.main import CommandError

    if args.leaf_index < 0:
        raise CommandError(f"--leaf-index must not be negative, got {args.leaf_index}")
    entry = None if args.entry is None else _read_bytes(args.entry)
    return audit_pb2.GetInclusionProofRequest(leaf_index=args.leaf_index), entry


def _read_bytes(path: Path) -> bytes:
    from rng_service.cli.main import CommandError

    try:
        return path.read_bytes()
    except OSError as exc:
        raise CommandError(f"--entry {path}: {exc.strerror}") from None


def _not_asked_for(args: argparse.Namespace, entry: bytes | None) -> str | None:
    """Why the envelope the server sent for ``--round``/``--shoe-reveal`` is not of the id
    asked for (proving another round's record would say nothing of this one); None if it is."""
    import json

    field, wanted = (("round_id", args.round) if args.round is not None
                     else ("shoe_id", args.shoe_reveal))
    if wanted is None or entry is None:
        return None
    try:
        named = json.loads(entry)["payload"][field]
    except (ValueError, KeyError, TypeError):
        named = None
    if named == wanted:
        return None
    return f"the server's envelope names {field} {named!r}, not {wanted!r}"


def _prove_inclusion(args: argparse.Namespace) -> int:
    from rng_service.log import leaf_hash, verify_inclusion

    audit = stub(args)
    request, entry = _leaf_and_entry(args, audit)
    wrong = _not_asked_for(args, entry)
    if wrong is not None:
        return _failed(wrong)
    proof = call(args, audit.GetInclusionProof, request)
    checkpoint = _checked(args, proof.checkpoint, "the checkpoint")
    hashes = list(proof.hashes)
    print(f"leaf {proof.leaf_index} of {proof.tree_size}; proof:")
    for value in hashes:
        print(f"  {value.hex()}")
    # the proof is read with the checkpoint's size and the index asked for, never the server's
    # word for them: a path verifies under more than one (index, size) pair (leaf 4 of a tree
    # of 5 is "leaf 1 of 2" with the same hash), so the server could name any leaf
    if proof.tree_size != checkpoint.size:
        return _failed(f"the proof is for a tree of {proof.tree_size} leaves, the checkpoint's "
                       f"holds {checkpoint.size}")
    if args.leaf_index is not None and proof.leaf_index != args.leaf_index:
        return _failed(f"the server proved leaf {proof.leaf_index}, not leaf {args.leaf_index}")
    if entry is None:
        print("not verified: give the leaf's envelope with --entry FILE")
        return 0
    verify_inclusion(leaf_hash(entry), proof.leaf_index, proof.tree_size, hashes,
                     checkpoint.root_hash)
    print(f"OK leaf {proof.leaf_index} is in the log of {checkpoint.size} leaves "
          f"({checkpoint.origin})")
    return 0


def _prove_consistency(args: argparse.Namespace, note: str) -> int:
    from rng_service.api.proto_gen.fairshoe.audit.v1 import audit_pb2
    from rng_service.log import verify_consistency

    old = _checked(args, note, "the saved checkpoint")
    audit = stub(args)
    proof = call(args, audit.GetConsistencyProof,
                  audit_pb2.GetConsistencyProofRequest(from_size=old.size))
    new = _checked(args, proof.checkpoint, "the latest checkpoint")
    if new.origin != old.origin:
        return _failed(f"the server's log is {new.origin}, the saved checkpoint's {old.origin}")
    if new.size < old.size:
        return _failed(f"the server's latest checkpoint holds {new.size} leaves, fewer than the "
                       f"saved one's {old.size}: the log shrank (rolled back or forked)")
    hashes = list(proof.hashes)
    print(f"consistency {old.size} -> {new.size}; proof:")
    for value in hashes:
        print(f"  {value.hex()}")
    verify_consistency(old.size, new.size, hashes, old.root_hash, new.root_hash)
    print(f"OK the log of {old.size} leaves is a prefix of the log of {new.size} leaves "
          f"({new.origin})")
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    """A saved checkpoint's signature and its consistency with the server's latest."""
    from rng_service.cli.main import CommandError
    from rng_service.core.errors import IntegrityFailure, InvalidInput

    if args.keys is None:
        raise CommandError("--keys is required: the operator's public keys, obtained "
                           "independently")
    note = _read_text(args.checkpoint, "CHECKPOINT_FILE")
    try:
        saved = _checked(args, note, "the saved checkpoint")
    except IntegrityFailure as exc:
        return _failed(f"{args.checkpoint}: {exc}")
    except InvalidInput as exc:  # not a note at all: say which file, as _read_text does
        raise CommandError(f"CHECKPOINT_FILE {args.checkpoint}: not a signed checkpoint "
                           f"({exc})") from None
    print(f"OK {args.checkpoint}: signed checkpoint of {saved.size} leaves ({saved.origin})")
    try:
        return _prove_consistency(args, note)
    except IntegrityFailure as exc:
        return _failed(str(exc))
