"""Fuzz every RPC a real ``fairshoe serve`` registers with a million hostile requests.

    .venv/bin/python bench/fuzz_rpcs.py [--requests 1000000] [--seed 1] [--concurrency 32]
                                         [--processes 2] [--mtls] [--json PATH]

Starts ``fairshoe serve`` on its defaults (embedded SQLite in a temp data directory, OS-seeded
shoes, logs as JSON on stderr to a file); with ``--mtls``, under mutual TLS with two operators
(op-a, op-b) and an auditor granted op-a, each request sent with one of the three certificates
(the dev CA's, ``certs/make-dev-certs``), so ids one tenant was answered are sent by another.
It lists the services through reflection and fuzzes each method of each (the fairshoe
services, health and reflection, streams included): a service or RPC added later is fuzzed
without editing this file. The requests (``bench/fuzz_messages.py``) are spread evenly over the
RPCs and sent from ``--processes`` client processes, each with ``--concurrency`` calls in
flight on ``grpc.aio``.

It prints the status codes per RPC and overall; the INTERNAL, UNKNOWN and DATA_LOSS answers
and the answers whose details are not short printable text, with a sample request of each (its
index: its shape follows from ``--seed``; its bytes, base64: exactly what was sent); the
server log's lines by level, its tracebacks and any line that is not JSON; and whether the
ledger still balances (``tests/support/ledger_audit.py``, read straight from the database file). It
exits 1 if any of those is not zero or the ledger does not balance.

A stream counts as OK once its first answer arrives (it is then cancelled, a health watch
never ends); RESOURCE_EXHAUSTED is the stream limit's and the analyses' answer to a crowd (a
hundred calls in flight), reported but not a failure; so is DEADLINE_EXCEEDED (60 s).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import importlib
import json
import multiprocessing
import os
import pkgutil
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import orjson
from bench_service import cpu_seconds
from fuzz_messages import Requests, Seen, request_rng
from google.protobuf import descriptor_pool, message_factory
from google.protobuf.descriptor import MethodDescriptor
from google.protobuf.message import DecodeError, Message
from grpc_health.v1 import health_pb2  # noqa: F401  (its descriptors, for reflection's names)
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from tables import print_table

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from support.ledger_audit import ledger_problems
from support.live_server import ServerProcess, Tls, make_dev_certs

import rng_service.api.proto_gen.fairshoe as fairshoe_protos
from rng_service.api.proto_gen.fairshoe.common.v1 import common_pb2
from rng_service.api.proto_gen.fairshoe.wallet.v1 import wallet_pb2, wallet_pb2_grpc

FAILING = ("INTERNAL", "UNKNOWN", "DATA_LOSS")
CALL_TIMEOUT = 60.0
PLAYERS = ("fuzz-a", "fuzz-b", "fuzz-c", "fuzz-d")
#: the client certificates of --mtls: two operators, and an auditor granted the first
MTLS_CALLERS = ("operator-a", "operator-b", "auditor")
MTLS_OPERATORS = ("op-a", "op-b")
CHANNEL_OPTIONS: Any = [("grpc.max_receive_message_length", 64 * 1024 * 1024),
                        ("grpc.max_concurrent_streams", 1000)]
#: samples kept of each (RPC, finding)
SAMPLES = 3


def import_protos() -> None:
    """Every generated fairshoe module, so the default pool knows every service served."""
    for info in pkgutil.walk_packages(fairshoe_protos.__path__, fairshoe_protos.__name__ + "."):
        if info.name.endswith("_pb2"):
            importlib.import_module(info.name)


def registered(channel: grpc.Channel) -> list[str]:
    """The path of every method of every service the server lists through reflection."""
    import_protos()
    stub = reflection_pb2_grpc.ServerReflectionStub(channel)
    listed = next(iter(stub.ServerReflectionInfo(
        iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=10)))
    pool = descriptor_pool.Default()
    paths = []
    for service in listed.list_services_response.service:
        try:
            methods = pool.FindServiceByName(service.name).methods
        except KeyError:
            raise SystemExit(f"the server serves {service.name}, whose protos this script "
                             "cannot import: add them to import_protos()") from None
        paths += [f"/{service.name}/{method.name}" for method in methods]
    return paths


def method(path: str) -> MethodDescriptor:
    service, name = path.strip("/").split("/")
    return descriptor_pool.Default().FindServiceByName(service).methods_by_name[name]


# ----- the clients -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Spec:
    """What one client process sends: requests ``worker``, ``worker + processes``, ... below
    ``requests``, to ``port`` as each of ``callers`` (None: plaintext)."""

    worker: int
    processes: int
    requests: int
    seed: int
    concurrency: int
    port: int
    paths: tuple[str, ...]
    callers: tuple[str | None, ...]
    certs: str | None


@dataclass
class Tally:
    """What one client process saw."""

    codes: Counter[tuple[str, str]] = field(default_factory=Counter)
    seconds: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    samples: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    cpu: float = 0.0  # the process's CPU seconds, all its threads

    def sample(self, finding: str, path: str, **about: Any) -> None:
        kept = self.samples.setdefault(f"{finding} {path}", [])
        if len(kept) < SAMPLES:
            kept.append(about)


def _channel(spec: Spec, caller: str | None) -> grpc.aio.Channel:
    if caller is None:
        return grpc.aio.insecure_channel(f"127.0.0.1:{spec.port}", options=CHANNEL_OPTIONS)
    assert spec.certs is not None
    credentials = Tls(Path(spec.certs), mutual=True).credentials(caller)
    return grpc.aio.secure_channel(f"localhost:{spec.port}", credentials,
                                   options=CHANNEL_OPTIONS)


def _sync_channel(spec: Spec, caller: str | None) -> grpc.Channel:
    if caller is None:
        return grpc.insecure_channel(f"127.0.0.1:{spec.port}", options=CHANNEL_OPTIONS)
    assert spec.certs is not None
    credentials = Tls(Path(spec.certs), mutual=True).credentials(caller)
    return grpc.secure_channel(f"localhost:{spec.port}", credentials, options=CHANNEL_OPTIONS)


class Client:
    """One process's channels (one per caller), its requests and what it saw."""

    def __init__(self, spec: Spec) -> None:
        import_protos()
        self.spec = spec
        self.channels = [_channel(spec, caller) for caller in spec.callers]
        self.methods = {path: method(path) for path in spec.paths}
        self.seen = Seen()
        self.requests = Requests(self.seen, PLAYERS)
        self.tally = Tally()
        self.calls = [{path: self._callable(channel, m) for path, m in self.methods.items()}
                      for channel in self.channels]
        streaming = {path: m for path, m in self.methods.items() if m.client_streaming}
        self.sync_channels = [_sync_channel(spec, caller) for caller in spec.callers]
        self.sync_calls = [{path: channel.stream_stream(path) if m.server_streaming
                            else channel.stream_unary(path) for path, m in streaming.items()}
                           for channel in self.sync_channels]

    @staticmethod
    def _callable(channel: grpc.aio.Channel, m: MethodDescriptor) -> Any:
        kinds = {(False, False): channel.unary_unary, (False, True): channel.unary_stream,
                 (True, False): channel.stream_unary, (True, True): channel.stream_stream}
        return kinds[(m.client_streaming, m.server_streaming)](
            f"/{m.containing_service.full_name}/{m.name}")

    async def run(self) -> Tally:
        indices = iter(range(self.spec.worker, self.spec.requests, self.spec.processes))
        progress = max(1, self.spec.requests // self.spec.processes // 10)
        started = time.monotonic()

        async def loop() -> None:
            for done, index in enumerate(indices):
                await self.one(index)
                if self.spec.worker == 0 and done and index // self.spec.processes % progress == 0:
                    rate = (index + 1) / (time.monotonic() - started)
                    print(f"  {index + 1} requests sent, {rate:.0f}/s", file=sys.stderr,
                          flush=True)

        await asyncio.gather(*(loop() for _ in range(self.spec.concurrency)))
        for channel in self.channels:
            await channel.close()
        for sync in self.sync_channels:
            sync.close()
        self.tally.cpu = time.process_time()
        return self.tally

    async def one(self, index: int) -> None:
        rng = request_rng(self.spec.seed, index)
        path = rng.choice(self.spec.paths)
        m = self.methods[path]
        data, request = self.requests.request(rng, m.input_type)
        extra = [self.requests.request(rng, m.input_type)[0]
                 for _ in range(rng.choice((0, 0, 1, 2)))] if m.client_streaming else []
        owner = self.requests.owner
        caller = (owner if owner is not None and rng.random() < 0.75
                  else rng.randrange(len(self.channels)))
        call = self.calls[caller][path]
        begun = time.perf_counter()
        answers: list[bytes] = []
        try:
            if m.client_streaming:
                answers = await asyncio.to_thread(
                    _stream_sync, self.sync_calls[caller][path], [data, *extra],
                    streams=m.server_streaming)
            elif m.server_streaming:
                answers = await _first(call(data, timeout=CALL_TIMEOUT))
            else:
                answers = [await call(data, timeout=CALL_TIMEOUT)]
            code, details = "OK", ""
        except grpc.RpcError as err:
            code, details = err.code().name, err.details() or ""
        self.tally.codes[(path, code)] += 1
        self.tally.seconds[path] += time.perf_counter() - begun
        about = {"index": index, "caller": self.spec.callers[caller], "code": code,
                 "details": details[:300], "request": _text(request, data)[:600],
                 "base64": base64.b64encode(data).decode() if len(data) <= 4096 else
                 f"({len(data)} bytes: regenerate with --seed {self.spec.seed})"}
        if code in FAILING:
            self.tally.sample(code, path, **about)
        if details and (len(details.encode()) >= 1024 or not details.isprintable()):
            self.tally.codes[(path, "unclean details")] += 1
            self.tally.sample("unclean details", path, **about)
        if answers:
            self._learn(m, caller, request, answers)

    def _learn(self, m: MethodDescriptor, caller: int, request: Message | None,
               answers: list[bytes]) -> None:
        cls = message_factory.GetMessageClass(m.output_type)
        player = str(getattr(request, "player_id", "")) if request is not None else ""
        for answer in answers:
            try:
                self.seen.learn(cls.FromString(answer), caller, player)
            except DecodeError:
                self.tally.sample("undecodable answer", f"/{m.full_name}",
                                  base64=base64.b64encode(answer[:4096]).decode())


async def _first(stream: Any) -> list[bytes]:
    """A server stream's first answer (none if it ends without one); then it is cancelled:
    a health watch never ends, an export may be long."""
    answer = await stream.read()
    stream.cancel()
    return [] if answer is grpc.aio.EOF else [answer]


def _stream_sync(call: Any, requests: list[bytes], *, streams: bool) -> list[bytes]:
    """A client stream of ``requests``, its answers (at most 10), on the synchronous API:
    grpc.aio reports INTERNAL "Internal error from Core" instead of the server's status when
    the server ends the call while the client is still writing (grpc/grpc#36066)."""
    if not streams:
        return [call(iter(requests), timeout=CALL_TIMEOUT)]
    answers: list[bytes] = []
    responses = call(iter(requests), timeout=CALL_TIMEOUT)
    for answer in responses:
        answers.append(answer)
        if len(answers) == 10:
            responses.cancel()
            break
    return answers


def _text(request: Message | None, data: bytes) -> str:
    if request is None:
        return f"(raw bytes) {data[:200]!r}"
    text = str(request)
    return text if len(text) < 600 else text[:600] + "..."


async def _client(spec: Spec) -> Tally:
    return await Client(spec).run()  # its channels belong to this event loop


def run_client(spec: Spec) -> Tally:
    return asyncio.run(_client(spec))


# ----- the server --------------------------------------------------------------------------------


def start_server(root: Path, *, mtls: bool, log_level: str) -> tuple[ServerProcess, Path | None]:
    args = ["--log-level", log_level]
    if not mtls:
        return ServerProcess(root / "data", stacked=False, args=args).start(), None
    certs = make_dev_certs(root / "certs")
    server = ServerProcess(root / "data", stacked=False, tls=Tls(certs, mutual=True),
                           operators=MTLS_OPERATORS,
                           args=[*args, "--auditor-grants", "auditor-1=op-a"]).start()
    return server, certs


def fund_players(server: ServerProcess, callers: Sequence[str | None]) -> None:
    """Each operator's players get real money, so rounds get dealt."""
    for caller in callers:
        if caller == "auditor":
            continue
        with (server.open_channel(caller) if caller else
              grpc.insecure_channel(f"127.0.0.1:{server.port}")) as channel:
            wallet = wallet_pb2_grpc.WalletServiceStub(channel)
            for player in PLAYERS:
                account = wallet_pb2.Account(player_id=player, currency="EUR",
                                             mode=common_pb2.MODE_REAL)
                wallet.Deposit(wallet_pb2.DepositRequest(
                    account=account, amount_minor=10**8, request_id=f"fund-{player}"),
                    timeout=30)


@dataclass
class LogScan:
    """The server log's lines: by level, the tracebacks in them, those not JSON."""

    levels: Counter[str] = field(default_factory=Counter)
    tracebacks: int = 0
    not_json: int = 0
    problems: list[str] = field(default_factory=list)  # error lines, tracebacks, non-JSON

    @property
    def errors(self) -> int:
        return sum(n for level, n in self.levels.items()
                   if level in ("error", "critical", "exception", "fatal"))


def scan_log(path: Path) -> LogScan:
    scan = LogScan()
    with path.open("rb") as log:
        for line in log:
            bad = False
            if b"Traceback" in line:
                scan.tracebacks += 1
                bad = True
            try:
                level = str(orjson.loads(line).get("level", "?"))
            except (orjson.JSONDecodeError, AttributeError):
                scan.not_json += 1
                level, bad = "(not JSON)", True
            scan.levels[level] += 1
            errs = level in ("error", "critical", "exception", "fatal")
            if (bad or errs) and len(scan.problems) < 10:
                scan.problems.append(line.decode(errors="replace").strip()[:600])
    return scan


# ----- the report --------------------------------------------------------------------------------


def print_histogram(codes: Counter[tuple[str, str]], seconds: dict[str, float]) -> None:
    overall: Counter[str] = Counter()
    for (_, code), n in codes.items():
        overall[code] += n
    columns = [c for c, _ in overall.most_common()]
    by_rpc: dict[str, Counter[str]] = defaultdict(Counter)
    for (path, code), n in codes.items():
        by_rpc[path][code] += n
    rows = []
    for path in sorted(by_rpc):
        counts = by_rpc[path]
        calls = sum(n for c, n in counts.items() if c != "unclean details")
        rows.append([path.strip("/").removeprefix("fairshoe."), str(calls),
                     *(str(counts[c]) if counts[c] else "" for c in columns),
                     f"{seconds[path] * 1000 / max(calls, 1):.1f}"])
    total = sum(n for c, n in overall.items() if c != "unclean details")
    rows.append(["all", str(total), *(str(overall[c]) for c in columns), ""])
    print_table(["RPC", "calls", *columns, "mean ms"], rows)


def commit() -> str:
    try:
        return subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True,
                              text=True, check=True, cwd=Path(__file__).parent).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=10**6, help="requests in all")
    parser.add_argument("--seed", type=int, default=1, help="the requests' seed (default 1)")
    parser.add_argument("--concurrency", type=int, default=32,
                        help="calls in flight per client process (default 32)")
    parser.add_argument("--processes", type=int, default=2,
                        help="client processes (default 2)")
    parser.add_argument("--mtls", action="store_true",
                        help="mutual TLS, two operators and an auditor (default plaintext)")
    parser.add_argument("--log-level", default="INFO", help="the server's (default INFO)")
    parser.add_argument("--json", type=Path, help="also write the results, samples and all, here")
    parser.add_argument("--keep", action="store_true", help="keep the data directory")
    return parser.parse_args(argv)


