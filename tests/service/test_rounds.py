"""Round use cases beyond one game's play: money refusals, idempotent retries, versions and
races, shoes and client seeds, restarts and recovery, void, demo money, listing."""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import structlog.testing
from support.engine_helpers import stack
from support.service_helpers import EUR, OP, Harness, ledger_invariants

from game_math.cards import card_codes
from game_math.round import Action, ActionKind, HandBet, Round
from rng_service.core import config
from rng_service.core.config import TEST_SELF_TEST_ENV
from rng_service.core.errors import Conflict, FairshoeError, IllegalState, InvalidInput, NotFound
from rng_service.crypto.signing import decode_envelope
from rng_service.rng import selftest
from rng_service.rng.shoe import seed_commitment, shoe_cards
from rng_service.service.ledger import DEMO_FUNDING
from rng_service.service.ports import Mode
from rng_service.service.rounds import RoundService
from rng_service.service.shoes import OsShoeSource
from rng_service.service.views import RoundView, from_json, to_json

SNAP_19_V_17 = stack("snap", [["TS", "9H"]], ["7D", "TC"])


def start(h: Harness, player: str = "ann", game: str = "snap", bet: int = 1000, *,
          request_id: str | None = None, mode: Mode = Mode.REAL) -> RoundView:
    return h.rounds.start_round(OP, player, game, mode=mode, currency=EUR,
                                hands=[HandBet(bet)], request_id=request_id or h.rid())


def counts(h: Harness) -> tuple[int, ...]:
    return tuple(h.sql(f"SELECT count(*) FROM {t}")[0][0]
                 for t in ("rounds", "ledger_entries", "shoes", "records", "idempotency"))


def test_insufficient_funds_changes_nothing(harness: Harness) -> None:
    h = harness
    h.deposit("ann", 500)
    before = counts(h)
    with pytest.raises(IllegalState) as info:
        start(h, bet=1000)
    assert info.value.reason == "INSUFFICIENT_FUNDS"
    assert counts(h) == before and h.balance("ann") == 500


def test_a_stake_the_ledger_cannot_cover_mid_round_is_refused(harness: Harness) -> None:
    h = harness
    h.deposit("ann", 2000)
    h.shoes.stack(SNAP_19_V_17)
    view = start(h)
    h.wallet.withdraw(OP, "ann", EUR, 1000, request_id=h.rid())  # the round still thinks 1000
    before = counts(h)
    with pytest.raises(IllegalState) as info:
        h.act(view, Action("double", 1000))
    assert info.value.reason == "INSUFFICIENT_FUNDS"
    assert counts(h) == before
    assert h.rounds.get_round(OP, view.round_id) == dataclasses.replace(view, balance_after=0)


def test_rounds_post_to_house_accounts_spread_by_round(harness: Harness) -> None:
    """The house is several accounts (so concurrent rounds do not all lock one row): every
    round's stakes and returns post to one of them, rounds spread over them, and the ledger
    still balances to the unit."""
    h = harness
    players = ["ann", "bob", "cy"]
    for p in players:
        h.deposit(p, 100_000)
    rounds = [h.play_out(start(h, player=players[i % 3], game=game)).round_id
              for i in range(8) for game in ("snap", "double-deck", "multi-hand")]
    used: set[str] = set()
    for round_id in rounds:
        houses = {holder for (holder,) in h.sql(
            "SELECT source FROM ledger_entries WHERE round_id = ? AND kind = 'return' UNION "
            "SELECT target FROM ledger_entries WHERE round_id = ? AND kind = 'stake'",
            round_id, round_id)}
        assert len(houses) == 1 and houses.pop().startswith("@house/"), round_id
        used |= {holder for (holder,) in h.sql(
            "SELECT target FROM ledger_entries WHERE round_id = ? AND kind = 'stake'", round_id)}
    assert len(used) > 4  # 24 rounds over 16 accounts
    assert not h.sql("SELECT holder FROM accounts WHERE holder = '@house'")
    ledger_invariants(h)


