"""`fairshoe audit verify` and `fairshoe collect rounds`: signed records, from both sides.

``collect rounds`` plays rounds on the production path (OS-seeded shoes, the engine, the basic
strategy player, Ed25519 signing) and writes a directory an auditor can check::

    DIR/rounds/<round id>.json      signed round records
    DIR/reveals/<shoe id>.json      signed shoe reveals (every shoe used is finished and revealed)
    DIR/rules/<rules digest>.json   the rule set played (records name it by digest only)
    DIR/keys/<key id>.json          the signing key's record, DIR/shoes/<shoe id>.json each
                                    shoe's commitment, logged before its cards are dealt
    DIR/log/                        the collection's own log, as an export's: every envelope a
                                    leaf (leaves.jsonl with proofs) and a signed checkpoint
                                    (``--checkpoint-out FILE`` writes a copy apart from DIR)
    DIR/keys.jwks.json              a copy of the key store's public keys (JWK Set), for the
                                    lab's own checks: never a trust anchor

Its log's origin is ``<base>/collect/<collection id>`` (:mod:`rng_service.records.logged`), so
``audit verify DIR --checkpoint FILE --operator collect/<id>`` (the command prints it) fails any
round deleted from DIR, even the last of a shoe, which no other check can see.

The private key stays in the key store, which is *not* inside DIR by default: DIR is what gets
handed to a lab, and a private key in it would let its holder forge records. The store is
``--key-store PATH`` or the service's configured one (``$FAIRSHOE_DATA_DIR/keys``); a key is
created there if it has none.

``audit verify PATHS... --keys FILE`` trusts only the keys in the ``--keys`` files (PEM, JWK or
JWK Set; repeatable). An auditor obtains the operator's public keys independently of the records
(from the operator, e.g. ``fairshoe keys export``, over a channel the records did not travel):
whoever could change the records could change a key file lying beside them. ``keys.jwks.json``
beside the records is passed over, neither trusted nor a failure; any other file under the
collection's own ``rounds/`` or ``reveals/`` that is not a signed envelope fails, and any other
skipped file fails the audit too. Those roles follow the collection's layout, not the names of
the directories above it: DIR may itself be called ``rounds``. Rules documents need no such care:
a record's signature covers the digest of its rules, and the audit recomputes every document's
digest. A custom rule set's document must be among the PATHS (it is, when DIR is passed whole);
the built-in games' rules are known to the audit. A custom rule set that keeps a built-in game's
id fails unless the auditor names its digest with ``--allow-custom-rules``.

The ``valid_from``/``valid_until`` members of the ``--keys`` JWKs bound when each key may have
signed; ``--now`` fixes the clock record times are judged by; ``--file-timeout`` bounds the
checks of one file; ``--workers`` processes check the rounds, shoe by shoe, and what is printed
is the same for any number of them. Every line printed is one physical line, whatever the files
hold.

``--checkpoint FILE`` (a signed checkpoint of the operator's transparency log, obtained like
``--keys``, independently of the records) makes the audit judge completeness: DIR, exported with
its ``log/``, must hold every leaf of the log up to the checkpoint (from ``--since FILE``'s size,
an earlier checkpoint the auditor kept, or from leaf 0), each proven, in order, and no signed file
that is not a leaf (:mod:`rng_service.audit.log_audit`). ``--operator``/``--log-origin`` name the
log (``<base origin>/<operator>``). Without ``--checkpoint``, a collection's ``log/`` is checked
against its own checkpoint only, and the summary says that completeness was not judged.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Final, TypeAlias

from rng_service.cli import help_values
from rng_service.cli.game import add_rules_option, load_rules
from rng_service.cli.main import CommandError
from rng_service.cli.rng import collect_subparsers

if TYPE_CHECKING:

    from rng_service.audit.files import Finding
    from rng_service.audit.log_audit import LogSource
    from rng_service.audit.verifier import AuditOptions, AuditReport
    from rng_service.crypto.keys import KeyStore, TrustedKey
    from rng_service.log.cosignature import Cosigner
    from rng_service.records.logged import LoggedRecordWriter

    Subparsers: TypeAlias = argparse._SubParsersAction[argparse.ArgumentParser]

# The verifier, the signer and the key store load cryptography and the analysis (numpy): the
# handlers import them, so parsing the command line stays light.


def register(subparsers: Subparsers) -> None:
    """Add ``audit verify`` (and ``audit export``, from its own module) and ``collect rounds``
    to the command line.
    """
    audit = subparsers.add_parser(
        "audit", help="verify signed round records offline",
        description="Offline verification of signed round records.")
    audit_sub = audit.add_subparsers(dest="audit_command", required=True, metavar="SUBCOMMAND")
    verify = audit_sub.add_parser(
        "verify", help="check signatures, revealed shoes and replays of round records",
        description="Check every round record and shoe reveal under PATHS: signatures by trusted "
                    "keys, seed commitments, shoes recomputed from revealed seeds, rounds replayed "
                    "through the game engine, shoes held to the rules' deck count and shuffle "
                    "policy. Exit status 0 only if every record passes and no file was skipped.")
    verify.add_argument("paths", nargs="+", type=Path, metavar="PATH",
                        help="record, reveal or rules files, or directories searched for *.json")
    verify.add_argument("--keys", required=True, action="append", type=Path, metavar="FILE",
                        help="trusted public keys (PEM, JWK, JWK Set, or a directory of them), "
                             "obtained from the operator independently of the records; "
                             "repeatable. Keys beside the records are never trusted otherwise.")
    verify.add_argument("--allow-custom-rules", action="append", default=[], metavar="DIGEST",
                        help="accept the custom rule set with this rules digest although its "
                             "game id is a built-in game's (by default such a rule set fails: "
                             "it could pose as the built-in game); repeatable")
    verify.add_argument("--now", metavar="TIME",
                        help="judge record times against TIME (RFC 3339) instead of the clock: "
                             "a record dated after it fails as in the future")
    verify.add_argument("--file-timeout", type=float, default=10.0, metavar="SECONDS",
                        help="seconds the checks of one file may take before it fails unchecked "
                             "(default 10; 0: no bound)")
    verify.add_argument("--workers", type=int, metavar="N",
                        help="processes checking the rounds, shoe by shoe (default: the cores "
                             "available); the lines printed are the same for any N")
    verify.add_argument("--checkpoint", type=Path, metavar="FILE",
                        help="a signed checkpoint of the operator's transparency log, obtained "
                             "independently of the collection (like --keys): the collection (one "
                             "DIR, exported with its log) must then hold every leaf up to it, "
                             "each proven, and nothing else")
    verify.add_argument("--since", type=Path, metavar="FILE",
                        help="an earlier checkpoint the auditor kept, or the state an earlier "
                             "audit saved (--save-state): the collection starts where it ends, "
                             "and the log must be consistent with it; a state also carries the "
                             "shoes in play then, so that a shoe dealt across the two audits is "
                             "checked whole (needs --checkpoint)")
    verify.add_argument("--save-state", type=Path, metavar="FILE",
                        help="if the audit passes, write to FILE what the next audit needs "
                             "(--since FILE): the checkpoint verified and, proven in it, the "
                             "commitment and rounds of every shoe still in play (needs "
                             "--checkpoint)")
    verify.add_argument("--witness", action="append", default=[], metavar="VKEY",
                        help="a witness's cosignature/v1 verifier key (name+id+base64), "
                             "obtained independently: the checkpoint must carry its "
                             "cosignature (see --quorum); repeatable")
    verify.add_argument("--quorum", type=int, metavar="N",
                        help="how many of the --witness keys must have cosigned the checkpoint "
                             "(default: all of them)")
    verify.add_argument("--operator", default="default", metavar="ID",
                        help="the operator whose log the checkpoints are of (default: default)")
    verify.add_argument("--log-origin", metavar="BASE",
                        help="the service's base log origin, if configured otherwise (default "
                             f"{help_values.LOG_ORIGIN}); the operator's log is BASE/ID")
    verify.add_argument("--quiet", action="store_true", help="print failures and the summary only")
    verify.set_defaults(func=cmd_audit_verify)
    # `audit export` lives in its own module (it reads the database); importlib, as main does
    importlib.import_module("rng_service.cli.audit_export").register(audit_sub)

    rounds = collect_subparsers().add_parser(
        "rounds", help="signed rounds played by a basic-strategy player",
        description="Play K rounds through the real RNG, engine and signing path with an "
                    "automatic basic-strategy player; write signed records, shoe reveals and "
                    "the public keys to DIR.")
    rounds.add_argument("--game", help="game id (or give --rules)")
    add_rules_option(rounds)
    rounds.add_argument("--rounds", required=True, type=int, metavar="K")
    rounds.add_argument("--out", required=True, type=Path, metavar="DIR")
    rounds.add_argument("--client-seed", default="", metavar="TEXT",
                        help="client seed (UTF-8) mixed into every shoe, default empty")
    # no default here: the handler takes the record collector's own (the help quotes it)
    rounds.add_argument("--insurance-rate", type=float, metavar="R",
                        help="share of insurance/even-money offers accepted so the records hold "
                             f"those wagers (default {help_values.INSURANCE_RATE}; 0: pure basic "
                             "strategy)")
    rounds.add_argument("--checkpoint-out", type=Path, metavar="FILE",
                        help="also write the collection's signed log checkpoint to FILE, to be "
                             "kept apart from DIR and handed to the auditor with the public "
                             "keys (audit verify --checkpoint FILE then fails any deletion)")
    rounds.add_argument("--workers", type=int, metavar="N",
                        help="processes playing and signing batches of whole shoes (default: "
                             "the CPU count); the records are logged in one fixed order "
                             "whatever N")
    rounds.add_argument("--key-store", type=Path, metavar="PATH",
                        help="signing key store (default: the configured one, "
                             "$FAIRSHOE_DATA_DIR/keys)")
    rounds.set_defaults(func=cmd_collect_rounds)


def _trusted_keys(paths: list[Path]) -> dict[str, TrustedKey]:
    from rng_service.crypto.keys import KeyStoreError, load_trusted_keys

    trusted: dict[str, TrustedKey] = {}
    for path in paths:
        try:
            for kid, key in load_trusted_keys(path).items():
                if trusted.setdefault(kid, key) != key:
                    raise CommandError(f"--keys: key {kid} is given with two validity periods")
        except KeyStoreError as exc:
            raise CommandError(f"--keys: {exc}") from None
    return trusted


def _audit_options(args: argparse.Namespace, trusted: dict[str, TrustedKey]) -> AuditOptions:
    """The auditor's choices from the command line, checked."""
    import re

    from rng_service.audit.verifier import AuditOptions
    from rng_service.core.cpus import available_cores
    from rng_service.core.times import parse_rfc3339

    for digest in args.allow_custom_rules:
        if not re.fullmatch(r"[0-9a-f]{64}", digest):
            raise CommandError(f"--allow-custom-rules: {digest!r} is not a rules digest "
                               "(64 lowercase hex digits)")
    now = None
    if args.now is not None:
        now = parse_rfc3339(args.now)
        if now is None:
            raise CommandError(f"--now: {args.now!r} is not an RFC 3339 time "
                               "(e.g. 2024-05-01T00:00:00Z)")
    if not args.file_timeout >= 0:
        raise CommandError(f"--file-timeout must be 0 or more seconds, got {args.file_timeout}")
    if args.workers is not None and args.workers < 1:
        raise CommandError(f"--workers must be at least 1, got {args.workers}")
    return AuditOptions(validity={kid: key.validity for kid, key in trusted.items()},
                        allow_custom_rules=frozenset(args.allow_custom_rules), now=now,
                        file_timeout=args.file_timeout, log=_log_source(args),
                        save_state=args.save_state is not None,
                        workers=args.workers or available_cores())


