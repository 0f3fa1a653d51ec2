"""The live cache of rounds and shoes is an optimisation only: never stale, never a secret kept.

Two replicas (each its own storage and cache) on one database act on one round in turn; rows
changed behind a replica's back (a version bump, a state rewritten by another process) are
read, not the cached round; a failed transition leaves nothing cached; a shoe's seed leaves the
cache when the shoe is revealed. On SQLite and PostgreSQL.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterator

import pytest
from support.engine_helpers import stack
from support.service_helpers import EUR, OP, Harness, ledger_invariants

from game_math.round import Action, HandBet, Round
from rng_service.core.errors import Conflict, IllegalState
from rng_service.service.live_cache import CachedRound, LiveCache
from rng_service.service.ports import (
    Mode,
    RoundRow,
    RoundStatus,
    RoundWallet,
    ShoeRow,
    Storage,
)
from rng_service.service.rounds import RoundService
from rng_service.service.views import RoundView
from rng_service.storage import open_storage
from rng_service.storage.sql.shoes import ShoeTables

#: snap: 12 against the dealer's 7; hits draw 2C (14) and 5S (19); the dealer stands on 17
SNAP_12_HITS_TO_19 = stack("snap", [["TS", "2H"]], ["7D", "TC"], ["2C", "5S"])
#: snap: a blackjack against the dealer's 9: settled at once
SNAP_BLACKJACK = stack("snap", [["AS", "KH"]], ["9D", "7C"])

Replica = tuple[RoundService, LiveCache]


@pytest.fixture
def replicas(harness: Harness) -> Iterator[Callable[[], Replica]]:
    """Makes replicas: a round service with its own storage and live cache on the harness's
    database, sharing its seed vault, signing key and stacked shoes."""
    opened: list[Storage] = []

    def make() -> Replica:
        storage = open_storage(harness.url)
        opened.append(storage)
        cache = LiveCache()
        return RoundService(storage, vault=harness.vault, signer=harness.signer,
                            shoe_source=harness.shoes, cache=cache), cache

    yield make
    for storage in opened:
        storage.close()


def start(h: Harness, rounds: RoundService, game: str = "snap") -> RoundView:
    return rounds.start_round(OP, "ann", game, mode=Mode.REAL, currency=EUR,
                              hands=[HandBet(1000)], request_id=h.rid())


def act(h: Harness, rounds: RoundService, view: RoundView, action: str, *,
        version: int | None = None) -> RoundView:
    return rounds.act(OP, view.round_id, Action(action), hand_id=view.turn_hand,
                      expected_version=view.version if version is None else version,
                      request_id=h.rid())


def finish(h: Harness, rounds: RoundService, view: RoundView) -> RoundView:
    """Play ``view``'s round to its end: stand, decline insurance and even money."""
    while view.status == "awaiting":
        action = {"insurance": Action("insurance", 0),
                  "even_money": Action("even_money", accept=False)}.get(
                      view.decision or "", Action("stand"))
        view = rounds.act(OP, view.round_id, action, hand_id=view.turn_hand,
                          expected_version=view.version, request_id=h.rid())
    return view


def cards(view: RoundView) -> tuple[str, ...]:
    return view.hands[0].cards


