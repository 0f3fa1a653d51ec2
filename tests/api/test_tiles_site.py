"""TilesSite's answers when what is behind it fails (rng_service/api/tiles_http.py): a database
that does not answer is 503, retryable and never cached; a log whose stored rows fail their check
is 500 with its message, logged; neither is a 404 a cache could keep for a tile that exists."""

from __future__ import annotations

from http import HTTPStatus

import pytest

from rng_service.api.tiles_http import NO_STORE, TilesPublication, TilesSite
from rng_service.core.errors import FairshoeError, IntegrityFailure, Unavailable
from rng_service.log import TileRef
from rng_service.service.audit import AuditService


class _Failing:
    """An AuditService whose reads raise ``error``."""

    def __init__(self, error: FairshoeError) -> None:
        self.error = error

    def checkpoint(self, operator: str) -> object:
        raise self.error

    def log_tile(self, operator: str, tile: TileRef) -> bytes:
        raise self.error


def _site(error: FairshoeError, base_origin: str = "fairshoe.example/log") -> TilesSite:
    audit: AuditService = _Failing(error)  # type: ignore[assignment]
    return TilesSite(audit, TilesPublication.parse("op-a", ""), base_origin=base_origin)


@pytest.mark.parametrize("path", ["/log/op-a/checkpoint", "/log/op-a/tile/0/000"])
def test_a_database_that_does_not_answer_is_503(path: str) -> None:
    reply = _site(Unavailable("the database is not answering",
                              reason="DATABASE_UNAVAILABLE")).get(path)
    assert (reply.status, reply.cache) == (HTTPStatus.SERVICE_UNAVAILABLE, NO_STORE)


def test_a_log_that_fails_its_check_is_500() -> None:
    reply = _site(IntegrityFailure("leaf 3 is missing", reason="LOG_LEAF")).get(
        "/log/op-a/tile/0/000")
    assert (reply.status, reply.cache) == (HTTPStatus.INTERNAL_SERVER_ERROR, NO_STORE)
    assert b"leaf 3 is missing" in reply.body


def test_the_prefix_is_the_origins_path() -> None:
    assert _site(Unavailable("x")).prefix("op-a") == "/log/op-a/"
    assert _site(Unavailable("x"), "logs.example").prefix("op-a") == "/op-a/"
