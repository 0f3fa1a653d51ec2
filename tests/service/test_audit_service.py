"""The audit use cases: signing keys with validity, one round's record, a shoe's reveal only once
it is finished, and the export by time range (paged) to a collection the offline audit passes;
on SQLite and PostgreSQL (the ``storage`` fixture)."""

from __future__ import annotations

import json
import secrets
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from support.record_helpers import OP, Dealer, payload

from rng_service.audit.verifier import audit_paths
from rng_service.core.errors import IllegalState, InvalidInput, NotFound
from rng_service.crypto.keys import KeyStore, load_trusted_public_keys
from rng_service.records.schema import (
    KEYS_FILE,
    RNG_REVEALS_SUBDIR,
    RNG_SUBDIR,
    ROUNDS_SUBDIR,
    RULES_SUBDIR,
)
from rng_service.rng.seed_vault import SeedVault
from rng_service.service.audit import AuditService, time_range
from rng_service.service.ports import EnvelopeKind, Mode, Storage
from rng_service.service.rng_draws import RngDrawService


@pytest.fixture
def keys(tmp_path: Path) -> KeyStore:
    store = KeyStore(tmp_path / "keys")
    store.create()
    return store


@pytest.fixture
def dealer(storage: Storage, keys: KeyStore) -> Dealer:
    return Dealer(storage, keys.load_signing_key(), SeedVault(secrets.token_bytes(32)))


@pytest.fixture
def audit(storage: Storage, keys: KeyStore) -> AuditService:
    return AuditService(storage, keys)


def test_signing_keys_carry_their_validity(keys: KeyStore, audit: AuditService) -> None:
    first = keys.active_key_id()
    keys.rotate()
    found = audit.signing_keys()
    assert [k.key_id for k in found.keys] == [first, keys.active_key_id()]
    old, new = found.keys
    assert old.valid_until is not None and new.valid_until is None
    assert old.valid_from <= old.valid_until <= new.valid_from + timedelta(seconds=1)
    assert old.jwk["valid_until"] == stamp_seconds(old.valid_until)
    jwks = json.loads(found.jwks_json)
    assert {k["kid"] for k in jwks["keys"]} == {first, keys.active_key_id()}
    assert all("valid_from" in k for k in jwks["keys"])


def stamp_seconds(when: datetime) -> str:
    return when.isoformat().replace("+00:00", "Z")


def test_keys_export_with_validity_is_still_a_trusted_key_file(keys: KeyStore, tmp_path: Path,
                                                               audit: AuditService) -> None:
    keys.rotate()
    path = tmp_path / "trusted.jwks.json"
    path.write_text(audit.signing_keys().jwks_json)
    assert set(load_trusted_public_keys(path)) == {k.key_id for k in keys.list_keys()}


def test_round_record_of_a_finished_round(dealer: Dealer, audit: AuditService) -> None:
    view = dealer.play("double-deck")
    record = audit.round_record(OP, view.round_id)
    assert record.schema == "fairshoe.round/v1"
    assert record.key_id == dealer.signer.key_id
    assert payload(record.envelope)["round_id"] == view.round_id


def test_round_record_of_unknown_open_or_malformed_rounds(dealer: Dealer,
                                                          audit: AuditService) -> None:
    with pytest.raises(NotFound, match="no such round") as err:
        audit.round_record(OP, "0" * 32)
    assert err.value.field == "round_id"
    view = dealer.start("double-deck")
    if view.status == "awaiting":  # a blackjack may settle at once
        with pytest.raises(NotFound, match="still open"):
            audit.round_record(OP, view.round_id)
    with pytest.raises(InvalidInput) as bad:
        audit.round_record(OP, "../etc")
    assert bad.value.field == "round_id"
    with pytest.raises(NotFound):
        audit.round_record("nobody", "0" * 32)


def test_shoe_reveal_only_once_the_shoe_is_finished(dealer: Dealer,
                                                    audit: AuditService) -> None:
    shoe = dealer.rounds.get_next_shoe(OP, dealer.player, "double-exposure", mode=Mode.REAL)
    with pytest.raises(IllegalState) as err:
        audit.shoe_reveal(OP, shoe.shoe_id)
    assert err.value.reason == "SHOE_NOT_FINISHED"
    views = dealer.play_until_shoe_finished("double-exposure")
    assert views[0].shoe.shoe_id == shoe.shoe_id
    reveal = audit.shoe_reveal(OP, shoe.shoe_id)
    assert reveal.schema == "fairshoe.shoe-reveal/v1"
    assert payload(reveal.envelope)["commitment"] == shoe.commitment
    with pytest.raises(NotFound) as unknown:
        audit.shoe_reveal(OP, "f" * 32)
    assert unknown.value.field == "shoe_id"
    with pytest.raises(InvalidInput):
        audit.shoe_reveal(OP, "not-a-shoe")