def test_two_replicas_acting_on_one_round_in_turn_each_see_the_others_moves(
        harness: Harness, replicas: Callable[[], Replica]) -> None:
    h = harness
    (a, cache_a), (b, cache_b) = replicas(), replicas()
    h.deposit("ann", 10_000)
    h.shoes.stack(SNAP_12_HITS_TO_19)
    view = start(h, a)
    assert cache_a.has_round(OP, view.round_id)
    view = act(h, b, view, "hit")  # B restores from the rows: A's version 1 is now stale
    assert (view.version, cards(view)) == (2, ("TS", "2H", "2C"))
    assert cache_b.has_round(OP, view.round_id)
    with pytest.raises(Conflict) as info:  # A's cached version is never taken for the stored one
        act(h, a, view, "hit", version=1)
    assert info.value.reason == "STALE_VERSION"
    view = act(h, a, view, "hit")  # A's stale entry is a miss: it reads B's move
    assert (view.version, cards(view), view.hands[0].total) == (3, ("TS", "2H", "2C", "5S"), 19)
    view = act(h, b, view, "stand")  # B's entry (version 2) is stale in turn
    assert (view.status, view.version, view.balance_after) == ("finished", 4, 11_000)
    assert a.get_round(OP, view.round_id) == b.get_round(OP, view.round_id) == view
    assert not cache_b.has_round(OP, view.round_id)  # B ended the round: it keeps nothing
    with h.storage.snapshot() as uow:  # A still has its version 3, which no row matches now
        row = uow.get_round(OP, view.round_id)
    assert row is not None and cache_a.take_round(row) is None
    assert h.sql("SELECT count(*) FROM records WHERE round_id = ?", view.round_id) == [(1,)]
    ledger_invariants(h)


def test_a_version_bumped_by_another_process_is_read_not_served_from_the_cache(
        harness: Harness, replicas: Callable[[], Replica]) -> None:
    h = harness
    (a, cache_a), = [replicas()]
    h.deposit("ann", 10_000)
    h.shoes.stack(SNAP_12_HITS_TO_19)
    view = start(h, a)
    h.sql("UPDATE rounds SET version = 7 WHERE round_id = ?", view.round_id)
    with pytest.raises(Conflict) as info:
        act(h, a, view, "hit")
    assert info.value.reason == "STALE_VERSION" and "version 7" in str(info.value)
    view = act(h, a, view, "hit", version=7)
    assert (view.version, cards(view)) == (8, ("TS", "2H", "2C"))
    assert cache_a.has_round(OP, view.round_id)


def test_a_state_rewritten_at_the_same_version_is_read_not_served_from_the_cache(
        harness: Harness, replicas: Callable[[], Replica]) -> None:
    """Even a writer that forgets to bump the version (here raw SQL, as a crashed writer's
    recovery test does) is seen: the cache compares the stored state byte for byte."""
    h = harness
    (a, cache_a), = [replicas()]
    h.deposit("ann", 10_000)
    h.shoes.stack(SNAP_12_HITS_TO_19)
    view = start(h, a)
    (state,), = h.sql("SELECT state FROM rounds WHERE round_id = ?", view.round_id)
    rnd = Round.from_bytes(state, h.shoes.stacked_cards(view.shoe.shoe_id))
    rnd.act(Action("hit"))  # 14, written behind the cache's back at the same version
    h.sql("UPDATE rounds SET state = ? WHERE round_id = ?", rnd.to_bytes(), view.round_id)
    assert cache_a.has_round(OP, view.round_id)
    view = act(h, a, view, "hit")
    assert (view.version, cards(view), view.hands[0].total) == (2, ("TS", "2H", "2C", "5S"), 19)


def test_an_act_refused_on_the_cached_copy_is_decided_again_on_the_stored_round(
        harness: Harness, replicas: Callable[[], Replica]) -> None:
    """An act whose round the cache holds does not read the round first: its write checks the
    stored round (version and state bytes). A refusal the cached copy gives before that write
    is not the answer: here the stored round moved on behind the cache at the same version (the
    first hand stood), so acting on the second hand is refused by the copy (NOT_THIS_HAND) and
    accepted on the stored round."""
    h = harness
    (a, cache_a), = [replicas()]
    h.deposit("ann", 10_000)
    h.shoes.stack(stack("multi-hand", [["TH", "9H"], ["TS", "8S"], ["TC", "7S"]],
                        ["7D", "TD"]))
    view = a.start_round(OP, "ann", "multi-hand", mode=Mode.REAL, currency=EUR,
                         hands=[HandBet(1000)] * 3, request_id=h.rid())
    assert (view.version, view.turn_hand) == (1, 0)
    (state,), = h.sql("SELECT state FROM rounds WHERE round_id = ?", view.round_id)
    rnd = Round.from_bytes(state, h.shoes.stacked_cards(view.shoe.shoe_id))
    rnd.act(Action("stand"))  # the first hand stands, written behind the cache's back
    h.sql("UPDATE rounds SET state = ? WHERE round_id = ?", rnd.to_bytes(), view.round_id)
    assert cache_a.has_round(OP, view.round_id)
    done = a.act(OP, view.round_id, Action("stand"), hand_id=1, expected_version=1,
                 request_id=h.rid())
    assert (done.version, done.status, done.turn_hand) == (2, "awaiting", 2)


