"""What the tiles port serves for the player's verifier (rng_service/api/verifier_site.py), no
HTTP: which operators' rounds may be looked up by id (--tiles-rounds, implied by
--tiles-entries), the page's files at one segment under the log root (never an operator's
prefix, which ends in a slash), and nothing asked of the service for what is not published."""

from __future__ import annotations

from http import HTTPStatus

import pytest

from rng_service.api.tiles_http import TilesPublication, TilesSite
from rng_service.api.verifier_site import CSP, FILES
from rng_service.service.audit import AuditService


class _Unreachable:
    """An AuditService that must not be asked."""

    def __getattr__(self, name: str) -> object:
        raise AssertionError(f"AuditService.{name} was asked")


def _site(publication: TilesPublication, base: str = "fairshoe.example/log") -> TilesSite:
    audit: AuditService = _Unreachable()  # type: ignore[assignment]
    return TilesSite(audit, publication, base_origin=base)


def test_rounds_by_id_are_published_only_where_named_or_with_the_entries() -> None:
    publication = TilesPublication.parse("op-a", "op-b", "op-c")
    assert publication.logs == {"op-a", "op-b", "op-c"}  # rounds by id publish the log too
    assert publication.rounds == {"op-b", "op-c"}  # entries public: every round is
    assert publication.describe()["rounds"] == ["op-b", "op-c"]
    assert TilesPublication(frozenset({"x"}), frozenset({"x"})).rounds == {"x"}
    reply = _site(publication).get(f"/log/op-a/round/{'a' * 32}")
    assert reply.status == HTTPStatus.FORBIDDEN and b"--tiles-rounds" in reply.body
    assert _site(publication).get(f"/log/op-z/round/{'a' * 32}").status == HTTPStatus.NOT_FOUND


@pytest.mark.parametrize("base", ["fairshoe.example/log", "logs.example"])
def test_the_page_is_one_segment_under_the_log_root(base: str) -> None:
    site = _site(TilesPublication.parse("verify", ""), base)
    root = site.prefix("x")[: -len("x/")]
    for segment in FILES:
        reply = site.get(root + segment + "?log=op-a")
        assert reply.status == HTTPStatus.OK and reply.body
        assert ("Content-Security-Policy", CSP) in reply.headers
    assert site.get(root + "verify").content_type.startswith("text/html")
    assert site.get(root + "verify-core.js").content_type.startswith("text/javascript")
    for other in ("verify.py", "..", "verify-core.js.map", "%2e%2e"):
        assert site.get(root + other).status == HTTPStatus.NOT_FOUND
