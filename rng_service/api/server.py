"""The gRPC server's assembly: GameService and MathService; with live services RoundService,
WalletService, AuditService and RngService; standard health checking and reflection; all behind
the interceptor that reports errors by kind and counts every RPC (``api/interceptors.py``).

Errors are part of the API: their kinds map to status codes in one table (``api/errors.py``).

Assembly (:func:`build_server`): the live services (:class:`LiveServices`, on a SQLite file by
default or on PostgreSQL given a ``postgresql://`` URL) are opened, open rounds that need no input
are finished and missing reveals written (``RoundService.recover``) before the server accepts a
call, and health reports SERVING only after that and the RNG's known-answer self-test. From then
on health follows the database and the self-test, re-run every ``self_test_seconds``
(``api/readiness.py``): NOT_SERVING while the database does not answer, SERVING again when it
does (a call that meets the outage ends UNAVAILABLE); NOT_SERVING for good once the self-test
fails.

Transport: plaintext, TLS, or mutual TLS with a client CA (``tls_client_ca``), where the client
certificate names the operator or auditor a call acts as (``api/caller.py``).
"""

from __future__ import annotations

import os
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import structlog
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from rng_service.api import metrics
from rng_service.api.admission import Drain
from rng_service.api.caller import Access, AuditorGrants
from rng_service.api.game_service import GameService
from rng_service.api.interceptors import ServiceInterceptor
from rng_service.api.math_service import MathService
from rng_service.api.par_jobs import ParJobs
from rng_service.api.proto_gen.fairshoe.game.v1 import game_pb2, game_pb2_grpc
from rng_service.api.proto_gen.fairshoe.math.v1 import math_pb2, math_pb2_grpc
from rng_service.api.proto_gen.fairshoe.round.v1 import round_pb2
from rng_service.api.proto_gen.fairshoe.wallet.v1 import wallet_pb2, wallet_pb2_grpc
from rng_service.api.readiness import DatabaseHealth, Readiness, SelfTestWatch
from rng_service.api.record_services import add_record_services
from rng_service.api.round_api import RoundApi, add_round_service
from rng_service.api.wallet_api import WalletApi
from rng_service.api.wallet_clients import WalletClients
from rng_service.core import config as settings
from rng_service.crypto.keys import ActiveKey, KeyStore, KeyStoreError, SigningKey
from rng_service.rng.seed_vault import SeedVault
from rng_service.service.dispatcher import OutboxDispatcher
from rng_service.service.observe import TimedStorage
from rng_service.service.ports import Storage
from rng_service.service.rounds import RoundService
from rng_service.service.shoes import ShoeSource
from rng_service.service.wallet import WalletService
from rng_service.storage import open_storage

__all__ = ["BindFailed", "DrainingHealth", "GameService", "LiveServices", "ServerConfig",
           "build_server"]

log = structlog.get_logger("fairshoe.server")


#: gRPC sets SO_REUSEPORT by default: a second server on a port in use would bind it too and the
#: kernel would split connections between the two processes. Off, that bind fails. The processes
#: of one ``serve --processes N`` turn it on to share their port, which their parent has claimed
#: first so that no other server binds it (``api/port_claim.py``).
SERVER_OPTIONS: tuple[tuple[str, int], ...] = (("grpc.so_reuseport", 0),)
SHARED_PORT_OPTIONS: tuple[tuple[str, int], ...] = (("grpc.so_reuseport", 1),)


class BindFailed(OSError):
    """The server could not listen on its address (in use, or not this host's)."""