def _log_source(args: argparse.Namespace) -> LogSource:
    """The checkpoints and the log origin from the command line, checked."""
    from rng_service.audit.log_audit import LogSource
    from rng_service.log import DEFAULT_ORIGIN
    from rng_service.log.note import is_valid_key_name

    origin = f"{args.log_origin or DEFAULT_ORIGIN}/{args.operator}"
    if not is_valid_key_name(origin):
        raise CommandError(f"--operator/--log-origin: {origin!r} is not a log origin (no "
                           "spaces, no '+', no control characters)")
    if args.since is not None and args.checkpoint is None:
        raise CommandError("--since needs --checkpoint (the checkpoint it is checked against)")
    if args.save_state is not None and args.checkpoint is None:
        raise CommandError("--save-state needs --checkpoint (a state is of the checkpoint the "
                           "audit verified)")
    witnesses = _witnesses(args)
    if args.checkpoint is not None:
        if len(args.paths) != 1 or not args.paths[0].is_dir():
            raise CommandError("--checkpoint judges one collection: give exactly one DIR")
        for option, path in (("--checkpoint", args.checkpoint), ("--since", args.since)):
            if path is not None and not path.exists():
                raise CommandError(f"{option}: {path}: no such file")
    return LogSource(checkpoint=args.checkpoint, since=args.since, origin=origin,
                     witnesses=witnesses,
                     quorum=len(witnesses) if args.quorum is None else args.quorum)


