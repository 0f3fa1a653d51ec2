"""One `fairshoe serve` to a port, when its processes share the port (``serve --processes N``).

The processes of one serve each listen on the same address with ``SO_REUSEPORT``, and the kernel
spreads the connections among them. Linux lets any socket of the same user that also sets
``SO_REUSEPORT`` join such a group (gRPC sets it by default), so the processes alone would not
stop a second server from binding the port and taking a share of the connections. The parent
therefore claims the port before any process listens, and holds the claim until it exits:

1. a **probe** binds every address the server will listen on *without* ``SO_REUSEPORT``: that
   fails if anything listens there already, a server that shares its port included;
2. a **lock file** keyed on the port (``flock``, released by the kernel when the parent dies)
   is taken: a second ``serve --processes N`` that probes in the instant between (1) and (3)
   is refused here;
3. the probe is replaced by a **hold**: a socket bound with ``SO_REUSEPORT`` and without
   ``SO_REUSEADDR`` that never listens (so it receives no connection). Every later bind on the
   port without ``SO_REUSEPORT`` fails against it, a one-process `fairshoe serve` included,
   even while no worker listens (at start-up, or while a dead worker is replaced).

What no claim can refuse: a process of the *same user* that sets ``SO_REUSEPORT`` and binds
*after* the workers listen joins the group (the kernel checks only the flag and the user id).
Another `fairshoe serve` never does (it probes first); an unrelated program of that user that
asks for port sharing would. Run the service under a user of its own.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import tempfile
from dataclasses import dataclass, field
from pathlib import Path


class PortTaken(OSError):
    """The address is in use, or not this host's: its message says which address."""


def split_address(address: str) -> tuple[str, int]:
    """(host, port) of a gRPC ``host:port`` address (``[::1]:50051`` too).

    >>> split_address("127.0.0.1:50051"), split_address("[::]:0"), split_address(":7")
    (('127.0.0.1', 50051), ('::', 0), ('', 7))
    """
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise PortTaken(f"cannot listen on {address}: not a host:port address")
    return host.removeprefix("[").removesuffix("]"), int(port)


@dataclass
class PortClaim:
    """The parent's claim on a port (see the module docstring); :meth:`release` ends it."""

    host: str
    port: int
    _holds: list[socket.socket] = field(default_factory=list, repr=False)
    _lock: int | None = field(default=None, repr=False)

    @classmethod
    def take(cls, address: str) -> PortClaim:
        """Claim ``address`` (port 0: a free port, then :attr:`port`); PortTaken if it is in
        use or not this host's."""
        host, port = split_address(address)
        try:
            targets = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM,
                                         flags=socket.AI_PASSIVE)
        except socket.gaierror as exc:
            raise PortTaken(f"cannot listen on {address}: {exc.strerror}") from None
        claim = cls(host, port)
        try:
            probes = claim._probe(address, [(t[0], (str(t[4][0]),)) for t in targets])
            bound = sorted({(p.family, p.getsockname()[0]) for p in probes})
            claim._lock = _lock_port(claim.port, address)
            for probe in probes:
                probe.close()
            claim._holds = [_bind(family, where, claim.port, address, hold=True)
                            for family, where in bound]
        except BaseException:
            claim.release()
            raise
        return claim

    def _probe(self, address: str, targets: list[tuple[socket.AddressFamily, tuple[str, ...]]]
               ) -> list[socket.socket]:
        probes: list[socket.socket] = []
        try:
            for family, where in targets:
                probe = _bind(family, where[0], self.port, address, hold=False)
                probes.append(probe)
                self.port = probe.getsockname()[1]  # port 0: the others take the same one
        except BaseException:
            for probe in probes:
                probe.close()
            raise
        return probes

    @property
    def address(self) -> str:
        """The claimed address with its port (the one picked when the request said 0)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    def release(self) -> None:
        """Close the holds and drop the lock (at the parent's exit)."""
        for hold in self._holds:
            hold.close()
        self._holds = []
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None


def _bind(family: socket.AddressFamily, host: str, port: int, address: str, *, hold: bool
          ) -> socket.socket:
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        if family == socket.AF_INET6:  # "[::]" listens on IPv4 too, as gRPC's socket does
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        if hold:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        else:  # sockets left in TIME_WAIT by an earlier server do not hold the port
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise PortTaken(f"cannot listen on {address}: the port is in use (another server?) or "
                        f"the address is not this host's ({exc.strerror or exc})") from None
    return sock


def lock_path(port: int) -> Path:
    """The lock file of ``port`` (in the temporary directory, shared by the host's users)."""
    return Path(tempfile.gettempdir()) / f"fairshoe-serve-port-{port}.lock"


def _lock_port(port: int, address: str) -> int:
    path = lock_path(port)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise PortTaken(f"cannot listen on {address}: cannot open its lock file {path} "
                        f"({exc.strerror or exc})") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        with contextlib.suppress(OSError):
            os.close(fd)
        raise PortTaken(f"cannot listen on {address}: the port is in use (another fairshoe "
                        f"serve holds {path})") from None
    return fd