def test_bets_outside_the_limits_name_the_field(harness: Harness) -> None:
    h = harness
    h.deposit("ann", 10**7)
    before = counts(h)
    with pytest.raises(InvalidInput) as info:
        start(h, bet=10**6)
    # named as the request names it (StartRoundRequest.hands[0].bet_minor), not as the engine
    assert (info.value.field, info.value.reason) == ("hands[0].bet_minor", "INVALID_BET")
    assert "outside the limits" in str(info.value)
    # a side-bet stake by its place among the hand's (or the round's) side bets, as sent
    bets = {"perfect_pairs": 500, "twenty_one_plus_three": 1}
    for hands, side_bets, field in (
            ([HandBet(1000), HandBet(1000), HandBet(1000, bets)], None, "hands[2].side_bets[1]"),
            ([HandBet(1000, {"snap": 500})], None, "hands[0].side_bets[0]"),
            ([HandBet(1000)], {"perfect_pairs": 500}, "side_bets[0]")):
        with pytest.raises(InvalidInput) as info:
            h.rounds.start_round(OP, "ann", "multi-hand", mode=Mode.REAL, currency=EUR,
                                 hands=hands, side_bets=side_bets, request_id=h.rid())
        assert (info.value.field, info.value.reason) == (field, "INVALID_BET"), info.value
    assert counts(h) == before


def test_retried_requests_return_the_first_answer_and_change_nothing(harness: Harness) -> None:
    h = harness
    h.deposit("ann", 10_000)
    h.shoes.stack(SNAP_19_V_17)
    first = start(h, request_id="start-1")
    state = counts(h)
    assert start(h, request_id="start-1") == first
    assert counts(h) == state
    done = h.rounds.act(OP, first.round_id, Action("stand"), expected_version=1,
                        request_id="act-1")
    state = counts(h)
    again = h.rounds.act(OP, first.round_id, Action("stand"), expected_version=1,
                         request_id="act-1")
    assert again == done and counts(h) == state
    with pytest.raises(InvalidInput) as info:  # same id, other content
        start(h, bet=2000, request_id="start-1")
    assert info.value.field == "request_id"
    with pytest.raises(InvalidInput):
        h.rounds.act(OP, first.round_id, Action("hit"), expected_version=1, request_id="act-1")
    deposit = h.wallet.deposit(OP, "ann", EUR, 500, request_id="dep-1")
    assert h.wallet.deposit(OP, "ann", EUR, 500, request_id="dep-1") == deposit
    assert h.balance("ann") == 11_500
    with pytest.raises(InvalidInput):
        h.wallet.withdraw(OP, "ann", EUR, 500, request_id="dep-1")


def test_stored_answers_are_the_views_json_exactly(harness: Harness) -> None:
    """The stored first answer of a request is the JSON of ``dataclasses.asdict(view)`` (orjson
    writes the dataclasses directly), and reads back as the same view."""
    h = harness
    h.deposit("ann", 10_000)
    h.shoes.stack(stack("double-deck", [["8S", "8H"]], ["6D", "TC", "TH"], ["3C", "TD", "9S"]))
    view = h.rounds.start_round(OP, "ann", "double-deck", mode=Mode.REAL, currency=EUR,
                                hands=[HandBet(1000)], request_id="json-0")
    views = [view]
    for i, action in enumerate((Action("split"), Action("double", 1000), Action("stand"))):
        view = h.rounds.act(OP, view.round_id, action, hand_id=view.turn_hand,
                            expected_version=view.version, request_id=f"json-{i + 1}")
        views.append(view)
    for i, view in enumerate(views):
        (stored,), = h.sql("SELECT response FROM idempotency WHERE request_id = ?", f"json-{i}")
        assert json.loads(bytes(stored)) == json.loads(json.dumps(dataclasses.asdict(view)))
        assert from_json(RoundView, bytes(stored)) == view
    with pytest.raises(TypeError):
        to_json(object())


