"""Every Prometheus series the server exports, defined here and nowhere else.

gRPC (named and labelled as the Prometheus gRPC middleware, go-grpc-prometheus, names them, so its
dashboards and alerts work unchanged; counted by ``api/rpc_metrics.py`` at the status code the
client receives): ``grpc_server_started_total``, ``grpc_server_handled_total`` (with
``grpc_code``), ``grpc_server_msg_received_total``, ``grpc_server_msg_sent_total`` and the
``grpc_server_handling_seconds`` histogram, each labelled ``grpc_type`` (``unary``,
``client_stream``, ``server_stream``, ``bidi_stream``), ``grpc_service``, ``grpc_method``; the
code as Go spells it (``OK``, ``InvalidArgument``, ``NotFound``, ``Canceled``: :func:`grpc_code`),
as the middleware's dashboards and alerts expect. The JSON logs keep the Python names.

The game (from the round service's committed transactions, :class:`PrometheusObserver`; no
player, round or shoe id is ever a label): rounds started and finished, money staked and
returned and wagers placed by game, mode and wager kind (``main``, ``split``, ``double``,
``insurance`` or a side bet's name), shoes opened and revealed; the theoretical return and
standard deviation per game and wager (:class:`Refresher`, computed once in a background
thread after start-up, so they never delay it or health); the RNG's known-answer self-test; the
ledger's and the signed records' sizes (counted periodically); database transaction times.

The actual return of a game's main wager, per unit of initial bet as the theoretical figure is
(main, split and double wagers' net result over the main stakes)::

    1 + sum by (game) (increase(fairshoe_returned_minor_total{wager=~"main|split|double"}[1d])
                       - increase(fairshoe_staked_minor_total{wager=~"main|split|double"}[1d]))
      / sum by (game) (increase(fairshoe_staked_minor_total{wager="main"}[1d]))

and of everything staked on a game: ``sum by (game) (increase(fairshoe_returned_minor_total[1d]))
/ sum by (game) (increase(fairshoe_staked_minor_total[1d]))``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import structlog
from prometheus_client import (
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from rng_service.api.series import Update, incrementer, observer, summer
from rng_service.rng.selftest import SelfTestFailed, run_self_test
from rng_service.service.observe import (
    Event,
    RoundFinished,
    RoundStarted,
    ShoeOpened,
    ShoeRevealed,
)

log = structlog.get_logger("fairshoe.metrics")

# the ``_created`` companion series of every counter and histogram double the scrape for nothing
# a dashboard uses (go-grpc-prometheus has none either)
disable_created_metrics()  # type: ignore[no-untyped-call]

# --- gRPC ---------------------------------------------------------------------------------------

_GRPC: Final = ("grpc_type", "grpc_service", "grpc_method")

#: Go's names of the status codes (google.golang.org/grpc/codes: Code.String())
_GO_CODES: Final = {
    "OK": "OK", "CANCELLED": "Canceled", "UNKNOWN": "Unknown",
    "INVALID_ARGUMENT": "InvalidArgument", "DEADLINE_EXCEEDED": "DeadlineExceeded",
    "NOT_FOUND": "NotFound", "ALREADY_EXISTS": "AlreadyExists",
    "PERMISSION_DENIED": "PermissionDenied", "RESOURCE_EXHAUSTED": "ResourceExhausted",
    "FAILED_PRECONDITION": "FailedPrecondition", "ABORTED": "Aborted",
    "OUT_OF_RANGE": "OutOfRange", "UNIMPLEMENTED": "Unimplemented", "INTERNAL": "Internal",
    "UNAVAILABLE": "Unavailable", "DATA_LOSS": "DataLoss", "UNAUTHENTICATED": "Unauthenticated",
}


def grpc_code(name: str) -> str:
    """The ``grpc_code`` label of a status code named as Python names it.

    >>> grpc_code("INVALID_ARGUMENT"), grpc_code("CANCELLED")
    ('InvalidArgument', 'Canceled')
    """
    return _GO_CODES.get(name, "Unknown")


@dataclass(frozen=True)
class GrpcSeries:
    """The five standard gRPC server series, labelled by method (``api/rpc_metrics.py`` counts
    them)."""

    started: Counter
    handled: Counter
    received: Counter
    sent: Counter
    seconds: Histogram


def grpc_series(registry: CollectorRegistry = REGISTRY) -> GrpcSeries:
    """The standard gRPC server series, registered in ``registry`` (a test's own keeps them
    apart from the process's)."""
    return GrpcSeries(
        started=Counter("grpc_server_started_total",
                        "Total number of RPCs started on the server.", _GRPC, registry=registry),
        handled=Counter("grpc_server_handled_total",
                        "Total number of RPCs completed on the server, regardless of success or "
                        "failure.", (*_GRPC, "grpc_code"), registry=registry),
        received=Counter("grpc_server_msg_received_total",
                         "Total number of RPC stream messages received on the server.", _GRPC,
                         registry=registry),
        sent=Counter("grpc_server_msg_sent_total",
                     "Total number of gRPC stream messages sent by the server.", _GRPC,
                     registry=registry),
        seconds=Histogram(
            "grpc_server_handling_seconds",
            "Histogram of response latency (seconds) of gRPC that had been application-level "
            "handled by the server.", _GRPC, registry=registry),
    )


#: the process's, which ``fairshoe serve`` exports
GRPC: Final = grpc_series()

# --- rounds and money ---------------------------------------------------------------------------

ROUNDS_STARTED = Counter("fairshoe_rounds_started_total", "Rounds dealt.", ("game", "mode"))
ROUNDS_FINISHED = Counter("fairshoe_rounds_finished_total",
                          "Rounds ended, by status (finished, or void: every stake returned).",
                          ("game", "mode", "status"))
STAKED = Counter("fairshoe_staked_minor_total",
                 "Minor units staked in finished and void rounds, counted once when the round "
                 "ends.", ("game", "mode", "wager"))
RETURNED = Counter("fairshoe_returned_minor_total",
                   "Minor units returned (stake included) in finished and void rounds, counted "
                   "once when the round ends.", ("game", "mode", "wager"))
WAGERS = Counter("fairshoe_wagers_total", "Wagers of finished and void rounds.",
                 ("game", "mode", "wager"))
THEORETICAL_RETURN = Gauge(
    "fairshoe_theoretical_return",
    "Expected return per unit staked, stake included: the exact analysis under basic strategy "
    "per unit of initial bet for wager=main (splits and doubles included, insurance never "
    "taken); the exact figure for a side bet.", ("game", "wager"), multiprocess_mode="mostrecent")
RETURN_STDDEV = Gauge(
    "fairshoe_return_stddev",
    "Standard deviation of one wager's return per unit staked: a basic-strategy round per unit "
    "of initial bet for wager=main (simulated, fixed seed), exact for a side bet.",
    ("game", "wager"), multiprocess_mode="mostrecent")

# --- shoes and the RNG --------------------------------------------------------------------------

SHOES_OPENED = Counter("fairshoe_shoes_opened_total",
                       "Shoes drawn, sealed and committed.", ("game",))
SHOES_REVEALED = Counter("fairshoe_shoes_revealed_total",
                         "Finished shoes whose signed seed reveal was stored.", ("game",))
# serving from several processes (``serve --processes N``), the lowest of the live processes'
# results (one failed self-test shows) and the latest run's time
RNG_SELF_TEST_OK = Gauge("fairshoe_rng_self_test_ok",
                         "1 if the RNG's last known-answer self-test passed, else 0.",
                         multiprocess_mode="livemin")
RNG_SELF_TEST_TIMESTAMP = Gauge("fairshoe_rng_self_test_timestamp_seconds",
                                "When the RNG's known-answer self-test last ran (Unix time).",
                                multiprocess_mode="livemax")

# --- storage ------------------------------------------------------------------------------------

# fairshoe_ledger_entries and fairshoe_signed_records{kind} are read at each scrape by
# :class:`StorageSizes` (below)
DB_TRANSACTION_SECONDS = Histogram(
    "fairshoe_db_transaction_seconds",
    "Database transaction time, from BEGIN to COMMIT (or rollback), by kind (write, read) and "
    "outcome (ok, error).", ("kind", "outcome"),
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0))