class DrainingHealth(health.HealthServicer):  # type: ignore[misc]
    """Standard health checking that, on a graceful shutdown, also ends every open ``Watch``
    (after sending NOT_SERVING): a watcher (a load balancer) learns at once, and its stream
    does not hold the shutdown for the whole grace period. A watch opened while draining gets
    its one answer (NOT_SERVING) and ends too: health stays open during the drain, and a
    watcher that reconnects would otherwise hold the exit until the grace period is over.
    ``List`` answers every status at once."""

    def Watch(self, request: health_pb2.HealthCheckRequest, context: grpc.ServicerContext,
              send_response_callback: Any = None) -> Any:
        """The standard watch; ended at once, after its first answer, while draining."""
        with self._lock:  # re-entrant; enter_graceful_shutdown holds it too
            watcher = super().Watch(request, context, send_response_callback)
            if self._gracefully_shutting_down:
                if watcher is not None:
                    watcher.close()  # the answer queued before stays, then the stream ends
                else:
                    send_response_callback(None)
        return watcher

    def List(self, request: health_pb2.HealthListRequest, context: grpc.ServicerContext
             ) -> health_pb2.HealthListResponse:
        """Every status ``Check`` answers, by service name: grpcio-health-checking registers
        List without implementing it, so every call was an error-level traceback in the log."""
        with self._lock:
            statuses = dict(self._server_status)
        return health_pb2.HealthListResponse(statuses={
            name: health_pb2.HealthCheckResponse(status=status)
            for name, status in statuses.items()})

    def enter_graceful_shutdown(self) -> None:
        """Every status NOT_SERVING for good (later ``set`` calls are ignored), then each
        watch stream ends with status OK."""
        super().enter_graceful_shutdown()
        with self._lock:  # grpcio-health-checking keeps the watchers' callbacks there
            callbacks = [callback for per_service in self._send_response_callbacks.values()
                         for callback in per_service]
        for callback in callbacks:
            callback(None)  # None closes a watcher's response stream


