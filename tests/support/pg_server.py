"""A real, throwaway PostgreSQL for the tests, started by the test run itself.

:class:`PgServer` finds the server binaries (``FAIRSHOE_PG_BINDIR``, ``pg_config --bindir``,
Debian's ``/usr/lib/postgresql/<version>/bin``, the ``PATH``), installs Debian's ``postgresql``
package when they are missing and we are root, creates a cluster in a temporary directory and
runs it on a free port on 127.0.0.1 (and a socket in that directory). PostgreSQL refuses to run
as root, and CI runs as root: then ``initdb`` and ``pg_ctl`` run as an unprivileged user
(``FAIRSHOE_TEST_PG_USER``, else ``postgres`` if it exists, else ``nobody``) who owns the
directory. The server runs with ``fsync=on`` and ``synchronous_commit=on``: durability is what the
tests check. (``initdb --no-sync`` skips only initdb's own final flush of a throwaway cluster.)

Fixtures (imported by ``tests/conftest.py``):

* ``pg_server``: one server per test process for the whole session (with ``pytest -n 2`` each
  xdist worker has its own, so a test that restarts its server disturbs no other worker);
  started on first use, stopped and removed at the end. About 1.5 s to start.
* ``pg_template``: a database migrated once per session (``CREATE DATABASE ... TEMPLATE`` copies
  it for tests that need a database of their own).
* ``pg_url``: the worker's migrated database, emptied before each test back to what the
  migrations left (every table's rows deleted and the migrations' seed rows put back,
  sequences restarted, other connections to it terminated): ~10 ms. A fresh copy of the
  template per test was measured at 0.15-0.3 s idle and ~1 s on a loaded machine (the copy is
  ~8 MB of WAL written with fsync on), times two backends' worth of tests.
* ``pg_fresh_url``: a new copy of the migrated template; ``pg_empty_url``: a new empty
  database (migration tests). Databases are not dropped one by one (a DROP DATABASE took up
  to 1.6 s): the whole cluster is removed at the end of the session.
* ``pg_module_url``: a new copy of the migrated template for one test module (a server
  process shared by the module's tests).
* ``own_pg_server``: a server for one test that stops, crashes or restarts it.

``FAIRSHOE_TEST_POSTGRES=0`` skips every PostgreSQL test (a machine without PostgreSQL on which
we may not install it); otherwise a missing server is an error, not a silent skip.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from rng_service.storage.postgres import migrate
from support.ports import restartable_port

SUPERUSER = "fairshoe"
ENABLE_ENV = "FAIRSHOE_TEST_POSTGRES"
BINDIR_ENV = "FAIRSHOE_PG_BINDIR"
USER_ENV = "FAIRSHOE_TEST_PG_USER"
TEMPLATE = "fairshoe_template"


class PgUnavailable(RuntimeError):
    """No PostgreSQL server binaries here, and none could be installed."""


# --- binaries --------------------------------------------------------------------------------


def _bindir_candidates() -> Iterator[Path]:
    if os.environ.get(BINDIR_ENV):
        yield Path(os.environ[BINDIR_ENV])
    with contextlib.suppress(OSError, subprocess.CalledProcessError):
        out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True,
                             check=True).stdout.strip()
        yield Path(out)
    debian = sorted(Path("/usr/lib/postgresql").glob("*/bin"),
                    key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
                    reverse=True)
    yield from debian
    found = shutil.which("initdb")
    if found:
        yield Path(found).resolve().parent


def find_bindir() -> Path | None:
    """The directory holding ``initdb``, ``pg_ctl`` and ``postgres``, or None."""
    for candidate in _bindir_candidates():
        if all((candidate / tool).is_file() for tool in ("initdb", "pg_ctl", "postgres")):
            return candidate
    return None


INSTALL_LOCK = Path(tempfile.gettempdir()) / "fairshoe-pg-install.lock"


def ensure_bindir() -> Path:
    """The server binaries, installing Debian's ``postgresql`` package if they are missing and
    this process may (root, apt-get present). ``scripts/setup-tests`` installs it before the run;
    this is the fallback for a bare ``pytest``. One process installs at a time (xdist workers
    start together; apt refuses a second concurrent install), the others then find it."""
    found = find_bindir()
    if found is not None:
        return found
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise PgUnavailable("PostgreSQL server binaries not found (install the postgresql "
                            f"package, set {BINDIR_ENV}, or {ENABLE_ENV}=0 to skip)")
    with INSTALL_LOCK.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = find_bindir()  # another worker may have installed it meanwhile
        if found is None:
            _apt_install("postgresql")
            found = find_bindir()
    if found is None:
        raise PgUnavailable("installed postgresql, yet initdb/pg_ctl are still missing")
    return found


def _apt_install(package: str) -> None:
    """``apt-get update`` then ``apt-get install -y`` as CI runs it: root, no terminal, no stdin."""
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (["apt-get", "update", "-qq"],
                    ["apt-get", "install", "-y", "-qq", "--no-install-recommends", package]):
        done = subprocess.run(command, env=env, capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, check=False)
        if done.returncode != 0:
            raise PgUnavailable(f"{' '.join(command)} failed ({done.returncode}):\n"
                                f"{done.stdout[-2000:]}{done.stderr[-2000:]}")


def _run_as() -> pwd.struct_passwd | None:
    """Whom the server runs as: None (ourselves) unless we are root, which it refuses."""
    if os.geteuid() != 0:
        return None
    name = os.environ.get(USER_ENV)
    for candidate in ([name] if name else ["postgres", "nobody"]):
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(candidate)
    raise PgUnavailable(f"no unprivileged user to run PostgreSQL as (set {USER_ENV})")


def free_port() -> int:
    """A port for the server, which restarts on it (tests/support/ports.py says why it lies
    below the kernel's local port range: replicas reconnecting every few milliseconds would
    otherwise churn through it while the server is down)."""
    try:
        return restartable_port()
    except RuntimeError as exc:
        raise PgUnavailable(f"no port for PostgreSQL: {exc}") from None


# --- the server ------------------------------------------------------------------------------


class PgServer:
    """One throwaway cluster: ``start``, ``stop``, ``restart``, databases, URLs."""

    def __init__(self, bindir: Path | None = None) -> None:
        self.bindir = bindir or ensure_bindir()
        self.user = _run_as()
        self.root = Path(tempfile.mkdtemp(prefix="fairshoe-pg-"))
        self.data = self.root / "data"
        self.sockets = self.root / "sock"
        self.log = self.root / "server.log"
        self.port = free_port()
        self.sockets.mkdir()
        if self.user is not None:
            for path in (self.root, self.sockets):
                os.chown(path, self.user.pw_uid, self.user.pw_gid)
        self._names = itertools.count(1)
        self._started = False

    def _tool(self, tool: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run a server tool, as the unprivileged user when we are root."""
        ids = {} if self.user is None else {
            "user": self.user.pw_uid, "group": self.user.pw_gid, "extra_groups": []}
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C",
               "HOME": str(self.root)}
        return subprocess.run([str(self.bindir / tool), *args], capture_output=True, text=True,
                              check=check, cwd=self.root, env=env, **ids)

    def init(self) -> None:
        self._tool("initdb", "-D", str(self.data), "-U", SUPERUSER, "--auth=trust",
                   "--encoding=UTF8", "--locale=C", "--no-sync")

    def start(self) -> None:
        """Start on this server's port. The first start moves to another port if this one was
        taken meanwhile; a restart never does (clients hold the address), it retries."""
        if self._started:
            self._restart_on_same_port()
            return
        for _ in range(3):
            done = self._pg_ctl_start()
            if done.returncode == 0:
                self._started = True
                return
            self.port = free_port()
        raise PgUnavailable(f"PostgreSQL did not start: {done.stderr}\n{self._log_tail()}")

    def _pg_ctl_start(self, wait_s: int = 60) -> subprocess.CompletedProcess[str]:
        options = (f"-c listen_addresses=127.0.0.1 -c port={self.port} "
                   f"-c unix_socket_directories={self.sockets} -c fsync=on "
                   "-c synchronous_commit=on -c max_connections=300 "
                   "-c shared_buffers=16MB -c log_min_messages=warning"
                   + self._crash_recovery_option())
        return self._tool("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w",
                          "-t", str(wait_s), "-o", options, "start", check=False)

    def _restart_on_same_port(self) -> None:
        # crash recovery on a loaded machine can take minutes; a bind that failed is retried
        for _ in range(5):
            done = self._pg_ctl_start(wait_s=180)
            if done.returncode == 0:
                return
            time.sleep(1.0)
        raise PgUnavailable(f"PostgreSQL did not restart on port {self.port}: {done.stderr}\n"
                            f"{self._log_tail()}")

    def version(self) -> int:
        """The server's major version (``postgres -V`` says e.g. ``postgres (PostgreSQL) 15.4``)."""
        out = subprocess.run([str(self.bindir / "postgres"), "-V"], capture_output=True,
                             text=True, check=True).stdout
        return int(out.split()[-1].split(".")[0])

    def _crash_recovery_option(self) -> str:
        """After a crash the server first fsyncs every file of the cluster, one by one, which
        with a few dozen test databases takes tens of seconds; from version 14 one ``syncfs``
        of the file system does the same."""
        return " -c recovery_init_sync_method=syncfs" if self.version() >= 14 else ""

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (``immediate`` is a crash: no checkpoint, recovery at next start)."""
        self._tool("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop", check=False)

    def restart(self) -> None:
        self.stop()
        self.start()

    def remove(self) -> None:
        """Stop the server and delete its directory in the background (unlinking a few
        thousand files of test databases takes seconds that no test needs to wait for)."""
        self.stop("immediate")
        subprocess.Popen(["rm", "-rf", "--", str(self.root)], start_new_session=True,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def _log_tail(self) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-20:])
        return ""

    def url(self, dbname: str = "postgres") -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{dbname}"

    def execute(self, sql: str, dbname: str = "postgres") -> None:
        """One statement in autocommit (CREATE/DROP DATABASE cannot run in a transaction)."""
        with psycopg.connect(self.url(dbname), autocommit=True) as conn:
            conn.execute(sql)

    def create_database(self, template: str | None = None) -> str:
        """A new database (a copy of ``template`` if given); returns its name."""
        name = f"t{os.getpid()}_{next(self._names)}"
        clause = f" TEMPLATE {template}" if template else ""
        self.execute(f"CREATE DATABASE {name}{clause}")
        return name

    def drop_database(self, name: str) -> None:
        with contextlib.suppress(psycopg.Error):
            self.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def started_server() -> PgServer:
    server = PgServer()
    try:
        server.init()
        server.start()
    except BaseException:
        shutil.rmtree(server.root, ignore_errors=True)
        raise
    return server


# --- fixtures --------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    if os.environ.get(ENABLE_ENV, "").strip() == "0":
        pytest.skip(f"PostgreSQL tests disabled ({ENABLE_ENV}=0)")
    server = started_server()
    yield server
    server.remove()


@pytest.fixture(scope="session")
def pg_template(pg_server: PgServer) -> str:
    """A migrated database every test database copies (migrations run once per session)."""
    pg_server.execute(f"CREATE DATABASE {TEMPLATE}")
    migrate(pg_server.url(TEMPLATE))
    return TEMPLATE


class ResettableDatabase:
    """A migrated database that :meth:`reset` returns to its state right after migrating."""

    def __init__(self, url: str) -> None:
        self.url = url
        with psycopg.connect(url, autocommit=True) as conn:
            self.tables = [r[0] for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public' "
                "AND tablename <> 'schema_version' ORDER BY tablename")]
            self.seed = {table: conn.execute(f"SELECT * FROM {table}").fetchall()
                         for table in self.tables}
            self.sequences = [r[0] for r in conn.execute(
                "SELECT sequencename FROM pg_sequences WHERE schemaname = 'public'")]

    def reset(self) -> None:
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                         "WHERE datname = current_database() AND pid <> pg_backend_pid()")
            with conn.transaction():
                # no foreign-key triggers while emptying: any table order will do
                conn.execute("SET LOCAL session_replication_role = replica")
                for table in self.tables:
                    conn.execute(f"DELETE FROM {table}")
                for table, rows in self.seed.items():
                    if rows:
                        marks = ", ".join(["%s"] * len(rows[0]))
                        conn.cursor().executemany(f"INSERT INTO {table} VALUES ({marks})", rows)
                for sequence in self.sequences:
                    conn.execute("SELECT setval(%s, 1, false)", (sequence,))


@pytest.fixture(scope="session")
def pg_worker_database(pg_server: PgServer, pg_template: str) -> ResettableDatabase:
    return ResettableDatabase(pg_server.url(pg_server.create_database(template=pg_template)))


@pytest.fixture
def pg_url(pg_worker_database: ResettableDatabase) -> str:
    """The worker's migrated database, as the migrations left it, for one test."""
    pg_worker_database.reset()
    return pg_worker_database.url