def test_a_failed_transition_leaves_nothing_cached_and_the_next_one_reads_the_rows(
        harness: Harness, replicas: Callable[[], Replica]) -> None:
    h = harness
    (a, cache_a), = [replicas()]
    h.deposit("ann", 10_000)
    h.shoes.stack(SNAP_12_HITS_TO_19)
    view = start(h, a)
    with pytest.raises(IllegalState) as info:
        act(h, a, view, "split")  # TS 2H: not a pair
    assert info.value.reason == "ILLEGAL_ACTION"
    assert not cache_a.has_round(OP, view.round_id)  # taken by the call that rolled back
    hit = a.act(OP, view.round_id, Action("hit"), hand_id=0, expected_version=1,
                request_id="hit-once")
    assert (hit.version, cards(hit)) == (2, ("TS", "2H", "2C"))
    again = a.act(OP, view.round_id, Action("hit"), hand_id=0, expected_version=1,
                  request_id="hit-once")  # the stored answer, whatever the cache holds
    assert again == hit and a.get_round(OP, view.round_id) == hit


def test_a_cut_card_shoes_seed_is_held_between_its_rounds_and_dropped_when_revealed(
        harness: Harness, replicas: Callable[[], Replica]) -> None:
    h = harness
    (a, cache_a), = [replicas()]
    h.deposit("ann", 100_000)
    view = finish(h, a, start(h, a, "double-exposure"))
    shoe_id = view.shoe.shoe_id
    assert not cache_a.has_round(OP, view.round_id)
    assert cache_a.has_shoe(OP, shoe_id)  # the shoe deals on: its next round takes it
    while True:
        view = start(h, a, "double-exposure")
        assert view.shoe.shoe_id == shoe_id
        if view.status == "awaiting":
            break
        assert cache_a.has_shoe(OP, shoe_id)  # settled at once: the shoe waits again
    assert cache_a.has_round(OP, view.round_id) and not cache_a.has_shoe(OP, shoe_id)
    view = a.void_round(OP, view.round_id, reason="table fault", expected_version=view.version,
                        request_id=h.rid())
    assert h.sql("SELECT status FROM shoes WHERE shoe_id = ?", shoe_id) == [("revealed",)]
    assert not cache_a.has_shoe(OP, shoe_id) and not cache_a.has_round(OP, view.round_id)
    ledger_invariants(h)


def test_a_one_round_shoe_leaves_the_cache_with_its_round(
        harness: Harness, replicas: Callable[[], Replica]) -> None:
    h = harness
    (a, cache_a), = [replicas()]
    h.deposit("ann", 10_000)
    h.shoes.stack(SNAP_12_HITS_TO_19)
    view = act(h, a, start(h, a), "stand")
    assert view.status == "finished"
    assert h.sql("SELECT status FROM shoes WHERE shoe_id = ?", view.shoe.shoe_id) == [
        ("revealed",)]
    assert not cache_a.has_shoe(OP, view.shoe.shoe_id)
    assert not cache_a.has_round(OP, view.round_id)