def _witnesses(args: argparse.Namespace) -> tuple[Cosigner, ...]:
    """The witnesses' keys from the command line, checked, and the quorum against them."""
    from rng_service.core.errors import FairshoeError
    from rng_service.log.cosignature import Cosigner

    if (args.witness or args.quorum is not None) and args.checkpoint is None:
        raise CommandError("--witness needs --checkpoint (the checkpoint they cosigned)")
    witnesses: dict[str, Cosigner] = {}
    for text in args.witness:
        try:
            cosigner = Cosigner.from_vkey(text)
        except FairshoeError as exc:
            raise CommandError(f"--witness {text!r}: {exc}") from None
        witnesses.setdefault(cosigner.vkey(), cosigner)
    if args.quorum is not None and not 1 <= args.quorum <= len(witnesses):
        raise CommandError(f"--quorum must be between 1 and the {len(witnesses)} distinct "
                           f"--witness keys given, got {args.quorum}")
    return tuple(witnesses.values())


#: the cyclic collector's first threshold while an audit runs (Python's is 700): an audit makes
#: and frees a few hundred objects a record, nearly all freed by their counts
_AUDIT_GEN0_THRESHOLD: Final = 10_000


@contextlib.contextmanager
def _settled_heap() -> Iterator[None]:
    """While an audit runs (its workers forked in it), the objects made before it (the modules,
    the keys: most of the heap) are left out of the cyclic collector's passes (``gc.freeze``)
    and its youngest generation is collected less often: each full pass walked them all, and
    the collector's passes were 3 % of an audit's time, 1 % so (bench/bench_audit.py's snap
    collection, perf: docs/performance.md). Both are undone after it, for a caller that goes
    on (the tests run the command in their own process)."""
    threshold = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(_AUDIT_GEN0_THRESHOLD, *threshold[1:])
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
        gc.unfreeze()