@dataclass
class Run:
    """What a run sent and found."""

    paths: tuple[str, ...]
    duration: float
    status: int  # the server's exit status
    server_cpu: float  # its CPU seconds, start-up included
    client_cpu: float = 0.0
    codes: Counter[tuple[str, str]] = field(default_factory=Counter)
    seconds: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    samples: defaultdict[str, list[dict[str, Any]]] = field(
        default_factory=lambda: defaultdict(list))
    log: LogScan = field(default_factory=LogScan)
    ledger: list[str] = field(default_factory=list)

    def add(self, tally: Tally) -> None:
        self.client_cpu += tally.cpu
        self.codes.update(tally.codes)
        for path, s in tally.seconds.items():
            self.seconds[path] += s
        for key, kept in tally.samples.items():
            self.samples[key] += kept[: SAMPLES - len(self.samples[key])]

    @property
    def calls(self) -> int:
        return sum(n for (_, c), n in self.codes.items() if c != "unclean details")

    def found(self) -> dict[str, int]:
        return {code: sum(n for (_, c), n in self.codes.items() if c == code)
                for code in (*FAILING, "unclean details")}

    def failed(self) -> bool:
        return bool(sum(self.found().values()) or self.log.errors or self.log.tracebacks
                    or self.log.not_json or self.ledger or self.status != 0)