def _counting_shoe_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The games whose current shoe a unit of work reads from now on, in order."""
    reads: list[str] = []
    real = ShoeTables.current_shoe

    def current_shoe(self: ShoeTables, operator: str, player: str, game: str, mode: Mode
                     ) -> ShoeRow | None:
        reads.append(game)
        return real(self, operator, player, game, mode)

    monkeypatch.setattr(ShoeTables, "current_shoe", current_shoe)
    return reads


def test_a_start_after_this_process_ended_the_players_shoe_does_not_read_it(
        harness: Harness, replicas: Callable[[], Replica], monkeypatch: pytest.MonkeyPatch
        ) -> None:
    """A round that finished its one-round shoe (or left a cut-card shoe dealing on) leaves the
    player's current shoe known to this process: the next start deals without reading it."""
    h = harness
    (a, _), = [replicas()]
    h.deposit("ann", 100_000)
    first = {game: finish(h, a, start(h, a, game)) for game in ("snap", "double-exposure")}
    reads = _counting_shoe_reads(monkeypatch)
    # not a blackjack: a round settled at once is stored finished, outside the index on open
    # rounds, so its start looks for the current shoe (a random deal failed 1 run in 16)
    h.shoes.stack(SNAP_12_HITS_TO_19)
    snap = finish(h, a, start(h, a, "snap"))
    cut = start(h, a, "double-exposure")
    assert reads == []
    assert snap.shoe.shoe_id != first["snap"].shoe.shoe_id  # a new one-round shoe
    assert (cut.shoe.shoe_id, cut.shoe.first_card) == (
        first["double-exposure"].shoe.shoe_id, first["double-exposure"].shoe.next_card)
    ledger_invariants(h)


@pytest.mark.parametrize("at_once", [False, True], ids=["in-play", "settled-at-once"])
def test_a_shoe_committed_by_another_process_refuses_the_unread_start_which_then_uses_it(
        harness: Harness, replicas: Callable[[], Replica], monkeypatch: pytest.MonkeyPatch,
        at_once: bool) -> None:
    """A knows the player has no current snap shoe; B commits one and sets the player's client
    seed on it. A's start must deal from that shoe with that seed: its new shoe's INSERT is
    refused by the one-current-shoe index, or, when the round A deals on its new shoe is settled
    at once (a blackjack: the new shoe is stored finished, outside that index), A looks for a
    current shoe before writing; either way the start is decided again, reading it."""
    h = harness
    (a, _), (b, _) = replicas(), replicas()
    h.deposit("ann", 100_000)
    h.shoes.stack(SNAP_12_HITS_TO_19)  # A's first shoe
    h.shoes.stack(SNAP_12_HITS_TO_19)  # B's committed shoe: 12 against a 7, awaiting
    h.shoes.stack(SNAP_BLACKJACK if at_once else SNAP_12_HITS_TO_19)  # A's unread new shoe
    finish(h, a, start(h, a))
    committed = b.get_next_shoe(OP, "ann", "snap", mode=Mode.REAL)
    b.set_client_seed(OP, "ann", "snap", b"ann's seed", mode=Mode.REAL, request_id=h.rid(),
                      shoe_id=committed.shoe_id)
    reads = _counting_shoe_reads(monkeypatch)
    view = start(h, a)
    assert reads == (["snap", "snap"] if at_once else ["snap"])  # A's look, the start again's
    assert (view.shoe.shoe_id, view.shoe.client_seed) == (committed.shoe_id,
                                                          b"ann's seed".hex())
    assert (view.status, cards(view)) == ("awaiting", ("TS", "2H"))
    assert h.sql("SELECT count(*) FROM shoes WHERE player = 'ann' AND game = 'snap'") == [(2,)]
    ledger_invariants(h)


def test_a_cut_card_shoe_moved_on_by_another_process_refuses_the_unread_start(
        harness: Harness, replicas: Callable[[], Replica], monkeypatch: pytest.MonkeyPatch
        ) -> None:
    """A keeps the cut-card shoe as its last round left it; B deals a round from it. A's start
    must deal from where B's round stopped (the shoe's UPDATE at A's version is refused, and
    the start is decided again on the stored shoe), never a card twice."""
    h = harness
    (a, cache_a), (b, _) = replicas(), replicas()
    h.deposit("ann", 100_000)
    first = finish(h, a, start(h, a, "double-exposure"))
    assert cache_a.has_shoe(OP, first.shoe.shoe_id)
    moved = finish(h, b, start(h, b, "double-exposure"))
    assert (moved.shoe.shoe_id, moved.shoe.first_card) == (first.shoe.shoe_id,
                                                           first.shoe.next_card)
    reads = _counting_shoe_reads(monkeypatch)
    view = start(h, a, "double-exposure")
    assert reads == ["double-exposure"]  # read once: by the start decided again
    assert view.shoe.shoe_id == first.shoe.shoe_id
    assert view.shoe.first_card == moved.shoe.next_card
    ledger_invariants(h)