def test_stale_version_is_a_conflict_naming_the_current_version(harness: Harness) -> None:
    h = harness
    h.deposit("ann", 10_000)
    h.shoes.stack(stack("snap", [["TS", "2H"]], ["7D", "TC"], ["2C"]))
    view = h.act(start(h), "hit")
    assert view.version == 2
    with pytest.raises(Conflict) as info:
        h.rounds.act(OP, view.round_id, Action("stand"), expected_version=1,
                     request_id=h.rid())
    assert info.value.reason == "STALE_VERSION" and "version 2" in str(info.value)


def test_two_threads_acting_at_once_one_wins_one_conflicts(harness: Harness) -> None:
    h = harness
    h.deposit("ann", 10_000)
    h.shoes.stack(SNAP_19_V_17)
    view = start(h)
    barrier = threading.Barrier(2)
    results: list[object] = []

    def attempt(n: int) -> None:
        barrier.wait()
        try:
            results.append(h.rounds.act(OP, view.round_id, Action("stand"), expected_version=1,
                                        request_id=f"thread-{n}"))
        except FairshoeError as exc:
            results.append(exc)

    threads = [threading.Thread(target=attempt, args=(n,)) for n in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wins = [r for r in results if isinstance(r, RoundView)]
    lost = [r for r in results if isinstance(r, Conflict)]
    assert len(wins) == 1 and len(lost) == 1, results
    assert h.balance("ann") == 11_000
    ledger_invariants(h)


def test_next_shoe_is_committed_before_the_client_seed_and_locked_by_its_first_card(
        tmp_path, env, harness: Harness) -> None:
    h = harness
    # the production source: OS seeds and the certified shuffle, checked against the reveal
    rounds = RoundService(h.storage, vault=h.vault, signer=h.signer, shoe_source=OsShoeSource())
    h.deposit("eve", 100_000)
    with pytest.raises(IllegalState) as info:
        rounds.set_client_seed(OP, "eve", "double-exposure", b"lucky", mode=Mode.REAL,
                               request_id=h.rid())
    assert info.value.reason == "NO_COMMITTED_SHOE"
    shoe = rounds.get_next_shoe(OP, "eve", "double-exposure", mode=Mode.REAL)
    assert rounds.get_next_shoe(OP, "eve", "double-exposure", mode=Mode.REAL) == shoe
    seeded = rounds.set_client_seed(OP, "eve", "double-exposure", b"lucky", mode=Mode.REAL,
                                    request_id=h.rid())
    assert seeded.commitment == shoe.commitment and seeded.client_seed == b"lucky".hex()
    view = rounds.start_round(OP, "eve", "double-exposure", mode=Mode.REAL, currency=EUR,
                              hands=[HandBet(1000)], request_id=h.rid())
    assert (view.shoe.shoe_id, view.shoe.commitment) == (shoe.shoe_id, shoe.commitment)
    with pytest.raises(IllegalState) as info:
        rounds.set_client_seed(OP, "eve", "double-exposure", b"other", mode=Mode.REAL,
                               request_id=h.rid())
    assert info.value.reason == "CLIENT_SEED_LOCKED"
    while view.status == "awaiting":
        view = rounds.act(OP, view.round_id, Action("stand"), hand_id=view.turn_hand,
                          expected_version=view.version, request_id=h.rid())
    while True:  # finish the shoe: at its cut card, or early by voiding a round
        nxt = rounds.start_round(OP, "eve", "double-exposure", mode=Mode.REAL, currency=EUR,
                                 hands=[HandBet(1000)], request_id=h.rid())
        if nxt.shoe.shoe_id != shoe.shoe_id:
            break
        if nxt.status == "awaiting":
            rounds.void_round(OP, nxt.round_id, reason="test", expected_version=nxt.version,
                              request_id=h.rid())
            break
    (envelope,), = h.sql("SELECT envelope FROM reveals WHERE shoe_id = ?", shoe.shoe_id)
    reveal = decode_envelope(envelope)["payload"]
    seed = bytes.fromhex(reveal["seed"])
    assert seed_commitment(seed) == shoe.commitment
    assert reveal["client_seed"] == b"lucky".hex()
    dealt = [e.card for e in view.events if e.kind == "card"]
    assert dealt == card_codes(shoe_cards(seed, b"lucky", 6)[: len(dealt)])


def test_reopened_database_continues_a_round(harness: Harness) -> None:
    h = harness
    h.deposit("ann", 10_000)
    h.shoes.stack(stack("snap", [["TS", "2H"]], ["7D", "TC"], ["2C", "5S"]))
    view = h.act(start(h), "hit")
    h.reopen()
    assert h.rounds.get_round(OP, view.round_id) == view
    view = h.act(view, "hit")  # 19
    view = h.act(view, "stand")
    assert (view.status, view.balance_after) == ("finished", 11_000)
    ledger_invariants(h)


def test_recovery_completes_a_round_needing_no_input(harness: Harness) -> None:
    h = harness
    h.deposit("ann", 10_000)
    h.shoes.stack(SNAP_19_V_17)
    view = start(h)
    # As a crash of a writer that stored the last decision but not what follows would leave
    # it: the stored state already reaches the dealer's turn, the round row is still open.
    (state,), = h.sql("SELECT state FROM rounds WHERE round_id = ?", view.round_id)
    rnd = Round.from_bytes(state, h.shoes.stacked_cards(view.shoe.shoe_id))
    rnd.act(Action("stand"))
    h.sql("UPDATE rounds SET state = ? WHERE round_id = ?", rnd.to_bytes(), view.round_id)
    h.reopen()
    report = h.rounds.recover()
    assert report.completed_rounds == (view.round_id,)
    done = h.rounds.get_round(OP, view.round_id)
    assert (done.status, done.balance_after, done.version) == ("finished", 11_000, 2)
    assert h.sql("SELECT count(*) FROM records WHERE round_id = ?", view.round_id) == [(1,)]
    assert h.rounds.recover().completed_rounds == ()
    ledger_invariants(h)


def test_recovery_reveals_a_finished_shoe_without_its_reveal(harness: Harness) -> None:
    h = harness
    shoe = h.rounds.get_next_shoe(OP, "ann", "snap", mode=Mode.REAL)
    h.sql("UPDATE shoes SET status = 'finished' WHERE shoe_id = ?", shoe.shoe_id)
    assert h.rounds.recover().revealed_shoes == (shoe.shoe_id,)
    assert h.sql("SELECT status FROM shoes WHERE shoe_id = ?", shoe.shoe_id) == [("revealed",)]


def test_void_returns_every_stake_and_reveals_the_shoe(harness: Harness) -> None:
    h = harness
    h.deposit("ann", 10_000)
    h.shoes.stack(stack("double-exposure", [["TS", "6H"]], ["7D", "TC"], ["2C"]))
    view = h.act(start(h, game="double-exposure"), "hit")
    void = h.rounds.void_round(OP, view.round_id, reason="table fault",
                               expected_version=view.version, request_id=h.rid())
    assert (void.status, void.balance_after, void.void_reason) == ("void", 10_000, "table fault")
    (status,), = h.sql("SELECT status FROM shoes WHERE shoe_id = ?", view.shoe.shoe_id)
    assert status == "revealed"
    (envelope,), = h.sql("SELECT envelope FROM records WHERE round_id = ?", view.round_id)
    assert decode_envelope(envelope)["payload"]["status"] == "void"
    ledger_invariants(h)


def test_void_is_refused_once_a_wager_is_settled(harness: Harness) -> None:
    h = harness
    h.deposit("ann", 10_000)
    h.shoes.stack(stack("multi-hand", [["8S", "8S"]], ["7D", "TD"]))
    view = h.rounds.start_round(OP, "ann", "multi-hand", mode=Mode.REAL, currency=EUR,
                                hands=[HandBet(1000, {"perfect_pairs": 100})],
                                request_id=h.rid())
    with pytest.raises(IllegalState) as info:
        h.rounds.void_round(OP, view.round_id, reason="x", expected_version=view.version,
                            request_id=h.rid())
    assert info.value.reason == "WAGER_SETTLED"


def test_one_open_round_per_player_and_game(harness: Harness) -> None:
    h = harness
    h.deposit("ann", 10_000)
    h.shoes.stack(SNAP_19_V_17)
    start(h)
    with pytest.raises(IllegalState) as info:
        start(h)
    assert info.value.reason == "ROUND_IN_PROGRESS"


def test_a_start_that_would_settle_at_once_is_refused_while_a_round_is_open(
        harness: Harness) -> None:
    """A round settled at once is stored finished, outside the unique index on open rounds, so
    its start must look for the open round itself: refused, and the open round's shoe is not
    revealed (its seed would show the open round's cards)."""
    h = harness
    blackjack = stack("snap", [["AS", "KH"]], ["9D", "7C"])
    h.deposit("bob", 10_000)
    h.shoes.stack(blackjack)
    assert start(h, "bob").status == "finished"  # this deal settles at once
    h.deposit("ann", 10_000)
    h.shoes.stack(SNAP_19_V_17)
    view = start(h)
    before = counts(h)
    h.shoes.stack(blackjack)
    with pytest.raises(IllegalState) as info:
        start(h)
    assert info.value.reason == "ROUND_IN_PROGRESS"
    assert counts(h) == before
    assert h.sql("SELECT status FROM shoes WHERE shoe_id = ?", view.shoe.shoe_id) == [
        ("in_play",)]
    assert h.act(view, "stand").status == "finished"
    ledger_invariants(h)


def test_an_open_round_is_named_before_any_other_refusal_and_nothing_changes(
        harness: Harness) -> None:
    """A StartRound does not look for an open round before its work (the round's INSERT finds
    one: a unique index); a refusal is decided again looking first, so an open round is still
    the answer over what the work would refuse after it (the stake, the bet's limits), and a
    refused start writes nothing, in either decision (the shoe it opened in vain included)."""
    h = harness
    h.deposit("ann", 1500)
    h.shoes.stack(SNAP_19_V_17)
    view = start(h)
    before = counts(h)
    for bet, request_id in ((1000, None), (5000, None), (7, None), (1000, "again")):
        with pytest.raises(IllegalState) as info:
            start(h, bet=bet, request_id=request_id)
        assert info.value.reason == "ROUND_IN_PROGRESS" and view.round_id in str(info.value)
    assert counts(h) == before
    assert h.rounds.get_round(OP, view.round_id).version == view.version
    ledger_invariants(h)


def test_acting_on_the_wrong_hand_or_a_finished_round_is_refused(harness: Harness) -> None:
    h = harness
    h.deposit("ann", 10_000)
    h.shoes.stack(SNAP_19_V_17)
    view = start(h)
    with pytest.raises(IllegalState) as info:
        h.rounds.act(OP, view.round_id, Action("stand"), hand_id=1, expected_version=1,
                     request_id=h.rid())
    assert info.value.reason == "NOT_THIS_HAND"
    with pytest.raises(IllegalState) as info:
        h.act(view, "split")
    assert info.value.reason == "ILLEGAL_ACTION" and "split" in str(info.value)
    done = h.act(view, "stand")
    with pytest.raises(IllegalState) as info:
        h.act(done, "hit")
    assert info.value.reason == "ROUND_FINISHED"
    with pytest.raises(NotFound):
        h.rounds.get_round(OP, "0" * 32)
    with pytest.raises(NotFound):
        h.rounds.get_round(OP, view.round_id, player="bob")


def test_demo_mode_is_funded_automatically_and_kept_apart(harness: Harness) -> None:
    h = harness
    h.shoes.stack(SNAP_19_V_17)
    view = start(h, mode=Mode.DEMO)
    assert view.balance_after == DEMO_FUNDING - 1000
    done = h.act(view, "stand")
    assert done.balance_after == DEMO_FUNDING + 1000 == h.balance("ann", Mode.DEMO)
    assert h.balance("ann") == 0
    ledger_invariants(h)


def test_list_rounds_open_first_then_newest_first(harness: Harness) -> None:
    h = harness
    h.deposit("ann", 100_000)
    finished = []
    for _ in range(3):
        h.shoes.stack(SNAP_19_V_17)
        finished.append(h.act(start(h), "stand").round_id)
    h.shoes.stack(SNAP_19_V_17)
    open_id = start(h).round_id
    page = h.rounds.list_rounds(OP, "ann", page_size=2)
    assert [r.round_id for r in page.rounds] == [open_id, finished[2]]
    rest = h.rounds.list_rounds(OP, "ann", page_size=2, page_token=page.next_page_token)
    assert [r.round_id for r in rest.rounds] == [finished[1], finished[0]]
    assert rest.next_page_token == ""
    with pytest.raises(InvalidInput):
        h.rounds.list_rounds(OP, "bob", page_token=page.next_page_token)


def test_an_uncertified_shoe_source_is_refused_outside_tests(harness: Harness,
                                                             monkeypatch) -> None:
    h = harness
    monkeypatch.delenv("FAIRSHOE_TEST_SHOES")
    with pytest.raises(config.ConfigError):
        RoundService(h.storage, vault=h.vault, signer=h.signer, shoe_source=h.shoes)
    monkeypatch.setenv("FAIRSHOE_TEST_SHOES", "1")
    monkeypatch.setenv("FAIRSHOE_ENV", "production")
    with pytest.raises(config.ConfigError):
        RoundService(h.storage, vault=h.vault, signer=h.signer, shoe_source=h.shoes)


def stand_out(h: Harness, view: RoundView) -> RoundView:
    while view.status == "awaiting":
        view = h.act(view, "stand")
    return view


def test_demo_and_real_rounds_deal_from_separate_shoes(harness: Harness) -> None:
    # a cut-card shoe spans rounds: were demo and real money one shoe, free demo rounds would
    # show (and let a player count) the cards a real-money bet is then placed on
    h = harness
    h.deposit("cal", 100_000)
    real = h.rounds.get_next_shoe(OP, "cal", "double-exposure", mode=Mode.REAL)
    demo = h.rounds.get_next_shoe(OP, "cal", "double-exposure", mode="DEMO")
    assert demo.shoe_id != real.shoe_id and demo.commitment != real.commitment
    assert h.rounds.get_next_shoe(OP, "cal", "double-exposure", mode=Mode.REAL) == real
    seeded = h.rounds.set_client_seed(OP, "cal", "double-exposure", b"demo-seed",
                                      mode=Mode.DEMO, shoe_id=demo.shoe_id,
                                      request_id=h.rid())
    assert seeded.shoe_id == demo.shoe_id and seeded.client_seed == b"demo-seed".hex()
    assert h.rounds.get_next_shoe(OP, "cal", "double-exposure", mode=Mode.REAL) == real
    with pytest.raises(IllegalState) as info:  # the demo shoe is not the real next shoe
        h.rounds.set_client_seed(OP, "cal", "double-exposure", b"x", mode=Mode.REAL,
                                 shoe_id=demo.shoe_id, request_id=h.rid())
    assert info.value.reason == "NOT_THE_NEXT_SHOE"
    played = stand_out(h, start(h, "cal", "double-exposure", mode=Mode.DEMO))
    assert played.shoe.shoe_id == demo.shoe_id
    assert played.shoe.client_seed == b"demo-seed".hex()
    again = stand_out(h, start(h, "cal", "double-exposure", mode=Mode.REAL))
    assert (again.shoe.shoe_id, again.shoe.commitment) == (real.shoe_id, real.commitment)
    assert again.shoe.first_card == 0  # no demo card came out of the real shoe
    modes = dict(h.sql("SELECT shoe_id, mode FROM shoes WHERE player = ?", "cal"))
    assert modes == {real.shoe_id: "REAL", demo.shoe_id: "DEMO"}
    for bad in (None, "", "BOTH"):
        with pytest.raises(InvalidInput) as bad_mode:
            h.rounds.get_next_shoe(OP, "cal", "double-exposure", mode=bad)  # type: ignore[arg-type]
        assert bad_mode.value.field == "mode"
        with pytest.raises(InvalidInput) as bad_mode:
            h.rounds.set_client_seed(OP, "cal", "double-exposure", b"x", request_id=h.rid(),
                                     mode=bad)  # type: ignore[arg-type]
        assert bad_mode.value.field == "mode"



@pytest.fixture
def fail_rng(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[], None]]:
    """Makes the real self-test fail when called (run against damaged known answers, the test
    hook production refuses); the RNG is healthy again after the test."""
    monkeypatch.setenv(TEST_SELF_TEST_ENV, "1")
    # the test hook is process-wide: put back as it was (None, the certified answers) after the
    # test, or a later test in this worker would run the self-test against the file set here
    monkeypatch.setattr(selftest, "_test_known_answers", selftest._test_known_answers)

    def fail() -> None:
        answers = tmp_path / "damaged_known_answers.json"
        data = json.loads(selftest.KNOWN_ANSWERS_FILE.read_text())
        data["shoes"]["six_decks_sha256"] = "0" * 64
        answers.write_text(json.dumps(data))
        selftest.use_test_known_answers(answers)
        with pytest.raises(selftest.SelfTestFailed):
            selftest.run_self_test()

    try:
        yield fail
    finally:
        selftest.use_test_known_answers(selftest.KNOWN_ANSWERS_FILE)
        selftest.run_self_test()