def cmd_audit_verify(args: argparse.Namespace) -> int:
    """``fairshoe audit verify``: exit status 0 only if every record passed and none was skipped.

    Every line printed is one physical line: whatever a record or a file name holds is escaped
    (:meth:`Finding.line`), and stdout escapes what its encoding cannot write."""
    from rng_service.audit.verifier import AuditInputError, audit_paths
    from rng_service.audit.workers import WorkerDied
    from rng_service.core.text import token

    with contextlib.suppress(AttributeError, ValueError):  # a replaced stream keeps its own
        sys.stdout.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]
    trusted = _trusted_keys(args.keys)
    options = _audit_options(args, trusted)

    def show(finding: Finding) -> None:
        if not args.quiet or finding.status.value != "OK":
            print(finding.line(), flush=False)

    try:
        with _settled_heap():
            report = audit_paths(args.paths, {kid: key.public_key for kid, key in trusted.items()},
                                 on_round=show, options=options, keep_rounds=False)
    except (AuditInputError, WorkerDied) as exc:
        raise CommandError(str(exc)) from None
    for finding in report.findings:
        if finding.kind != "round":  # reveals and unreadable files, after the rounds
            show(finding)
    for path in report.skipped:
        print(f"SKIP file {token(str(path))}: neither a signed record or reveal nor a rules "
              "document")
    if not report.count("round") and not report.count("rng"):
        print("no round or RNG records found", file=sys.stderr)
    if args.save_state is not None:
        _save_state(args.save_state, report)
    print(report.summary())
    return 0 if report.passed else 1


def _save_state(path: Path, report: AuditReport) -> None:
    """Write the state for the next audit, whole or not at all (a rename over a file written
    beside it)."""
    if report.saved_state is None or not report.passed:
        print(f"state not saved to {path}: the audit did not pass, so it established nothing to "
              "carry forward")
        return
    partial = path.with_name(f".{path.name}.partial")
    try:
        partial.write_text(report.saved_state, encoding="utf-8")
        partial.replace(path)
    except OSError as exc:
        raise CommandError(f"--save-state {path}: {exc.strerror}") from None
    print(f"state saved to {path}: {len(report.open_shoes)} shoes in play carried; give it as "
          "--since to the next audit")


def _signing_key_store(path: Path | None) -> KeyStore:
    from rng_service.crypto.keys import KeyStore, KeyStoreError

    store = KeyStore(path)
    try:
        if store.active_key_id() is None:
            info = store.create()
            print(f"created signing key {info.key_id} in {store.root}", file=sys.stderr)
    except KeyStoreError as exc:
        raise CommandError(str(exc)) from None
    return store