_UPDATES: dict[tuple[int, tuple[str, ...]], Update] = {}


def _update(metric: Counter | Histogram, *values: str) -> Update:
    """What adds to ``metric.labels(*values)`` (``api/series.py``), looked up once (``labels``
    takes a lock and checks the values on every call; the label values here come from a small
    fixed set: games, modes, kinds)."""
    key = (id(metric), values)
    update = _UPDATES.get(key)
    if update is None:
        child = metric.labels(*values)
        update = observer(child) if isinstance(metric, Histogram) else incrementer(child)
        _UPDATES[key] = update
    return update


#: what adds a finished round's count, stake and return of one wager kind (by game, mode and
#: kind) to WAGERS, STAKED and RETURNED, in one call (``series.summer``)
_WAGERED: dict[tuple[str, str, str], Callable[..., None]] = {}
#: what observes a transaction's time, by kind and outcome (``_update``'s, without its key)
_TIMED: dict[tuple[str, str], Update] = {}


#: what adds to ROUNDS_STARTED and ROUNDS_FINISHED, by their label values
_STARTED: dict[tuple[str, ...], Update] = {}
_FINISHED: dict[tuple[str, ...], Update] = {}


def _kept(table: dict[tuple[str, ...], Update], metric: Counter,
          values: tuple[str, ...]) -> Update:
    """``_update(metric, *values)``, kept in ``table`` by ``values`` too."""
    update = table[values] = _update(metric, *values)
    return update