@pytest.mark.parametrize("backend", ["postgresql"])  # SQLite runs one write transaction at a time
def test_a_start_dealt_while_the_shoes_last_round_ends_elsewhere_is_dealt_again_after_it(
        harness: Harness, replicas: Callable[[], Replica], backend: str) -> None:
    """PostgreSQL (READ COMMITTED): B's start reads the cut-card shoe while A's round on it is
    open, and deals; A's stand then ends that round, drawing no card (the dealer stands), and
    commits; B's start commits after it. A round's end that draws nothing must still move the
    shoe's version on: else B's UPDATE at the version it read matches, and B's round is stored
    started before the shoe's previous round finished (its cards right, but dealt while that
    round was open: the audit fails "a shoe deals its rounds one at a time"). B's start must
    be decided again after A's round ended. (SQLite runs one write transaction at a time.)"""
    h = harness
    (a, _), (b, _) = replicas(), replicas()
    h.deposit("ann", 100_000)
    # 19 against the dealer's T and 7: a stand ends the round, the dealer (17) draws nothing
    h.shoes.stack(stack("double-exposure", [["TS", "9H"]], ["TD", "7C"]))
    first = start(h, a, "double-exposure")
    assert first.status == "awaiting"
    dealt, ended = threading.Event(), threading.Event()
    commit = b._commit

    def held_commit(*args: object, **kwargs: object) -> RoundView:
        if not dealt.is_set():  # B's first try: dealt on the shoe as read, not yet written
            dealt.set()
            assert ended.wait(60)
        return commit(*args, **kwargs)  # type: ignore[arg-type]

    b._commit = held_commit  # type: ignore[method-assign]
    second: list[RoundView] = []
    thread = threading.Thread(target=lambda: second.append(start(h, b, "double-exposure")))
    thread.start()
    assert dealt.wait(60)
    ended_view = act(h, a, first, "stand")
    assert (ended_view.status, ended_view.shoe.next_card) == ("finished", first.shoe.next_card)
    ended.set()
    thread.join(60)
    assert second, "B's start did not answer"
    view, = second
    (finished_at,), = h.sql("SELECT updated_at FROM rounds WHERE round_id = ?", first.round_id)
    (started_at,), = h.sql("SELECT created_at FROM rounds WHERE round_id = ?", view.round_id)
    assert started_at >= finished_at, (started_at, finished_at)
    assert (view.shoe.shoe_id, view.shoe.first_card) == (first.shoe.shoe_id,
                                                         first.shoe.next_card)
    ledger_invariants(h)


# --- the cache itself ---------------------------------------------------------------------------


def _row(version: int, state: bytes, shoe_id: str, round_id: str = "r1") -> RoundRow:
    return RoundRow(OP, round_id, "ann", "snap", "d" * 64, "medium", Mode.REAL, EUR,
                    RoundStatus.OPEN, version, state, shoe_id, "t0", "t1")


def _entry(harness: Harness, replicas: Callable[[], Replica], version: int, state: bytes
           ) -> CachedRound:
    """An entry holding a real started round's objects, as ``version`` with ``state``."""
    (a, cache), = [replicas()]
    harness.deposit("ann", 10_000)
    harness.shoes.stack(SNAP_12_HITS_TO_19)
    view = start(harness, a)
    with harness.storage.snapshot() as uow:
        row = uow.get_round(OP, view.round_id)
        assert row is not None
        kept = cache.take_round(row)
    assert kept is not None
    return CachedRound(version, state, kept.rnd, kept.shoe, kept.shoe_row, kept.posted)


