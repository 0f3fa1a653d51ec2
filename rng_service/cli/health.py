"""`fairshoe health`: one gRPC health check, for a container's HEALTHCHECK or a probe script.

Exit status: 0 only when the server answers SERVING; 1 when it answers anything else
(NOT_SERVING, UNKNOWN, SERVICE_UNKNOWN, or NOT_FOUND for a service it does not know); 2 when it
cannot be asked (unreachable, TLS handshake refused, deadline passed) or the command line is
wrong, with one line on stderr. The status name is printed on stdout when the server reports one.

The default address follows ``FAIRSHOE_HEALTH_ADDRESS``, else ``FAIRSHOE_ADDRESS`` with a
wildcard host (``0.0.0.0``, ``[::]``) read as loopback, so a container's check follows the port
``serve`` listens on. TLS is used when a CA is given (``--tls-ca`` or ``FAIRSHOE_TLS_CA``) or with
``--tls``. A server under mutual TLS asks every connection for a client certificate, health checks
included: ``--tls-cert``/``--tls-key`` (or ``FAIRSHOE_CLIENT_TLS_CERT``/``_KEY``) present one; any
certificate the server's client CA signed will do (health is no operator's).
"""

from __future__ import annotations

import argparse
import os
import sys

# hosts that `serve` listens on but a client cannot connect to: the check asks loopback instead
_WILDCARD_HOSTS = ("0.0.0.0", "[::]", "::", "")


def default_address(environ: os._Environ[str] | dict[str, str] = os.environ) -> str:
    """``FAIRSHOE_HEALTH_ADDRESS``, else ``FAIRSHOE_ADDRESS`` with a wildcard host made loopback.

    >>> default_address({"FAIRSHOE_ADDRESS": "0.0.0.0:6000"})
    '127.0.0.1:6000'
    >>> default_address({"FAIRSHOE_ADDRESS": "[::]:6000"})
    '127.0.0.1:6000'
    >>> default_address({"FAIRSHOE_HEALTH_ADDRESS": "db:1", "FAIRSHOE_ADDRESS": "0.0.0.0:2"})
    'db:1'
    >>> default_address({})
    '127.0.0.1:50051'
    """
    explicit = environ.get("FAIRSHOE_HEALTH_ADDRESS")
    if explicit:
        return explicit
    host, sep, port = environ.get("FAIRSHOE_ADDRESS", "127.0.0.1:50051").rpartition(":")
    if not sep:
        return "127.0.0.1:50051"
    if host in _WILDCARD_HOSTS:
        host = "127.0.0.1"
    return f"{host}:{port}"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``fairshoe health``; its argument errors too are one line on stderr, exit 2."""
    health = subparsers.add_parser(
        "health", help="ask a running server's gRPC health service (exit 0 only if SERVING)",
        description="One grpc.health.v1 Check: exit 0 when the answer is SERVING, 1 for any "
                    "other answer (including an unknown service), 2 when the server cannot be "
                    "asked or the arguments are wrong.")
    health.add_argument("--address", default=default_address(),
                        help="host:port of the server (default %(default)s: "
                             "$FAIRSHOE_HEALTH_ADDRESS, else $FAIRSHOE_ADDRESS with a wildcard "
                             "host read as 127.0.0.1)")
    health.add_argument("--service", default="",
                        help="the service to ask about (default: the server as a whole)")
    health.add_argument("--tls", action="store_true",
                        help="connect with TLS, trusting the system's CAs (implied by --tls-ca)")
    health.add_argument("--tls-ca", default=os.environ.get("FAIRSHOE_TLS_CA") or None,
                        help="PEM CA certificate to trust (default $FAIRSHOE_TLS_CA)")
    health.add_argument("--tls-cert", default=os.environ.get("FAIRSHOE_CLIENT_TLS_CERT") or None,
                        help="PEM client certificate, for a server under mutual TLS (default "
                             "$FAIRSHOE_CLIENT_TLS_CERT)")
    health.add_argument("--tls-key", default=os.environ.get("FAIRSHOE_CLIENT_TLS_KEY") or None,
                        help="the client certificate's PEM key (default "
                             "$FAIRSHOE_CLIENT_TLS_KEY)")
    health.add_argument("--tls-server-name",
                        default=os.environ.get("FAIRSHOE_TLS_SERVER_NAME") or None,
                        help="the name the server's certificate must carry when it is not the "
                             "address's host (default $FAIRSHOE_TLS_SERVER_NAME)")
    health.add_argument("--timeout", type=float, default=5.0,
                        help="seconds the check may take (default %(default)s)")
    # a probe's log keeps one line per failure: main's Parser reports argument errors so
    health.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Ask once; print the status name; 0 if SERVING, 1 otherwise (errors: CommandError, 2)."""
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    from rng_service.cli.main import CommandError

    if args.timeout <= 0:
        raise CommandError(f"--timeout must be positive, got {args.timeout}")
    if bool(args.tls_cert) != bool(args.tls_key):
        raise CommandError("--tls-cert and --tls-key go together")
    if args.tls or args.tls_ca or args.tls_cert:
        try:
            ca, cert, key = _read(args.tls_ca), _read(args.tls_cert), _read(args.tls_key)
        except OSError as exc:
            raise CommandError(f"cannot read a TLS file: {exc}") from None
        creds = grpc.ssl_channel_credentials(root_certificates=ca, private_key=key,
                                             certificate_chain=cert)
        options = ([("grpc.ssl_target_name_override", args.tls_server_name)]
                   if args.tls_server_name else [])
        channel = grpc.secure_channel(args.address, creds, options=options)
    else:
        channel = grpc.insecure_channel(args.address)
    try:
        reply = health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service=args.service), timeout=args.timeout)
    except grpc.RpcError as err:
        code = err.code() if isinstance(err, grpc.Call) else None
        detail = " ".join(str(err.details() if isinstance(err, grpc.Call) else err).split())
        if code in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.UNIMPLEMENTED):
            # the server answered: it knows no such service, or has no health service at all
            what = f"service {args.service!r}" if args.service else "the health service"
            print(f"fairshoe health: {what} unknown at {args.address} ({code.name})",
                  file=sys.stderr)
            return 1
        name = code.name if code is not None else "error"
        raise CommandError(f"cannot ask {args.address}: {name}: {detail}") from None
    finally:
        channel.close()
    status = health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
    print(status)
    return 0 if reply.status == health_pb2.HealthCheckResponse.SERVING else 1


def _read(path: str | None) -> bytes | None:
    if not path:
        return None
    with open(path, "rb") as file:
        return file.read()
