"""The service's transparency log on SQLite and PostgreSQL: what is logged and when (key first,
a shoe's commitment before its first round record, reveals, RNG draws), that a failed transaction
logs nothing, that checkpoints verify with the published key and proofs with the pure verifier,
and that two replicas playing concurrently keep one dense log."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
from support.service_helpers import EUR, OP, Harness

from game_math.round import Action, HandBet
from rng_service.core.errors import IllegalState, InvalidInput, NotFound
from rng_service.crypto.keys import KeyStore
from rng_service.log import (
    CompactRange,
    checkpoint_verifier,
    leaf_hash,
    parse_checkpoint,
    verify_checkpoint,
    verify_consistency,
    verify_inclusion,
)
from rng_service.records.schema import KEY_SCHEMA, SHOE_COMMITMENT_SCHEMA
from rng_service.service.audit import AuditService
from rng_service.service.ports import LeafKind, LogLeaf, Mode, Storage
from rng_service.service.rng_draws import RngDrawService
from rng_service.service.rounds import RoundService
from rng_service.service.translog import LogReader, log_origin
from rng_service.service.views import RoundView
from rng_service.storage import open_storage


def finish(h: Harness, view: RoundView, rounds: RoundService | None = None) -> RoundView:
    """Stand on everything, decline insurance."""
    service = rounds or h.rounds
    while view.status == "awaiting":
        legal = {a.action for a in view.legal_actions}
        action = (Action("even_money", accept=False) if "even_money" in legal
                  else Action("insurance", 0) if "insurance" in legal else Action("stand"))
        view = service.act(OP, view.round_id, action, hand_id=view.turn_hand,
                           expected_version=view.version, request_id=h.rid())
    return view


def play(h: Harness, game: str = "double-deck", player: str = "ann",
         rounds: RoundService | None = None) -> RoundView:
    service = rounds or h.rounds
    view = service.start_round(OP, player, game, mode=Mode.REAL, currency=EUR,
                               hands=[HandBet(1000)], request_id=h.rid())
    return finish(h, view, service)


def leaves(h: Harness) -> list[LogLeaf]:
    h.storage.integrate_log()  # PostgreSQL queues what it logs
    with h.storage.snapshot() as uow:
        return uow.list_leaves(OP, 0, 10**6)


def payload(leaf: LogLeaf) -> dict:  # type: ignore[type-arg]
    assert leaf.entry is not None
    return json.loads(leaf.entry)["payload"]  # type: ignore[no-any-return]


def test_what_is_logged_and_in_which_order(harness: Harness) -> None:
    h = harness
    h.deposit("ann", 1_000_000)
    views = [play(h) for _ in range(2)]
    logged = leaves(h)
    kinds = [leaf.kind for leaf in logged]
    assert kinds[0] is LeafKind.KEY and kinds.count(LeafKind.KEY) == 1
    key = payload(logged[0])
    assert key["schema"] == KEY_SCHEMA and key["key_id"] == h.signer.key_id
    assert key["jwk"]["kid"] == h.signer.key_id
    position = {(leaf.kind, leaf.ident): leaf.index for leaf in logged}
    for view in views:
        shoe_id = view.shoe.shoe_id
        commitment = position[(LeafKind.SHOE_COMMITMENT, shoe_id)]
        assert commitment < position[(LeafKind.ROUND, view.round_id)] < position[
            (LeafKind.SHOE_REVEAL, shoe_id)]
        leaf = logged[commitment]
        assert payload(leaf)["schema"] == SHOE_COMMITMENT_SCHEMA
        assert payload(leaf)["commitment"] == view.shoe.commitment
    # entries are the stored envelopes, byte for byte
    (record,), = h.sql("SELECT envelope FROM records WHERE round_id = ?", views[0].round_id)
    assert logged[position[(LeafKind.ROUND, views[0].round_id)]].entry == bytes(record)
    assert [leaf.index for leaf in logged] == list(range(len(logged)))


def test_the_next_shoe_is_committed_in_the_log_before_its_client_seed(harness: Harness) -> None:
    h = harness
    shoe = h.rounds.get_next_shoe(OP, "bob", "double-deck", mode=Mode.REAL)
    h.storage.integrate_log()
    with h.storage.snapshot() as uow:
        found = uow.find_leaf(OP, LeafKind.SHOE_COMMITMENT, shoe.shoe_id)
    assert found is not None


def test_a_failed_transaction_logs_nothing(harness: Harness) -> None:
    h = harness  # no deposit: the stake cannot be paid, so the new shoe is rolled back too
    with pytest.raises(IllegalState):
        h.rounds.start_round(OP, "ann", "double-deck", mode=Mode.REAL, currency=EUR,
                             hands=[HandBet(1000)], request_id=h.rid())
    assert leaves(h) == []
    with h.storage.snapshot() as uow:
        assert uow.log_size(OP) == 0


def test_rng_draws_log_their_record_and_reveal(harness: Harness) -> None:
    h = harness
    rng = RngDrawService(h.storage, signer=h.signer)
    drawn = rng.generate_integers(OP, count=3, minimum=1, maximum=6, request_id=h.rid())
    again = rng.generate_integers(OP, count=3, minimum=1, maximum=6, request_id="same")
    rng.generate_integers(OP, count=3, minimum=1, maximum=6, request_id="same")  # replayed
    logged = leaves(h)
    assert [(leaf.kind, leaf.ident) for leaf in logged] == [
        (LeafKind.KEY, h.signer.key_id), (LeafKind.RNG, drawn.draw_id),
        (LeafKind.RNG_REVEAL, drawn.draw_id), (LeafKind.RNG, again.draw_id),
        (LeafKind.RNG_REVEAL, again.draw_id)]
    assert logged[1].entry == drawn.record and logged[2].entry == drawn.reveal


def test_checkpoints_verify_with_the_published_key_and_proofs_with_the_verifier(
        harness: Harness) -> None:
    h = harness
    h.deposit("ann", 1_000_000)
    reader = LogReader(h.storage, h.signer)
    empty = reader.checkpoint(OP)
    assert empty.size == 0
    view = play(h)
    first = reader.checkpoint(OP)
    assert reader.checkpoint(OP) == first  # no new leaf: the stored one, not a new signature
    play(h)
    play(h)
    second = reader.checkpoint(OP)
    trusted = checkpoint_verifier(h.signer.public_key, log_origin(OP))
    old = verify_checkpoint(first.note, [trusted], origin=log_origin(OP))
    new = verify_checkpoint(second.note, [trusted], origin=log_origin(OP))
    assert (old.size, new.size) == (first.size, second.size) and old.size < new.size
    for leaf in leaves(h):
        if leaf.index < new.size:
            proof = reader.inclusion(OP, leaf.index, new.size)
            verify_inclusion(leaf.leaf_hash, leaf.index, new.size, proof, new.root_hash)
    verify_consistency(old.size, new.size, reader.consistency(OP, old.size, new.size),
                       old.root_hash, new.root_hash)
    proved = reader.prove(OP, LeafKind.ROUND, view.round_id)
    assert proved is not None
    (record,), = h.sql("SELECT envelope FROM records WHERE round_id = ?", view.round_id)
    checkpoint = verify_checkpoint(proved.checkpoint, [trusted])
    verify_inclusion(leaf_hash(bytes(record)), proved.leaf_index, proved.tree_size,
                     list(proved.hashes), checkpoint.root_hash)


def test_proof_arguments_out_of_range(harness: Harness) -> None:
    h = harness
    h.deposit("ann", 1_000_000)
    play(h)
    reader = LogReader(h.storage, h.signer)
    size = reader.checkpoint(OP).size
    with pytest.raises(NotFound) as missing:
        reader.inclusion(OP, size, size)
    assert missing.value.field == "leaf_index"
    with pytest.raises(InvalidInput) as bad:
        reader.inclusion(OP, 2, 2)
    assert bad.value.field == "leaf_index"
    with pytest.raises(InvalidInput) as bad:
        reader.inclusion(OP, 0, size + 1)
    assert bad.value.field == "tree_size"
    with pytest.raises(InvalidInput) as bad:
        reader.consistency(OP, 3, 2)
    assert bad.value.field == "from_size"
    with pytest.raises(InvalidInput) as bad:
        reader.consistency(OP, 0, size + 1)
    assert bad.value.field == "to_size"
    with pytest.raises(NotFound):
        reader.leaf_index(OP, LeafKind.ROUND, "f" * 32)


@pytest.mark.parametrize("backend", ["postgresql"])
def test_two_replicas_playing_concurrently_keep_one_dense_ordered_log(harness: Harness) -> None:
    h = harness
    players = [f"p{i}" for i in range(4)]
    for player in players:
        h.deposit(player, 1_000_000)
    replicas = [open_storage(h.url), open_storage(h.url)]
    services = [RoundService(s, vault=h.vault, signer=h.signer, shoe_source=h.shoes)
                for s in replicas]
    errors: list[BaseException] = []
    notes: list[str] = []
    playing = threading.Event()

    def work(i: int) -> None:
        try:
            for _ in range(4):
                play(h, player=players[i], rounds=services[i % 2])
        except BaseException as exc:
            errors.append(exc)

    def sign() -> None:  # a third replica answering GetCheckpoint all along
        watcher = open_storage(h.url)
        try:
            while playing.is_set():
                notes.append(LogReader(watcher, h.signer).checkpoint(OP).note)
        except BaseException as exc:
            errors.append(exc)
        finally:
            watcher.close()

    playing.set()
    signer = threading.Thread(target=sign)
    signer.start()
    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(players))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    playing.clear()
    signer.join()
    assert not errors
    logged = leaves(h)
    # every checkpoint signed while the replicas appended is of a real prefix of the log
    reference = CompactRange()
    roots = {0: reference.root()}
    for leaf in logged:
        reference.append(leaf.leaf_hash)
        roots[reference.size] = reference.root()
    signed = [parse_checkpoint(note).checkpoint for note in notes]
    assert len({c.size for c in signed}) > 1
    assert all(roots[c.size] == c.root_hash for c in signed)
    assert [leaf.index for leaf in logged] == list(range(len(logged)))
    assert sum(leaf.kind is LeafKind.ROUND for leaf in logged) == 16
    position = {(leaf.kind, leaf.ident): leaf.index for leaf in logged}
    for leaf in logged:
        if leaf.kind is LeafKind.ROUND:
            shoe_id = payload(leaf)["shoe"]["id"]
            assert position[(LeafKind.SHOE_COMMITMENT, shoe_id)] < leaf.index
    reader = LogReader(replicas[1], h.signer)
    checkpoint = verify_checkpoint(reader.checkpoint(OP).note,
                                   [checkpoint_verifier(h.signer.public_key, log_origin(OP))])
    assert checkpoint.size == len(logged)
    for replica in replicas:
        replica.close()


def test_a_records_proof_reuses_a_checkpoint_that_holds_it(harness: Harness) -> None:
    h = harness
    h.deposit("ann", 1_000_000)
    reader = LogReader(h.storage, h.signer)
    view = play(h)
    first = reader.checkpoint(OP)
    play(h)
    proved = reader.prove(OP, LeafKind.ROUND, view.round_id)
    assert proved is not None and proved.checkpoint == first.note  # no new signature needed
    assert reader.checkpoint(OP).size > first.size  # while GetCheckpoint covers every leaf
    assert len(h.sql("SELECT size FROM log_checkpoints")) == 2


def test_a_log_export_in_small_pages_proves_every_leaf(harness: Harness, tmp_path: Path) -> None:
    h = harness
    h.deposit("ann", 1_000_000)
    for _ in range(3):
        play(h)
    store = KeyStore(tmp_path / "keys")
    store.create()
    out = tmp_path / "out"
    stats = AuditService(h.storage, store).export_log(out, OP, batch_size=3)
    checkpoint = parse_checkpoint((out / "log" / "checkpoint").read_text()).checkpoint
    lines = [json.loads(line) for line in (out / "log" / "leaves.jsonl").read_text().splitlines()]
    assert stats.leaves == len(lines) == checkpoint.size == len(leaves(h))
    for line in lines:
        verify_inclusion(leaf_hash((out / line["path"]).read_bytes()), line["index"],
                         checkpoint.size, [bytes.fromhex(p) for p in line["proof"]],
                         checkpoint.root_hash)


def test_the_base_origin_is_configurable(harness: Harness, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAIRSHOE_LOG_ORIGIN", "casino.example/fairshoe")
    store = KeyStore(tmp_path / "keys")
    store.create()
    note = AuditService(harness.storage, store).checkpoint(OP).note
    assert parse_checkpoint(note).checkpoint.origin == f"casino.example/fairshoe/{OP}"


class _OtherReplicaMergesFirst:
    """A storage whose queued leaves another replica's sequencer merges just before this one
    integrates (what a background sequencer does whenever it wins the log's row): this
    storage's own integration then finds the queue empty and merges nothing."""

    def __init__(self, mine: Storage, other: Storage) -> None:
        self._mine, self._other = mine, other

    def integrate_log(self, operator: str | None = None) -> int:
        self._other.integrate_log(operator)
        return self._mine.integrate_log(operator)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._mine, name)