def _wagered(game: str, mode: str, kind: str) -> Callable[..., None]:
    key = (game, mode, kind)
    add = _WAGERED.get(key)
    if add is None:
        add = _WAGERED[key] = summer([WAGERS.labels(*key), STAKED.labels(*key),
                                      RETURNED.labels(*key)])
    return add


class PrometheusObserver:
    """The round service's :class:`~rng_service.service.observe.Observer`: counts committed
    events and times transactions."""

    def committed(self, events: Sequence[Event]) -> None:
        """Count ``events`` (of one committed transaction)."""
        # by isinstance, not a match statement: its class patterns cost some 3,000
        # instructions an event (every transition that starts or ends a round has one)
        for event in events:
            if isinstance(event, RoundStarted):
                started = (event.game, event.mode)  # _update's, by its own key: a call less
                (_STARTED.get(started) or _kept(_STARTED, ROUNDS_STARTED, started))(1)
            elif isinstance(event, RoundFinished):
                game, mode = event.game, event.mode
                ended = (game, mode, event.status)
                (_FINISHED.get(ended) or _kept(_FINISHED, ROUNDS_FINISHED, ended))(1)
                for kind, totals in event.wagers.items():  # counts and minor units: never < 0
                    _wagered(game, mode, kind)(totals.count, totals.staked, totals.returned)
            elif isinstance(event, ShoeOpened):
                _update(SHOES_OPENED, event.game)(1)
            elif isinstance(event, ShoeRevealed):
                _update(SHOES_REVEALED, event.game)(1)

    def transaction(self, kind: str, seconds: float, outcome: str) -> None:
        """Observe one transaction's time (every transaction of a served call)."""
        observe = _TIMED.get((kind, outcome))
        if observe is None:
            observe = _TIMED[kind, outcome] = _update(DB_TRANSACTION_SECONDS, kind, outcome)
        observe(seconds)


OBSERVER: Final = PrometheusObserver()