def test_recovery_leaves_rounds_open_while_the_rng_is_failed(
        harness: Harness, fail_rng: Callable[[], None]) -> None:
    h = harness
    h.deposit("ann", 10_000)
    h.shoes.stack(SNAP_19_V_17)
    view = start(h)
    (state,), = h.sql("SELECT state FROM rounds WHERE round_id = ?", view.round_id)
    rnd = Round.from_bytes(state, h.shoes.stacked_cards(view.shoe.shoe_id))
    rnd.act(Action("stand"))  # as a crash would leave it: the dealer's turn is due
    h.sql("UPDATE rounds SET state = ? WHERE round_id = ?", rnd.to_bytes(), view.round_id)
    h.reopen()
    fail_rng()
    # no card is dealt on a failed RNG, not even to finish a round: it waits for a healthy start
    assert h.rounds.recover().completed_rounds == ()
    assert h.sql("SELECT status FROM rounds WHERE round_id = ?", view.round_id) == [("open",)]
    assert h.sql("SELECT count(*) FROM records WHERE round_id = ?", view.round_id) == [(0,)]
    selftest.use_test_known_answers(selftest.KNOWN_ANSWERS_FILE)
    selftest.run_self_test()
    assert h.rounds.recover().completed_rounds == (view.round_id,)
    ledger_invariants(h)


def test_a_finished_round_is_logged_once_with_its_money(harness: Harness) -> None:
    """The ``round_finished`` line: written once, after the commit, with the round's money (here
    through structlog, whose processors ``capture_logs`` swaps; under ``configure_logging``'s
    configuration the same fields go the shorter way, ``core.logs.write_line``)."""
    h = harness
    h.deposit("ann", 5000)
    h.shoes.stack(SNAP_19_V_17)
    with structlog.testing.capture_logs() as lines:
        view = start(h)
        assert not [line for line in lines if line["event"] == "round_finished"]
        done = h.rounds.act(OP, view.round_id, Action(ActionKind.STAND),
                            expected_version=view.version, request_id=h.rid())
    finished = [line for line in lines if line["event"] == "round_finished"]
    assert done.status == "finished" and len(finished) == 1
    assert {key: finished[0][key] for key in ("operator", "round_id", "status", "staked",
                                              "returned")} == {
        "operator": OP, "round_id": view.round_id, "status": "finished", "staked": 1000,
        "returned": done.total_returned}