def test_export_lists_everything_oldest_first_in_any_batch_size(
        dealer: Dealer, storage: Storage, audit: AuditService) -> None:
    views = [dealer.play("snap"), dealer.play("double-deck")]
    draws = RngDrawService(storage, signer=dealer.signer)
    drawn = draws.shuffle(OP, n=5, request_id="d-1")
    whole = list(audit.export(OP))
    assert [e.kind for e in whole] == [EnvelopeKind.ROUND, EnvelopeKind.SHOE_REVEAL] * 2 + [
        EnvelopeKind.RNG, EnvelopeKind.RNG_REVEAL]
    assert [e.ident for e in whole[::2]] == [views[0].round_id, views[1].round_id,
                                             drawn.draw_id]
    assert [e.created_at for e in whole] == sorted(e.created_at for e in whole)
    for size in (1, 2, 3):
        assert list(audit.export(OP, batch_size=size)) == whole


def test_export_by_time_range(dealer: Dealer, audit: AuditService) -> None:
    dealer.play("snap")
    middle = datetime.now(UTC)
    later = dealer.play("double-deck")
    after = list(audit.export(OP, start=middle))
    before = list(audit.export(OP, end=middle))
    assert [e.ident for e in after if e.kind is EnvelopeKind.ROUND] == [later.round_id]
    assert len(before) + len(after) == len(list(audit.export(OP))) == 4
    assert list(audit.export(OP, start=datetime.now(UTC) - timedelta(days=3650),
                             end=datetime.now(UTC) + timedelta(days=1))) == before + after


@pytest.mark.parametrize(("start", "end"), [
    (datetime(2024, 1, 2, tzinfo=UTC), datetime(2024, 1, 1, tzinfo=UTC)),
    (datetime(2024, 1, 1, tzinfo=UTC), datetime(2024, 1, 1, tzinfo=UTC)),
    (datetime.now(UTC) + timedelta(days=1), None),  # the end is capped at now
])
def test_an_empty_time_range_is_invalid(audit: AuditService, start: datetime,
                                        end: datetime | None) -> None:
    with pytest.raises(InvalidInput) as err:
        audit.export(OP, start, end)
    assert err.value.field == "end_time"


def test_time_range_text_sorts_like_the_stored_times() -> None:
    lo, hi = time_range(datetime(1, 1, 1, tzinfo=UTC), datetime(2024, 5, 1, 12, tzinfo=UTC))
    assert (lo, hi) == ("1970-01-01T00:00:00.000000Z", "2024-05-01T12:00:00.000000Z")
    with pytest.raises(InvalidInput) as err:
        time_range(datetime(2024, 1, 1), None)  # a naive time is refused
    assert err.value.field == "start_time"


def test_export_collection_passes_the_offline_audit(dealer: Dealer, storage: Storage,
                                                    audit: AuditService, keys: KeyStore,
                                                    tmp_path: Path) -> None:
    dealer.play_every_game()
    RngDrawService(storage, signer=dealer.signer).generate_integers(
        OP, count=10, minimum=1, maximum=6, request_id="d-1")
    out = tmp_path / "collection"
    stats = audit.export_collection(out, OP)
    assert stats.counts[EnvelopeKind.RNG] == stats.counts[EnvelopeKind.RNG_REVEAL] == 1
    assert len(stats.rule_sets) == 4 == len(list((out / RULES_SUBDIR).iterdir()))
    assert (out / KEYS_FILE).is_file() and (out / RNG_SUBDIR).is_dir()
    report = audit_paths([out], {dealer.signer.key_id: dealer.signer.public_key})
    assert report.passed, [f.line() for f in report.findings if f.status.value != "OK"]
    assert report.count("round") == stats.counts[EnvelopeKind.ROUND]
    assert report.count("rng") == 1 and report.count("rng-reveal") == 1
    with pytest.raises(InvalidInput) as err:  # never into a directory that holds something
        audit.export_collection(out, OP)
    assert err.value.field == "out"
    assert not (out / ROUNDS_SUBDIR / "x").exists() and (out / RNG_REVEALS_SUBDIR).is_dir()