def self_test_result(passed: bool) -> None:
    """Set the self-test gauges to a run that just ended."""
    RNG_SELF_TEST_OK.set(1 if passed else 0)
    RNG_SELF_TEST_TIMESTAMP.set(time.time())


def record_self_test() -> bool:
    """Run the RNG's known-answer self-test (about 5 ms) and set its gauges; True if it passed."""
    try:
        run_self_test()
    except SelfTestFailed as exc:
        log.error("rng_self_test_failed", reason=str(exc))
        passed = False
    else:
        passed = True
    self_test_result(passed)
    return passed


# --- theoretical figures ----------------------------------------------------------------------

def publish_theoretical(games: Sequence[str]) -> None:
    """Set the theoretical gauges of ``games``: shipped with the package for the rules they were
    made from, computed otherwise (:mod:`rng_service.lab.theoretical`). One game's failure is
    logged and leaves its gauges absent; the others still publish."""
    from rng_service.lab.theoretical import figures  # noqa: PLC0415  # not on --help's path

    for game in games:
        try:
            found, source = figures(game)
        except Exception as exc:  # an analysis bug must not take the server down
            log.error("theoretical_return_failed", game=game, error=repr(exc))
            continue
        for wager, (rtp, sd) in found.items():
            THEORETICAL_RETURN.labels(game, wager).set(rtp)
            RETURN_STDDEV.labels(game, wager).set(sd)
        log.info("theoretical_return", game=game, main=found["main"][0], source=source)


# --- storage sizes, read at each scrape ----------------------------------------------------------

Sizes = Callable[[], Mapping[str, int]]


class StorageSizes:
    """A collector reading the storage's sizes when Prometheus scrapes: ``sizes()`` gives
    ``ledger_entries`` and one count per signed-envelope kind (``SqliteStorage.sizes``, a few
    index look-ups). A failure is logged and the series are left out of that scrape."""

    def __init__(self, sizes: Sizes) -> None:
        self._sizes = sizes

    def describe(self) -> list[Metric]:
        """Nothing: registering must not read the database."""
        return []

    def collect(self) -> Iterator[Metric]:
        """The two gauges, read now."""
        try:
            sizes = dict(self._sizes())
        except Exception as exc:  # the database busy or closing: this scrape goes without
            log.warning("metrics_sizes_failed", error=repr(exc))
            return
        entries = GaugeMetricFamily("fairshoe_ledger_entries",
                                    "Entries in the double-entry ledger.")
        entries.add_metric([], sizes.pop("ledger_entries", 0))
        yield entries
        queued = GaugeMetricFamily(
            "fairshoe_log_queued_leaves", "Leaves committed but not yet sequenced into the "
            "transparency log (PostgreSQL queues them and its replicas' sequencers merge them "
            "every 50 ms; SQLite sequences at commit, always 0). Growing: no sequencer runs.")
        queued.add_metric([], sizes.pop("log_queued", 0))
        yield queued
        records = GaugeMetricFamily(
            "fairshoe_signed_records", "Signed envelopes stored, by kind: round records, shoe "
            "reveals, RNG draw records and reveals.", labels=["kind"])
        for kind, count in sorted(sizes.items()):
            records.add_metric([kind], count)
        yield records


# --- the seamless wallet's outbox, read at each scrape --------------------------------------------

#: (unsettled movements, the oldest one's age in seconds) of every operator
Outbox = Callable[[], tuple[int, float]]