def _collect_options(args: argparse.Namespace) -> tuple[bytes, float]:
    """The client seed and insurance rate ``collect rounds`` plays with, checked."""
    from rng_service.records.schema import INSURANCE_RATE
    from rng_service.rng.shoe import MAX_CLIENT_SEED_BYTES

    if args.rounds < 1:
        raise CommandError(f"--rounds must be at least 1, got {args.rounds}")
    if args.workers is not None and args.workers < 1:
        raise CommandError(f"--workers must be at least 1, got {args.workers}")
    insurance_rate = INSURANCE_RATE if args.insurance_rate is None else args.insurance_rate
    if not 0 <= insurance_rate <= 1:
        raise CommandError(f"--insurance-rate must be between 0 and 1, got {insurance_rate}")
    client_seed = args.client_seed.encode("utf-8")
    if len(client_seed) > MAX_CLIENT_SEED_BYTES:
        raise CommandError(f"--client-seed is longer than {MAX_CLIENT_SEED_BYTES} bytes (UTF-8)")
    return client_seed, insurance_rate


def _record_writer(args: argparse.Namespace) -> LoggedRecordWriter:
    """A writer into ``--out`` signing with the store's active key and logging what it writes;
    the public keys' copy written beside the records."""
    from rng_service.crypto.keys import KeyStoreError, export_jwk, key_validity
    from rng_service.records.logged import LoggedRecordWriter
    from rng_service.records.schema import KEYS_FILE

    store = _signing_key_store(args.key_store)
    try:
        key = store.load_signing_key()
        public = export_jwk(store.public_keys())
        info = next(i for i in store.list_keys() if i.key_id == key.key_id)
        writer = LoggedRecordWriter(args.out, key, valid_from=key_validity(info)["valid_from"])
    except KeyStoreError as exc:
        raise CommandError(str(exc)) from None
    except OSError as exc:
        raise CommandError(f"--out {args.out}: {exc.strerror}") from None
    (args.out / KEYS_FILE).write_text(public, encoding="utf-8")
    return writer


def cmd_collect_rounds(args: argparse.Namespace) -> int:
    """``fairshoe collect rounds``: signed rounds, reveals and rules written to ``--out``."""
    from tqdm import tqdm

    from game_math.autoplay import basic_strategy, basic_strategy_action
    from game_math.errors import GameMathError
    from rng_service.core.pools import WorkerDied
    from rng_service.records.collect_workers import collect_in_workers
    from rng_service.records.logged import collect_operator
    from rng_service.records.schema import KEYS_FILE
    from rng_service.rng.selftest import SelfTestFailed, require_healthy_rng

    rules = load_rules(args.game, args.rules)
    client_seed, insurance_rate = _collect_options(args)
    try:
        require_healthy_rng()
    except SelfTestFailed as exc:
        raise CommandError(str(exc)) from None
    writer = _record_writer(args)
    key = writer.key
    with tqdm(total=args.rounds, desc=f"rounds ({rules.game})", unit="round", file=sys.stderr,
              disable=None) as bar:
        try:
            basic_strategy(rules)  # analysed once here, before the workers fork
            stats = collect_in_workers(rules, args.rounds, writer, basic_strategy_action,
                                       client_seed=client_seed, insurance_rate=insurance_rate,
                                       workers=args.workers, on_rounds=bar.update)
        except (GameMathError, ValueError) as exc:  # e.g. custom limits that admit no bet
            raise CommandError(f"{rules.game}: {exc}") from None
        except WorkerDied as exc:
            raise CommandError(str(exc)) from None
    note = writer.finish()
    if args.checkpoint_out is not None:
        try:
            args.checkpoint_out.parent.mkdir(parents=True, exist_ok=True)
            args.checkpoint_out.write_text(note, encoding="utf-8")
        except OSError as exc:
            raise CommandError(f"--checkpoint-out {args.checkpoint_out}: {exc.strerror}") from None
    operator = collect_operator(writer.collection_id)
    print(f"wrote {stats.rounds} signed {rules.game} rounds ({stats.void} void) from "
          f"{stats.shoes} revealed shoes to {args.out}: staked {stats.staked}, "
          f"returned {stats.returned} (minor units); signing key {key.key_id}")
    print(f"public keys: {args.out / KEYS_FILE} is a copy for the lab's own checks; an auditor "
          "must not trust keys that travelled with the records")
    kept = args.checkpoint_out or "CHECKPOINT"
    print(f"log: {args.out / 'log'} holds every record as a leaf, checkpoint "
          f"{args.out / 'log' / 'checkpoint'}; keep a copy of it apart from the records "
          "(--checkpoint-out), so that a deletion fails the audit")
    print(f"verify with: fairshoe audit verify {args.out} --keys TRUSTED_KEYS --checkpoint "
          f"{kept} --operator {operator}  (TRUSTED_KEYS: the operator's public keys, key id "
          f"{key.key_id}, and {kept} the checkpoint, both obtained independently, e.g. "
          "`fairshoe keys export` run by the operator)")
    return 0
