"""SetClientSeed's request id under attack (RoundService.set_client_seed, through
idempotency.run): concurrent duplicates of one id set one seed and answer alike, the id of
another kind of request is refused either way round, a refused call stores nothing, and ids are
per operator."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from support.service_helpers import EUR, OP, Harness

from game_math.round import HandBet
from rng_service.core.errors import InvalidInput
from rng_service.service.operators import add_operator
from rng_service.service.ports import Mode

GAME = "double-exposure"


def _seed(h: Harness, player: str, seed: bytes, rid: str, operator: str = OP) -> Any:
    return h.rounds.set_client_seed(operator, player, GAME, seed, mode=Mode.REAL,
                                    request_id=rid)


def _race(calls: list[Any]) -> list[Any]:
    barrier = threading.Barrier(len(calls))

    def run(call: Any) -> Any:
        barrier.wait()
        try:
            return call()
        except InvalidInput as exc:
            return exc

    with ThreadPoolExecutor(len(calls)) as pool:
        return list(pool.map(run, calls))


def test_concurrent_exact_duplicates_answer_alike(harness: Harness) -> None:
    h = harness
    h.deposit("dup", 10_000)
    shoe = h.rounds.get_next_shoe(OP, "dup", GAME, mode=Mode.REAL)
    rid = h.rid()
    answers = _race([lambda: _seed(h, "dup", b"same", rid)] * 8)
    assert all(a == answers[0] for a in answers), answers
    assert answers[0].client_seed == b"same".hex() and answers[0].shoe_id == shoe.shoe_id


def test_concurrent_duplicates_with_other_seeds_set_exactly_one(harness: Harness) -> None:
    h = harness
    h.deposit("dup2", 10_000)
    h.rounds.get_next_shoe(OP, "dup2", GAME, mode=Mode.REAL)
    rid = h.rid()
    seeds = [b"seed-%d" % i for i in range(8)]
    answers = _race([lambda s=s: _seed(h, "dup2", s, rid) for s in seeds])
    won = [a for a in answers if not isinstance(a, InvalidInput)]
    assert len(won) == 1, answers
    assert all(a.field == "request_id" for a in answers if isinstance(a, InvalidInput))
    now = h.rounds.get_next_shoe(OP, "dup2", GAME, mode=Mode.REAL)
    assert now.client_seed == won[0].client_seed


def test_a_request_id_is_one_kind_of_request_either_way_round(harness: Harness) -> None:
    h = harness
    h.deposit("kind", 10_000)
    h.rounds.get_next_shoe(OP, "kind", GAME, mode=Mode.REAL)
    seed_rid, deposit_rid, round_rid = h.rid(), h.rid(), h.rid()
    _seed(h, "kind", b"mine", seed_rid)
    with pytest.raises(InvalidInput) as err:  # the seed's id for a deposit
        h.wallet.deposit(OP, "kind", EUR, 5, request_id=seed_rid)
    assert err.value.field == "request_id"
    with pytest.raises(InvalidInput) as err:  # ... and for a round
        h.rounds.start_round(OP, "kind", GAME, mode=Mode.REAL, currency=EUR,
                             hands=[HandBet(1000)], request_id=seed_rid)
    assert err.value.field == "request_id"
    assert h.balance("kind") == 10_000  # neither refused request moved money
    h.wallet.deposit(OP, "kind", EUR, 5, request_id=deposit_rid)
    with pytest.raises(InvalidInput) as err:  # a deposit's id for a seed
        _seed(h, "kind", b"mine", deposit_rid)
    assert err.value.field == "request_id"
    view = h.rounds.start_round(OP, "kind", GAME, mode=Mode.REAL, currency=EUR,
                                hands=[HandBet(1000)], request_id=round_rid)
    with pytest.raises(InvalidInput) as err:  # a round's id for a seed
        _seed(h, "kind", b"mine", round_rid)
    assert err.value.field == "request_id"
    assert view.shoe.client_seed == b"mine".hex()


def test_a_refused_seed_stores_nothing_and_ids_are_per_operator(harness: Harness) -> None:
    h = harness
    add_operator(h.storage, "op-b")
    h.deposit("late", 10_000)
    rid = h.rid()
    with pytest.raises(Exception) as err:
        _seed(h, "late", b"early", rid)
    assert getattr(err.value, "reason", None) == "NO_COMMITTED_SHOE"
    h.rounds.get_next_shoe(OP, "late", GAME, mode=Mode.REAL)
    assert _seed(h, "late", b"early", rid).client_seed == b"early".hex()  # evaluated afresh
    h.rounds.get_next_shoe("op-b", "late", GAME, mode=Mode.REAL)
    other = _seed(h, "late", b"other", rid, operator="op-b")  # another operator's id space
    assert other.client_seed == b"other".hex()