class OutboxGauges:
    """A collector reading the outbox when Prometheus scrapes: how many movements are not yet
    settled with the operators' wallets and how old the oldest is (0 and 0 when none, so the
    series always exist). A failure is logged and the series are left out of that scrape."""

    def __init__(self, outbox: Outbox) -> None:
        self._outbox = outbox

    def describe(self) -> list[Metric]:
        """Nothing: registering must not read the database."""
        return []

    def collect(self) -> Iterator[Metric]:
        """The two gauges, read now."""
        try:
            count, oldest = self._outbox()
        except Exception as exc:  # the database busy or closing: this scrape goes without
            log.warning("metrics_outbox_failed", error=repr(exc))
            return
        pending = GaugeMetricFamily(
            "fairshoe_wallet_unsettled_movements", "Seamless-wallet movements (debits, "
            "credits, rollbacks) not yet acknowledged by the operators' wallets.")
        pending.add_metric([], count)
        yield pending
        age = GaugeMetricFamily(
            "fairshoe_wallet_oldest_unsettled_seconds", "Age of the oldest seamless-wallet "
            "movement not yet acknowledged (0 when none).")
        age.add_metric([], oldest)
        yield age


# --- the background thread ----------------------------------------------------------------------


class Refresher(threading.Thread):
    """A daemon thread: publishes the theoretical figures once (so they never delay start-up or
    health). The self-test gauges are set by each run of the self-test, which health re-runs
    (``api/readiness.py``, :func:`record_self_test`)."""

    def __init__(self, games: Sequence[str]) -> None:
        super().__init__(name="fairshoe-metrics", daemon=True)
        self._games = tuple(games)
        self._stop = threading.Event()
        self.published = threading.Event()  # set once the theoretical figures are out

    def run(self) -> None:
        """Publish the theoretical figures."""
        publish_theoretical(self._games)
        self.published.set()

    def stop(self) -> None:
        """Ask the thread to end (it ends within its current step)."""
        self._stop.set()


def start_metrics(sizes: Sizes | None, outbox: Outbox | None = None,
                  registry: CollectorRegistry = REGISTRY) -> Refresher:
    """What a serving process adds to the metrics beyond the RPCs: storage sizes and the
    seamless wallet's outbox at each scrape (``sizes``, e.g. ``SqliteStorage.sizes``;
    ``outbox``) and the :class:`Refresher` for every built-in game, started. Call once per
    process, with the ``registry`` its metrics port serves."""
    from game_math.rules import GAME_IDS  # noqa: PLC0415

    if sizes is not None:
        registry.register(StorageSizes(sizes))
    if outbox is not None:
        registry.register(OutboxGauges(outbox))
    refresher = Refresher(GAME_IDS)
    refresher.start()
    return refresher


# --- several processes, one endpoint -------------------------------------------------------------


class _OwnSeries:
    """A collector of metrics kept in this process's own memory (the parent's theoretical
    figures), for a registry other than the default one they were defined in."""

    def __init__(self, metrics: Sequence[Gauge]) -> None:
        self._metrics = tuple(metrics)

    def describe(self) -> list[Metric]:
        """Nothing: the names are checked when collected."""
        return []

    def collect(self) -> Iterator[Metric]:
        """Each metric's series, as they are now."""
        for metric in self._metrics:
            yield from metric.collect()


def multiprocess_registry(directory: str) -> CollectorRegistry:
    """The registry the parent of ``serve --processes N`` serves: every worker's series from
    ``directory`` (their ``PROMETHEUS_MULTIPROC_DIR``), added up (counters and histograms
    summed, dead workers' counts kept; gauges by their ``multiprocess_mode``), and the
    theoretical figures, which the parent computes once for all of them (workers compute none).
    The parent's own process is not in multiprocess mode: nothing it counts is in the files."""
    from prometheus_client.multiprocess import MultiProcessCollector  # noqa: PLC0415

    registry = CollectorRegistry(auto_describe=False)
    MultiProcessCollector(registry, path=directory)  # type: ignore[no-untyped-call]
    registry.register(_OwnSeries((THEORETICAL_RETURN, RETURN_STDDEV)))
    return registry


def worker_exited(directory: str, pid: int) -> None:
    """Drop the live gauges of worker ``pid`` (its counts stay in the sums)."""
    from prometheus_client.multiprocess import mark_process_dead  # noqa: PLC0415

    mark_process_dead(pid, directory)  # type: ignore[no-untyped-call]