@dataclass(frozen=True)
class ServerConfig:
    """Where and how the server listens."""

    address: str = "127.0.0.1:50051"
    tls_cert: str | None = None
    tls_key: str | None = None
    #: with it, mutual TLS: only client certificates this CA signed pass the handshake, and
    #: each names its caller (``api/caller.py``)
    tls_client_ca: str | None = None
    auditor_grants: AuditorGrants = field(default_factory=AuditorGrants)
    workers: int = 32
    #: seconds between re-runs of the RNG self-test once serving (0: only at start-up, the
    #: default for servers built in-process; `fairshoe serve` re-runs it every 60 s by default)
    self_test_seconds: float = 0.0
    #: one of the ``processes`` of a ``serve --processes N``, sharing its port (SO_REUSEPORT)
    shared_port: bool = False
    processes: int = 1

    def __post_init__(self) -> None:
        if bool(self.tls_cert) != bool(self.tls_key):
            raise settings.ConfigError("--tls-cert and --tls-key go together")
        if self.tls_client_ca and not self.tls_cert:
            raise settings.ConfigError("--tls-client-ca needs --tls-cert and --tls-key (mutual "
                                       "TLS is TLS first)")
        if self.auditor_grants.grants and not self.tls_client_ca:
            raise settings.ConfigError("auditor grants need --tls-client-ca: only a client "
                                       "certificate names an auditor")

    @property
    def tls(self) -> str:
        """``none``, ``server`` (TLS) or ``mutual`` (mTLS: client certificates name callers)."""
        if not self.tls_cert:
            return "none"
        return "mutual" if self.tls_client_ca else "server"

    @property
    def max_streams(self) -> int:
        """The services' own streaming calls (exports) open at once, each on a worker: half
        the workers (at least one), so that streams clients hold open (slow exports) leave the
        other half to everyone else's calls; one caller holds at most half of them. Health
        watches and reflection have threads of their own (:attr:`probe_streams`)."""
        return max(1, self.workers // 2)

    @property
    def analysis_processes(self) -> int:
        """PAR analyses of new rule sets run at once, each in a child process (half the CPUs,
        at least one, shared among the serve's processes): the rest of the machine is live
        play's (``api/par_jobs.py``)."""
        return max(1, (os.cpu_count() or 2) // 2 // self.processes)

    @property
    def probe_streams(self) -> int:
        """Health watches and reflection streams open at once, each on a thread of its own
        beside the workers (at least 2): watches held open never take a worker or an
        export's slot."""
        return max(2, self.workers // 2)

    @property
    def pool_size(self) -> int:
        """Database connections a server needs at most: one per worker thread (a call holds one
        for one transaction) and one for the health pings."""
        return self.workers + 1


@dataclass(frozen=True)
class LiveServices:
    """The stateful use cases a server serves, on one database."""

    storage: Storage
    rounds: RoundService
    wallet: WalletService
    keys: KeyStore
    #: sends the seamless wallet's outbox (started once open rounds are recovered)
    dispatcher: OutboxDispatcher | None = None
    wallets: WalletClients | None = None

    @classmethod
    def open(cls, database: Path | str | None = None, *,
             shoe_source: ShoeSource | None = None, pool_size: int | None = None
             ) -> LiveServices:
        """The services on ``database``, a SQLite file or a ``postgresql://`` URL (default: the
        configured one, ``FAIRSHOE_DATABASE_URL`` else ``FAIRSHOE_DATABASE``), with at most
        ``pool_size`` PostgreSQL connections, the configured seed vault, the key store's signing
        key (a dev key is made on a first run outside production) and OS-seeded shoes unless
        ``shoe_source`` (tests) says otherwise."""
        storage = open_storage(database if database is not None else settings.database_url(),
                               pool_size=pool_size)
        timed = TimedStorage(storage, metrics.OBSERVER)  # transaction times for the metrics
        keys = KeyStore()
        wallets = WalletClients()
        dispatcher = OutboxDispatcher(timed, wallets)
        try:
            signing_key(keys)  # made on a first run outside production; else it must exist
            rounds = RoundService(timed, vault=SeedVault.from_config(), signer=ActiveKey(keys),
                                  shoe_source=shoe_source, observer=metrics.OBSERVER,
                                  wallets=wallets, on_outbox=dispatcher.wake)
        except BaseException:
            storage.close()
            raise
        return cls(storage, rounds, WalletService(timed), keys, dispatcher, wallets)

    def close(self) -> None:
        """Stops the outbox's dispatcher, closes the wallet clients and the database."""
        if self.dispatcher is not None:
            self.dispatcher.stop()
        if self.wallets is not None:
            self.wallets.close()
        self.storage.close()


def signing_key(store: KeyStore | None = None) -> SigningKey:
    """The key store's active signing key. Outside production a first run creates one (a dev
    key) and logs its id, never the key; production refuses to start without one."""
    keys = store if store is not None else KeyStore()
    if keys.active_key_id() is None:
        if settings.is_production():
            raise settings.ConfigError(f"no active signing key in {keys.root}; create one with "
                                       "`fairshoe keys create` and publish its public key")
        try:
            info = keys.create()
        except KeyStoreError:  # a concurrent starter created it first
            pass
        else:
            log.warning("dev_signing_key_created", key_id=info.key_id, key_store=str(keys.root))
    return keys.load_signing_key()


def bind_server(config: ServerConfig, *, drain: Drain | None = None
                ) -> tuple[grpc.Server, int]:
    """A server not yet started, listening on ``config.address`` (its port, 0 in the address
    picking a free one), for :func:`build_server`: `fairshoe serve` binds before it creates a
    database or keys, so a start that fails on its port leaves nothing behind. ``drain`` is the
    gate its owner closes to shut it down (default: one nobody drains). Raises
    :class:`BindFailed`."""
    access = Access(config.auditor_grants)
    # twice the streams it may hold: a stream past the limit is refused on this pool too, by
    # a thread no held stream occupies (the calls queued behind held ones would wait forever)
    probes = futures.ThreadPoolExecutor(max_workers=2 * config.probe_streams,
                                        thread_name_prefix="fairshoe-probe")
    interceptor = ServiceInterceptor(access, max_streams=config.max_streams,
                                     probe_streams=config.probe_streams, probe_pool=probes,
                                     drain=drain)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=config.workers),
                         interceptors=[interceptor],
                         options=SHARED_PORT_OPTIONS if config.shared_port else SERVER_OPTIONS)
    return server, _bind(server, config)


def build_server(config: ServerConfig, live: LiveServices | None = None, *,
                 storage: Storage | None = None, key_store: KeyStore | None = None,
                 health_servicer: health.HealthServicer | None = None,
                 bound: tuple[grpc.Server, int] | None = None
                 ) -> tuple[grpc.Server, int]:
    """A started server and the port it bound (0 in the address picks a free one). With
    ``live``, RoundService, WalletService, AuditService and RngService too, after recovering
    open rounds; with ``storage`` alone, AuditService and RngService on it (signing with
    ``key_store``, default the configured store). ``health_servicer`` (default a new
    :class:`DrainingHealth`) is the caller's to turn NOT_SERVING on shutdown. ``bound`` is a
    server :func:`bind_server` made for ``config`` (default: one bound now). Raises
    :class:`BindFailed` if the address cannot be bound (another process on the port
    included)."""
    server, port = bound if bound is not None else bind_server(config)
    try:
        _add_services(server, config, live, storage=storage, key_store=key_store,
                      health_servicer=health_servicer)
    except BaseException:
        server.stop(grace=None)  # the port is free again for whoever retries
        raise
    return server, port


def _add_services(server: grpc.Server, config: ServerConfig, live: LiveServices | None, *,
                  storage: Storage | None, key_store: KeyStore | None,
                  health_servicer: health.HealthServicer | None) -> None:
    """Every service on ``server``, which is then started, its readiness checks running."""
    game_pb2_grpc.add_GameServiceServicer_to_server(GameService(), server)
    math_pb2_grpc.add_MathServiceServicer_to_server(
        MathService(live.rounds if live is not None else None,
                    jobs=ParJobs(config.analysis_processes)), server)
    services = [game_pb2.DESCRIPTOR.services_by_name["GameService"].full_name,
                math_pb2.DESCRIPTOR.services_by_name["MathService"].full_name]
    on_database: list[str] = []  # the services that read or write the database
    if live is not None:
        on_database += [services[1], *_add_live_services(server, live)]  # MathService: live
        storage, key_store = live.storage, live.keys
    if storage is not None:
        on_database += add_record_services(server, TimedStorage(storage, metrics.OBSERVER),
                                           key_store or KeyStore())
    services += [name for name in on_database if name not in services]
    health_servicer = health_servicer if health_servicer is not None else DrainingHealth()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    health_name = health_pb2.DESCRIPTOR.services_by_name["Health"].full_name
    reflection.enable_server_reflection((*services, health_name, reflection.SERVICE_NAME), server)
    server.start()
    # health: every service needs the RNG's self-test to pass (now, and each re-run); "" and
    # the database's services need the database to answer too
    readiness = Readiness(health_servicer, services, ["", *on_database] if storage else ())
    SelfTestWatch(readiness, metrics.record_self_test, interval=config.self_test_seconds).start()
    if storage is not None:
        DatabaseHealth(readiness, storage).start()


def _add_live_services(server: grpc.Server, live: LiveServices) -> list[str]:
    add_round_service(RoundApi(live.rounds), server)  # StartRound and Act answer in bytes
    wallet_pb2_grpc.add_WalletServiceServicer_to_server(WalletApi(live.wallet), server)
    recovered = live.rounds.recover()  # before any call: nothing races the recovery
    log.info("recovered", completed_rounds=len(recovered.completed_rounds),
             revealed_shoes=len(recovered.revealed_shoes))
    if live.dispatcher is not None:  # resumes the outbox: whatever a crash left unsent
        live.dispatcher.start()
    return [round_pb2.DESCRIPTOR.services_by_name["RoundService"].full_name,
            wallet_pb2.DESCRIPTOR.services_by_name["WalletService"].full_name]


def _bind(server: grpc.Server, config: ServerConfig) -> int:
    try:
        if config.tls_cert and config.tls_key:
            port = int(server.add_secure_port(config.address, _credentials(config)))
        else:
            port = int(server.add_insecure_port(config.address))
    except RuntimeError:  # grpcio raises where older versions returned 0
        port = 0
    if port == 0:
        raise BindFailed(f"cannot listen on {config.address}: the port is in use (another "
                         "server?) or the address is not this host's")
    return port


def _credentials(config: ServerConfig) -> grpc.ServerCredentials:
    """TLS with the server's certificate; with a client CA, mutual TLS: a client must present a
    certificate that CA signed, or the handshake fails before any call."""
    assert config.tls_cert and config.tls_key
    with open(config.tls_cert, "rb") as c, open(config.tls_key, "rb") as k:
        pair = (k.read(), c.read())
    if not config.tls_client_ca:
        return grpc.ssl_server_credentials([pair])
    with open(config.tls_client_ca, "rb") as ca:
        roots = ca.read()
    return grpc.ssl_server_credentials([pair], root_certificates=roots,
                                       require_client_auth=True)