def test_the_cache_takes_only_an_exact_match_and_never_replaces_a_newer_entry(
        harness: Harness, replicas: Callable[[], Replica]) -> None:
    cache = LiveCache()
    entry = _entry(harness, replicas, 2, b"state-2")
    shoe = entry.shoe.id
    for row in (_row(3, b"state-2", shoe), _row(2, b"state-X", shoe), _row(2, b"state-2", "s2")):
        cache.put_round(row, entry)
        assert cache.take_round(row) is None  # stale, and dropped
        assert not cache.has_round(OP, "r1")
    cache.put_round(_row(2, b"state-2", shoe), entry)
    older = CachedRound(1, b"state-1", entry.rnd, entry.shoe, entry.shoe_row, entry.posted)
    cache.put_round(_row(1, b"state-1", shoe), older)  # a late put of an older version: ignored
    assert cache.take_round(_row(2, b"state-2", shoe)) is entry
    assert "state" not in repr(entry) and "seed" not in repr(cache)


def test_an_unread_take_wants_the_version_player_and_ledger_wallet_and_leaves_others(
        harness: Harness, replicas: Callable[[], Replica]) -> None:
    """What an act that does not read its round may take: the entry at the request's version,
    of its player, on this ledger (a seamless round's debit comes first: it reads its round).
    A request it does not fit (a retry at an old version) leaves the entry for the next one."""
    cache = LiveCache()
    entry = _entry(harness, replicas, 2, b"state-2")
    row = _row(2, b"state-2", entry.shoe.id)
    entry.row = row
    cache.put_round(row, entry)
    for version, player in ((1, None), (3, None), (2, "bob")):
        assert cache.take_unread(OP, "r1", version, player=player) is None
        assert cache.has_round(OP, "r1")
    assert cache.take_unread(OP, "r1", 2, player="ann") is entry
    assert not cache.has_round(OP, "r1")
    entry.row = dataclasses.replace(row, wallet=RoundWallet.SEAMLESS)
    cache.put_round(entry.row, entry)
    assert cache.take_unread(OP, "r1", 2) is None and cache.has_round(OP, "r1")


def test_the_cache_is_bounded_and_size_zero_keeps_nothing(
        harness: Harness, replicas: Callable[[], Replica]) -> None:
    entry = _entry(harness, replicas, 2, b"s")
    bounded, off = LiveCache(2), LiveCache(0)
    for i in range(3):
        row = _row(2, b"s", entry.shoe.id, round_id=f"r{i}")
        bounded.put_round(row, entry)
        off.put_round(row, entry)
    assert [bounded.has_round(OP, f"r{i}") for i in range(3)] == [False, True, True]
    assert not any(off.has_round(OP, f"r{i}") for i in range(3))


def test_an_entry_left_unused_too_long_is_dropped(
        harness: Harness, replicas: Callable[[], Replica]) -> None:
    entry = _entry(harness, replicas, 2, b"s")
    now = [0.0]
    cache = LiveCache(max_idle=60, clock=lambda: now[0])
    cache.put_round(_row(2, b"s", entry.shoe.id, round_id="old"), entry)
    now[0] = 50.0
    cache.put_round(_row(2, b"s", entry.shoe.id, round_id="new"), entry)
    now[0] = 70.0  # "old" idle for 70 s, "new" for 20 s
    assert cache.take_round(_row(2, b"s", entry.shoe.id, round_id="old")) is None
    cache.put_round(_row(2, b"s", entry.shoe.id, round_id="newer"), entry)
    assert cache.has_round(OP, "new") and cache.has_round(OP, "newer")
    now[0] = 200.0
    cache.put_round(_row(2, b"s", entry.shoe.id, round_id="latest"), entry)  # sweeps the rest
    assert [cache.has_round(OP, r) for r in ("new", "newer", "latest")] == [False, False, True]