@pytest.mark.parametrize("backend", ["postgresql"])
def test_a_record_merged_by_another_replica_meanwhile_is_found_and_proved(
        harness: Harness) -> None:
    """A record's leaf still queued when it is asked for, and merged by another replica's
    sequencer before this replica's own integration: the proof (GetRoundRecord's ``log``) and
    the index (GetInclusionProof by id) are of that leaf, not missing."""
    h = harness
    h.storage._sequencer.stop()  # type: ignore[attr-defined]  # its leaves stay queued
    h.deposit("ann", 1_000_000)
    mine = open_storage(h.url)
    try:
        mine._sequencer.stop()  # type: ignore[attr-defined]
        reader = LogReader(_OtherReplicaMergesFirst(mine, h.storage), h.signer)  # type: ignore[arg-type]
        first, second = play(h), play(h)
        with mine.snapshot() as uow:
            assert uow.find_leaf(OP, LeafKind.ROUND, first.round_id) is None  # queued
        proved = reader.prove(OP, LeafKind.ROUND, first.round_id)
        assert proved is not None
        third = play(h)
        index = reader.leaf_index(OP, LeafKind.ROUND, third.round_id)
        at = {(leaf.kind, leaf.ident): leaf for leaf in leaves(h)}
        leaf = at[(LeafKind.ROUND, first.round_id)]
        assert proved.leaf_index == leaf.index
        verify_inclusion(leaf.leaf_hash, leaf.index, proved.tree_size, proved.hashes,
                         parse_checkpoint(proved.checkpoint).checkpoint.root_hash)
        assert proved.tree_size > at[(LeafKind.ROUND, second.round_id)].index  # all merged
        assert index == at[(LeafKind.ROUND, third.round_id)].index
    finally:
        mine.close()