def fuzz(args: argparse.Namespace, root: Path) -> Run:
    """Start the server, send the requests, stop it; then read its log and its ledger."""
    server, certs = start_server(root, mtls=args.mtls, log_level=args.log_level)
    callers: tuple[str | None, ...] = MTLS_CALLERS if args.mtls else (None,)
    try:
        assert server.channel is not None
        paths = tuple(registered(server.channel))
        fund_players(server, callers)
        specs = [Spec(w, args.processes, args.requests, args.seed, args.concurrency,
                      server.port, paths, callers, str(certs) if certs else None)
                 for w in range(args.processes)]
        started = time.monotonic()
        context = multiprocessing.get_context("spawn")  # no gRPC state forked
        with ProcessPoolExecutor(args.processes, mp_context=context) as pool:
            tallies = list(pool.map(run_client, specs))
        duration = time.monotonic() - started
        assert server.proc is not None
        server_cpu = cpu_seconds(server.proc.pid)
    finally:
        status = server.stop()
    run = Run(paths, duration, status, server_cpu)
    for tally in tallies:
        run.add(tally)
    run.log = scan_log(server.log_path)
    run.ledger = ledger_problems(Path(server.database_url))
    return run


def report(args: argparse.Namespace, run: Run, tested: str) -> None:
    services = len({p.split("/")[1] for p in run.paths})
    print(f"fuzz_rpcs: {run.calls} requests over {len(run.paths)} RPCs of {services} services, "
          f"seed {args.seed}, {args.processes} processes x {args.concurrency} in flight, "
          f"{'mTLS, 2 operators + auditor' if args.mtls else 'plaintext'}; commit {tested}; "
          f"{run.duration:.0f} s ({run.calls / run.duration:.0f} requests/s); "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    print(f"CPU per request: server {run.server_cpu * 1000 / run.calls:.2f} ms, clients "
          f"{run.client_cpu * 1000 / run.calls:.2f} ms")
    print_histogram(run.codes, run.seconds)
    print(" ".join(f"{code}: {n}" for code, n in run.found().items()))
    log = run.log
    print(f"server log: {sum(log.levels.values())} lines ("
          + ", ".join(f"{level} {n}" for level, n in log.levels.most_common())
          + f"); error lines: {log.errors}; tracebacks: {log.tracebacks}; "
          f"not JSON: {log.not_json}; exit status {run.status}")
    print("ledger: " + ("balances" if not run.ledger else f"{len(run.ledger)} problems"))
    for line in run.ledger[:10]:
        print(f"  {line}")
    for line in log.problems:
        print(f"  log: {line}")
    for key, kept in sorted(run.samples.items()):
        for about in kept:
            print(f"  {key}: {json.dumps(about, ensure_ascii=False)}")
    if args.json:
        args.json.write_text(json.dumps({
            "requests": run.calls, "seed": args.seed, "duration": run.duration,
            "commit": tested, "codes": [[p, c, n] for (p, c), n in sorted(run.codes.items())],
            "found": run.found(), "log": {"levels": log.levels, "tracebacks": log.tracebacks,
                                          "not_json": log.not_json, "problems": log.problems},
            "ledger": run.ledger, "samples": run.samples}, indent=1, ensure_ascii=False))


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="fuzz-rpcs-"))
    tested = commit()  # now: the tree may move on during an hour's run
    try:
        run = fuzz(args, root)
        report(args, run, tested)
    finally:
        if args.keep:
            print(f"data directory kept: {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    return 1 if run.failed() else 0


if __name__ == "__main__":
    sys.exit(main())