@pytest.fixture
def pg_fresh_url(pg_server: PgServer, pg_template: str) -> str:
    """A new migrated database of the test's own."""
    return pg_server.url(pg_server.create_database(template=pg_template))


@pytest.fixture(scope="module")
def pg_module_url(pg_server: PgServer, pg_template: str) -> str:
    """A new migrated database for one test module (a server process its tests share)."""
    return pg_server.url(pg_server.create_database(template=pg_template))


@pytest.fixture
def own_pg_server() -> Iterator[PgServer]:
    """A server of the test's own, with a migrated database ``fairshoe``, for tests that stop,
    crash or restart it: a shared one holding dozens of test databases would need tens of
    seconds to fsync them all at its shutdown checkpoint or crash recovery (~2 s to start)."""
    if os.environ.get(ENABLE_ENV, "").strip() == "0":
        pytest.skip(f"PostgreSQL tests disabled ({ENABLE_ENV}=0)")
    server = started_server()
    try:
        server.execute("CREATE DATABASE fairshoe")
        migrate(server.url("fairshoe"))
        yield server
    finally:
        server.remove()


@pytest.fixture
def pg_empty_url(pg_server: PgServer) -> str:
    """A fresh empty database (no schema) for one test."""
    return pg_server.url(pg_server.create_database())
