"""Certified draws: values in range, reproducible from the revealed seed, record and reveal signed
and stored in one row, idempotent, bounded; the offline audit passes them and catches tampering."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.record_helpers import OP, payload
from support.service_helpers import run_sql

from rng_service.audit.verifier import audit_paths
from rng_service.core.errors import InvalidInput, NotFound
from rng_service.crypto.keys import SigningKey
from rng_service.crypto.signing import decode_envelope, sign_and_encode, verify_envelope
from rng_service.records.schema import RNG_REVEALS_SUBDIR, RNG_SUBDIR, write_file
from rng_service.rng.draws import MAX_ABS_VALUE, DrawRequest, draw, rng_commitment
from rng_service.service.ports import Storage
from rng_service.service.rng_draws import Draw, RngDrawService


@pytest.fixture
def signer() -> SigningKey:
    return SigningKey.generate()


@pytest.fixture
def draws(storage: Storage, signer: SigningKey) -> RngDrawService:
    return RngDrawService(storage, signer=signer)


def trusted(signer: SigningKey) -> dict[str, Any]:
    return {signer.key_id: signer.public_key}


def test_integers_are_in_range_and_recomputed_from_the_revealed_seed(
        draws: RngDrawService, signer: SigningKey) -> None:
    result = draws.generate_integers(OP, count=200, minimum=-5, maximum=5, client_seed=b"me",
                                     request_id="r-1")
    assert len(result.results) == 200 and all(-5 <= v <= 5 for v in result.results)
    record = verify_envelope(decode_envelope(result.record), trusted(signer),
                             schema="fairshoe.rng/v1")
    reveal = verify_envelope(decode_envelope(result.reveal), trusted(signer),
                             schema="fairshoe.rng-reveal/v1")
    assert record["parameters"] == {"count": 200, "min": -5, "max": 5}
    assert record["client_seed"] == b"me".hex()
    assert record["commitment"] == reveal["commitment"] == result.commitment
    seed = bytes.fromhex(reveal["seed"])
    assert rng_commitment(seed) == result.commitment
    assert draw(seed, DrawRequest.integers(200, -5, 5), b"me") == list(result.results)
    assert reveal["seed"] not in result.record.decode()  # the record never holds the seed


def test_shuffle_is_a_permutation_recomputed_from_the_seed(draws: RngDrawService) -> None:
    result = draws.shuffle(OP, n=52, request_id="r-1")
    assert sorted(result.results) == list(range(52))
    seed = bytes.fromhex(payload(result.reveal)["seed"])
    assert draw(seed, DrawRequest.shuffle(52)) == list(result.results)


def test_each_draw_has_a_fresh_seed(draws: RngDrawService) -> None:
    one = draws.generate_integers(OP, count=4, minimum=0, maximum=2**40, request_id="a")
    two = draws.generate_integers(OP, count=4, minimum=0, maximum=2**40, request_id="b")
    assert one.commitment != two.commitment and one.results != two.results


def test_record_and_reveal_are_stored_together(draws: RngDrawService, database_url: str
                                                ) -> None:
    result = draws.shuffle(OP, n=3, request_id="r-1")
    rows = run_sql(database_url, "SELECT draw_id, kind, commitment, record, reveal FROM rng_draws")
    assert rows == [(result.draw_id, "shuffle", result.commitment, result.record, result.reveal)]


def test_a_retry_returns_the_first_draw(draws: RngDrawService) -> None:
    first = draws.generate_integers(OP, count=3, minimum=1, maximum=6, request_id="same")
    again = draws.generate_integers(OP, count=3, minimum=1, maximum=6, request_id="same")
    assert again == first
    with pytest.raises(InvalidInput) as err:
        draws.generate_integers(OP, count=4, minimum=1, maximum=6, request_id="same")
    assert err.value.field == "request_id"


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"count": 0}, "count"), ({"count": 10_001}, "count"), ({"count": True}, "count"),
    ({"minimum": 7}, "max"), ({"maximum": MAX_ABS_VALUE + 1}, "max"),
    ({"minimum": -MAX_ABS_VALUE - 1}, "min"), ({"client_seed": b"x" * 257}, "client_seed"),
    ({"client_seed": "text"}, "client_seed"), ({"request_id": ""}, "request_id"),
])
def test_bad_integer_requests_name_the_field(draws: RngDrawService, kwargs: dict[str, Any],
                                             field: str) -> None:
    args: dict[str, Any] = {"count": 1, "minimum": 1, "maximum": 6, "request_id": "r",
                            **kwargs}
    with pytest.raises(InvalidInput) as err:
        draws.generate_integers(OP, **args)
    assert err.value.field == field


@pytest.mark.parametrize("n", [0, 10_001, -1])
def test_bad_shuffle_sizes(draws: RngDrawService, n: int) -> None:
    with pytest.raises(InvalidInput) as err:
        draws.shuffle(OP, n=n, request_id="r")
    assert err.value.field == "n"


def test_unknown_operator(draws: RngDrawService) -> None:
    with pytest.raises(NotFound):
        draws.shuffle("nobody", n=3, request_id="r")


def collection(out: Path, results: list[Draw]) -> Path:
    for sub in (RNG_SUBDIR, RNG_REVEALS_SUBDIR):
        (out / sub).mkdir(parents=True, exist_ok=True)
    for result in results:
        write_file(out / RNG_SUBDIR / f"{result.draw_id}.json", result.record)
        write_file(out / RNG_REVEALS_SUBDIR / f"{result.draw_id}.json", result.reveal)
    return out


def statuses(out: Path, signer: SigningKey) -> dict[tuple[str, str], str]:
    report = audit_paths([out], trusted(signer))
    return {(f.kind, f.field or ""): f.status.value for f in report.findings}


def test_draws_pass_the_offline_audit(draws: RngDrawService, signer: SigningKey,
                                      tmp_path: Path) -> None:
    out = collection(tmp_path / "c", [
        draws.generate_integers(OP, count=50, minimum=1, maximum=49, client_seed=b"c",
                                request_id="a"),
        draws.shuffle(OP, n=300, request_id="b")])
    report = audit_paths([out], trusted(signer))
    assert report.passed, [f.line() for f in report.findings]
    assert report.count("rng") == 2 and report.count("rng-reveal") == 2


def _resign(data: bytes, signer: SigningKey, change: dict[str, Any]) -> bytes:
    body = decode_envelope(data)["payload"]
    body.update(change)
    return sign_and_encode(body, signer)


def test_tampering_fails(draws: RngDrawService, signer: SigningKey, tmp_path: Path) -> None:
    result = draws.generate_integers(OP, count=5, minimum=1, maximum=1000, request_id="a")
    out = collection(tmp_path / "c", [result])
    path = out / RNG_SUBDIR / f"{result.draw_id}.json"
    values = list(result.results)

    # an unsigned edit: the signature fails
    path.write_bytes(result.record.replace(f"[{values[0]},".encode(),
                                           f"[{values[0] % 1000 + 1},".encode(), 1))
    assert statuses(out, signer)[("rng", "signature.value")] == "FAIL"
    # an edit re-signed with the genuine key: the recomputed results fail, naming the index
    path.write_bytes(_resign(result.record, signer, {"results": [*values[:2], 0, *values[3:]]}))
    assert statuses(out, signer)[("rng", "results[2]")] == "FAIL"
    # a different client seed claimed: the values no longer follow from the seed
    path.write_bytes(_resign(result.record, signer, {"client_seed": "ff"}))
    assert statuses(out, signer)[("rng", "results[0]")] == "FAIL"
    # a reveal whose seed does not open the commitment
    path.write_bytes(result.record)
    reveal = out / RNG_REVEALS_SUBDIR / f"{result.draw_id}.json"
    reveal.write_bytes(_resign(result.reveal, signer, {"seed": "00" * 48}))
    found = statuses(out, signer)
    assert found[("rng-reveal", "seed")] == "FAIL" and found[("rng", "draw_id")] == "FAIL"
    # no reveal at all: unrevealed, which does not pass
    reveal.unlink()
    assert statuses(out, signer)[("rng", "draw_id")] == "UNREVEALED"
    assert not audit_paths([out], trusted(signer)).passed


def test_a_draw_record_lists_its_public_facts_only(draws: RngDrawService) -> None:
    result = draws.shuffle(OP, n=4, client_seed=b"\x00\x01", request_id="a")
    record = payload(result.record)
    assert set(record) == {"schema", "draw_id", "kind", "parameters", "client_seed", "commitment",
                           "results", "drawn_at", "service_version"}
    assert set(json.loads(result.reveal)["payload"]) == {"schema", "draw_id", "commitment",
                                                         "seed"}
