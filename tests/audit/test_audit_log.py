"""`fairshoe audit verify DIR --checkpoint FILE [--since FILE]`: the transparency log's guarantees.

Collections are built with the real signing code and the pure log core
(tests/support/log_export_helpers):
the key record, then per shoe its commitment, its rounds and its reveal, as the service logs them.
A complete log passes; every way of leaving something out or slipping something in fails, naming
the leaf index: a deleted round with its leaf line, a deleted trailing leaf, a deleted shoe, two
leaves reordered, a record replaced by another validly signed one, an extra signed record, a
checkpoint by an unknown key or of another log, a --since the checkpoint is not consistent with, a
forged frontier. Key records and shoe commitments are checked against the trusted keys, the
rounds and the reveals; the order facts (key record before its key's use, commitment before its
shoe's rounds and reveal) are checked from the leaf indices.
"""

from __future__ import annotations

import json
import re
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from support.audit_kit import run, simple_player, summary
from support.log_export_helpers import (
    ORIGIN,
    commitment_record,
    key_record,
    leaf_line,
    logged_collection,
    payload_of,
    read_lines,
    signed_checkpoint,
    tree_of,
    write_lines,
    write_log,
)

from game_math.games import game_rules
from rng_service.crypto.keys import SigningKey, export_jwk
from rng_service.crypto.signing import sign_and_encode
from rng_service.log import DEFAULT_ORIGIN
from rng_service.records.schema import (
    LOG_CHECKPOINT_FILE,
    LOG_CONSISTENCY_FILE,
    LOG_FRONTIER_FILE,
    LOG_SUBDIR,
    RecordWriter,
    collect_rounds,
)

GAMES = (("snap", 3), ("double-exposure", 5))
LEAF = re.compile(r"^FAIL leaf (\d+): ")

KEY = SigningKey.generate()


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """A collection with a discarded shoe's commitment among its leaves, and its leaf order."""
    root = tmp_path_factory.mktemp("logged") / "lab"
    order = logged_collection(root, KEY, GAMES, simple_player, discarded=1)
    return root, order


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("auditor") / "operator.jwks.json"
    path.write_text(export_jwk({KEY.key_id: KEY.public_key}))
    return path


@pytest.fixture
def lab(base: tuple[Path, list[str]], tmp_path: Path) -> tuple[Path, list[str]]:
    """A fresh copy of the collection, without a log yet."""
    root = tmp_path / "lab"
    shutil.copytree(base[0], root)
    return root, list(base[1])


def kept(tmp_path: Path, note: str, name: str = "checkpoint.note") -> Path:
    """A checkpoint the auditor obtained independently, in a file of its own."""
    path = tmp_path / name
    path.write_text(note, encoding="utf-8")
    return path


def logged(lab: tuple[Path, list[str]], tmp_path: Path, **kwargs: Any) -> tuple[Path, Path]:
    """The collection with its log written; the checkpoint the auditor keeps of it."""
    root, order = lab
    store = write_log(root, order, KEY, **kwargs)
    return root, kept(tmp_path, signed_checkpoint(store, store.size, KEY))


def verify(capsys: pytest.CaptureFixture[str], keys: Path, root: Path, *extra: str | Path
           ) -> tuple[int, str]:
    return run(capsys, "audit", "verify", str(root), "--keys", str(keys), *map(str, extra))


def failed_leaves(out: str) -> list[int]:
    return [int(m.group(1)) for line in out.splitlines() if (m := LEAF.match(line))]


def index_of(order: list[str], prefix: str, nth: int = 0) -> int:
    return [i for i, rel in enumerate(order) if rel.startswith(prefix)][nth]


# --- a complete log ------------------------------------------------------------------------------


def test_a_complete_log_passes_with_the_checkpoint(lab: tuple[Path, list[str]], tmp_path: Path,
                                                   keys: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    root, checkpoint = logged(lab, tmp_path)
    code, out = verify(capsys, keys, root, "--checkpoint", checkpoint)
    assert code == 0, out
    size = len(lab[1])
    assert f"OK   log {ORIGIN}  leaves [0, {size}) complete" in out
    text = summary(out)
    assert text.splitlines()[-1].startswith(f"audit PASS, complete against checkpoint {size}")
    assert f"log {ORIGIN}: leaves [0, {size}) complete against the checkpoint given" in text
    # key records and commitments have lines of their own; the next shoe, committed only, is in
    # play: reported, not failed
    assert re.search(r"^OK   key ed25519:\S+  the trusted key", out, re.M)
    assert "1 shoes in play (not finished: checked once revealed)" in text
    assert "in play (not revealed yet)" in out


def test_without_the_checkpoint_only_inclusion_is_checked(
        lab: tuple[Path, list[str]], tmp_path: Path, keys: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    root, _ = logged(lab, tmp_path)
    code, out = verify(capsys, keys, root)
    assert code == 0, out
    assert summary(out).splitlines()[-1].startswith(
        "audit PASS, completeness not judged (it needs a checkpoint obtained independently")
    # a deletion is not seen without the checkpoint (that is what the note says) ...
    lines = read_lines(root)
    gone = lines.pop(4)
    (root / gone["path"]).unlink()
    write_lines(root, lines)
    assert verify(capsys, keys, root)[0] == 0
    # ... but a replaced leaf is: its proof no longer leads to the collection's checkpoint
    target = root / lines[4]["path"]
    target.write_bytes(sign_and_encode({**payload_of(target)}, KEY) + b" ")
    code, out = verify(capsys, keys, root)
    assert code == 1 and failed_leaves(out) == [lines[4]["index"]], out


def test_a_collection_without_a_log_fails_against_a_checkpoint(
        lab: tuple[Path, list[str]], tmp_path: Path, keys: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    root, checkpoint = logged(lab, tmp_path)
    shutil.rmtree(root / LOG_SUBDIR)
    code, out = verify(capsys, keys, root, "--checkpoint", checkpoint)
    assert code == 1 and "log is missing: the collection has no log" in out, out


# --- what is left out ----------------------------------------------------------------------------


def test_a_deleted_round_and_its_leaf_line_fail_naming_the_leaf(
        lab: tuple[Path, list[str]], tmp_path: Path, keys: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    root, checkpoint = logged(lab, tmp_path)
    index = index_of(lab[1], "rounds/", 1)
    lines = read_lines(root)
    (root / lines.pop(index)["path"]).unlink()
    write_lines(root, lines)
    code, out = verify(capsys, keys, root, "--checkpoint", checkpoint)
    assert code == 1
    assert failed_leaves(out) == [index], out
    assert f"FAIL leaf {index}: is missing" in out


def test_a_deleted_trailing_leaf_fails(lab: tuple[Path, list[str]], tmp_path: Path, keys: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    root, checkpoint = logged(lab, tmp_path)
    lines = read_lines(root)
    last = lines.pop()
    (root / last["path"]).unlink()
    write_lines(root, lines)
    code, out = verify(capsys, keys, root, "--checkpoint", checkpoint)
    assert code == 1 and failed_leaves(out) == [last["index"]], out
    assert f"leaves [{last['index']}, {last['index'] + 1}) are not in the collection" in out


def test_the_trailing_rounds_of_a_cut_card_shoe_deleted_fail(
        lab: tuple[Path, list[str]], tmp_path: Path, keys: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Without the log, the last rounds of a cut-card shoe leave no trace (issue finding 1)."""
    root, order = lab
    _, checkpoint = logged(lab, tmp_path)
    reveal = max(i for i, rel in enumerate(order) if rel.startswith("reveals/"))
    last_round = reveal - 1
    assert order[last_round].startswith("rounds/")
    lines = [line for line in read_lines(root) if line["index"] != last_round]
    (root / order[last_round]).unlink()
    write_lines(root, lines)
    code, out = verify(capsys, keys, root, "--checkpoint", checkpoint)
    assert code == 1 and failed_leaves(out) == [last_round], out


def shoe_span(order: list[str], root: Path) -> range:
    """The leaves of the first snap shoe: its commitment, its round, its reveal."""
    first = index_of(order, "shoes/")
    shoe_id = payload_of(root / order[first])["shoe_id"]
    last = order.index(f"reveals/{shoe_id}.json")
    return range(first, last + 1)


def test_a_deleted_shoe_fails_naming_its_first_leaf(
        lab: tuple[Path, list[str]], tmp_path: Path, keys: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    root, order = lab
    _, checkpoint = logged(lab, tmp_path)
    span = shoe_span(order, root)
    for i in span:
        (root / order[i]).unlink()
    lines = [line for line in read_lines(root) if line["index"] not in span]
    write_lines(root, lines)
    code, out = verify(capsys, keys, root, "--checkpoint", checkpoint)
    assert code == 1 and failed_leaves(out) == [span[0]], out
    # renumbering the leaves after the gap does not help: their proofs are for other indices
    renumbered = [{**line, "index": i} for i, line in enumerate(lines)]
    write_lines(root, renumbered)
    code, out = verify(capsys, keys, root, "--checkpoint", checkpoint)
    assert code == 1 and failed_leaves(out)[0] == span[0], out
    assert f"FAIL leaf {span[0]}: proof does not prove" in out


def test_a_log_rebuilt_without_a_shoe_fails_against_the_kept_checkpoint(
        lab: tuple[Path, list[str]], tmp_path: Path, keys: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The operator holds the key and may sign a new tree without the shoe: the auditor's own
    checkpoint (or --since) is what catches it."""
    root, order = lab
    _, checkpoint = logged(lab, tmp_path)
    span = shoe_span(order, root)
    for i in span:
        (root / order[i]).unlink()
    rest = [rel for i, rel in enumerate(order) if i not in span]
    store = write_log(root, rest, KEY)
    code, out = verify(capsys, keys, root, "--checkpoint", checkpoint)
    assert code == 1
    assert f"{LOG_CHECKPOINT_FILE}: is a tree head of size {len(rest)}, the checkpoint given one " \
           f"of size {len(order)}" in out
    assert failed_leaves(out) == [len(rest)], out  # the leaves past the rewritten tree's end
    # a rewritten log of the same size: the root recomputed from it is not the checkpoint's
    rest.append(key_record(root, SigningKey.generate(), valid_from="2024-02-01T00:00:00Z"))
    rest.append(key_record(root, SigningKey.generate(), valid_from="2024-02-01T00:00:00Z"))
    rest.append(key_record(root, SigningKey.generate(), valid_from="2024-02-01T00:00:00Z"))
    store = write_log(root, rest, KEY)
    code, out = verify(capsys, keys, root, "--checkpoint", checkpoint)
    assert code == 1 and "do not hash to the checkpoint's root" in out, out
    # against the rewritten tree's own checkpoint, with the old one kept as --since
    rewritten = kept(tmp_path, signed_checkpoint(store, store.size, KEY), "new.note")
    code, out = verify(capsys, keys, root, "--checkpoint", rewritten, "--since", checkpoint)
    assert code == 1, out
    assert "FAIL log" in out and "frontier.json" in out


# --- what is moved, replaced or slipped in -------------------------------------------------------


def test_two_leaves_reordered_fail_naming_both(lab: tuple[Path, list[str]], tmp_path: Path,
                                               keys: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    root, checkpoint = logged(lab, tmp_path)
    lines = read_lines(root)
    i, j = index_of(lab[1], "rounds/", 3), index_of(lab[1], "rounds/", 4)
    lines[i]["path"], lines[j]["path"] = lines[j]["path"], lines[i]["path"]
    write_lines(root, lines)
    code, out = verify(capsys, keys, root, "--checkpoint", checkpoint)
    assert code == 1 and failed_leaves(out) == [i, j], out
    # the lines themselves swapped: the index order is broken
    lines = read_lines(root)
    lines[i]["path"], lines[j]["path"] = lines[j]["path"], lines[i]["path"]
    lines[i], lines[j] = lines[j], lines[i]
    write_lines(root, lines)
    code, out = verify(capsys, keys, root, "--checkpoint", checkpoint)
    assert code == 1 and i in failed_leaves(out), out


def test_a_record_replaced_by_another_validly_signed_one_fails(
        lab: tuple[Path, list[str]], tmp_path: Path, keys: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    root, checkpoint = logged(lab, tmp_path)
    index = index_of(lab[1], "rounds/", 2)
    path = root / lab[1][index]
    payload = payload_of(path)
    payload["service_version"] = "9.9.9"  # what the operator's key may sign: the round still
    path.write_bytes(sign_and_encode(payload, KEY))  # replays, and verifies on its own
    code, out = verify(capsys, keys, root, "--checkpoint", checkpoint)
    assert code == 1
    assert f"OK   round {payload['round_id']}" in out
    assert failed_leaves(out) == [index], out


def test_an_extra_signed_record_fails(lab: tuple[Path, list[str]], tmp_path: Path, keys: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    root, checkpoint = logged(lab, tmp_path)
    extra = tmp_path / "extra"
    collect_rounds(game_rules("snap"), 1, RecordWriter(extra, KEY), simple_player)
    added = [p for d in ("rounds", "reveals") for p in (extra / d).iterdir()]
    for path in added:
        shutil.copy(path, root / path.parent.name / path.name)
    code, out = verify(capsys, keys, root, "--checkpoint", checkpoint)
    assert code == 1
    for path in added:
        assert f"does not list {path.parent.name}/{path.name}: an envelope in the collection " \
               "that is no leaf of the log" in out
    # listed as a leaf past the checkpoint's size: the checkpoint does not hold it
    size = len(lab[1])
    lines = read_lines(root)
    lines.append({"index": size, "path": f"rounds/{added[0].name}", "proof": []})
    write_lines(root, lines)
    code, out = verify(capsys, keys, root, "--checkpoint", checkpoint)
    assert code == 1 and size in failed_leaves(out), out
    assert f"FAIL leaf {size}: index is beyond the checkpoint's {size} leaves" in out
    # inserted in the middle, the leaves after it renumbered: the first shifted one fails
    lines = read_lines(root)[:-1]
    at = index_of(lab[1], "rounds/", 1)
    lines.insert(at, {**lines[at], "path": f"rounds/{added[0].name}"})
    write_lines(root, [{**line, "index": i} for i, line in enumerate(lines)][:size])
    code, out = verify(capsys, keys, root, "--checkpoint", checkpoint)
    assert code == 1 and failed_leaves(out)[0] == at, out


# --- the checkpoints -----------------------------------------------------------------------------


def test_a_checkpoint_by_an_unknown_key_or_of_another_log_fails(
        lab: tuple[Path, list[str]], tmp_path: Path, keys: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    root, _ = logged(lab, tmp_path)
    store = tree_of(root, lab[1])
    stranger = kept(tmp_path, signed_checkpoint(store, store.size, SigningKey.generate()), "x")
    code, out = verify(capsys, keys, root, "--checkpoint", stranger)
    assert code == 1 and "FAIL log" in out and "no signature from a trusted key" in out, out
    other = kept(tmp_path, signed_checkpoint(store, store.size, KEY,
                                             origin=f"{DEFAULT_ORIGIN}/acme"), "y")
    code, out = verify(capsys, keys, root, "--checkpoint", other)
    assert code == 1 and f"is a checkpoint of the log {DEFAULT_ORIGIN}/acme, not of the " \
                         f"operator's log {ORIGIN}" in out, out
    # ... which is the log of the operator named
    code, out = verify(capsys, keys, root, "--checkpoint", other, "--operator", "acme")
    assert f"FAIL log {other}" not in out
    assert f"{LOG_CHECKPOINT_FILE}: is a checkpoint of the log {ORIGIN}" in out  # the export's


def test_since_checks_consistency(lab: tuple[Path, list[str]], tmp_path: Path, keys: Path,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    """An export from an earlier checkpoint on: its frontier (and a consistency proof) tie it to
    the checkpoint the auditor kept."""
    root, order = lab
    first = shoe_span(order, root)[-1] + 1  # after the first snap shoe
    store = tree_of(root, order)
    since = kept(tmp_path, signed_checkpoint(store, first, KEY), "since.note")
    checkpoint = kept(tmp_path, signed_checkpoint(store, store.size, KEY))
    fork = tree_of(root, [order[0], order[2], order[1], *order[3:]])  # two leaves swapped
    bad_since = kept(tmp_path, signed_checkpoint(fork, first, KEY), "fork.note")
    write_log(root, order, KEY, first=first, consistency=True)
    for rel in order[:first]:
        (root / rel).unlink()
    code, out = verify(capsys, keys, root, "--checkpoint", checkpoint, "--since", since)
    assert code == 0, out
    assert f"leaves [{first}, {store.size}) complete" in out
    # without --since, the export does not start at leaf 0
    code, out = verify(capsys, keys, root, "--checkpoint", checkpoint)
    assert code == 1 and f"says the export starts at leaf {first}, not 0" in out, out
    # a --since of another tree (two leaves swapped): not consistent
    code, out = verify(capsys, keys, root, "--checkpoint", checkpoint, "--since", bad_since)
    assert code == 1 and f"leaves [0, {first}) do not hash to the root of --since" in out, out
    assert "consistency.json" in out
    # a forged frontier: any hash changed breaks it
    frontier = root / LOG_SUBDIR / LOG_FRONTIER_FILE
    doc = json.loads(frontier.read_text())
    doc["hashes"][0] = "00" * 32
    frontier.write_text(json.dumps(doc))
    code, out = verify(capsys, keys, root, "--checkpoint", checkpoint, "--since", since)
    assert code == 1 and "do not hash to the root of --since" in out, out


def test_a_forged_frontier_without_since_fails(lab: tuple[Path, list[str]], tmp_path: Path,
                                               keys: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """Dropping the first leaves and claiming a frontier for them needs --since to be believed."""
    root, order = lab
    store = write_log(root, order, KEY, first=3)
    checkpoint = kept(tmp_path, signed_checkpoint(store, store.size, KEY))
    code, out = verify(capsys, keys, root, "--checkpoint", checkpoint)
    assert code == 1 and "frontier.json" in out and "starts at leaf 3" in out, out


def test_a_consistency_proof_that_does_not_hold_fails(
        lab: tuple[Path, list[str]], tmp_path: Path, keys: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    root, order = lab
    first = shoe_span(order, root)[-1] + 1
    store = write_log(root, order, KEY, first=first, consistency=True)
    since = kept(tmp_path, signed_checkpoint(store, first, KEY), "since.note")
    checkpoint = kept(tmp_path, signed_checkpoint(store, store.size, KEY))
    path = root / LOG_SUBDIR / LOG_CONSISTENCY_FILE
    doc = json.loads(path.read_text())
    doc["proof"][-1] = "11" * 32
    path.write_text(json.dumps(doc))
    code, out = verify(capsys, keys, root, "--checkpoint", checkpoint, "--since", since)
    assert code == 1 and "consistency.json" in out, out


def test_the_collections_checkpoint_must_be_the_one_given(
        lab: tuple[Path, list[str]], tmp_path: Path, keys: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    root, order = lab
    store = write_log(root, order, KEY)
    smaller = kept(tmp_path, signed_checkpoint(store, store.size - 1, KEY))
    code, out = verify(capsys, keys, root, "--checkpoint", smaller)
    assert code == 1
    assert f"{LOG_CHECKPOINT_FILE}: is a tree head of size {store.size}" in out
    assert failed_leaves(out) == [store.size - 1], out  # the leaf the checkpoint does not hold


# --- key records, commitments and their order ----------------------------------------------------


def test_a_key_record_after_its_keys_first_use_fails(
        lab: tuple[Path, list[str]], tmp_path: Path, keys: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    root, order = lab
    moved = [*order[1:3], order[0], *order[3:]]
    store = write_log(root, moved, KEY)
    checkpoint = kept(tmp_path, signed_checkpoint(store, store.size, KEY))
    code, out = verify(capsys, keys, root, "--checkpoint", checkpoint)
    assert code == 1 and failed_leaves(out) == [0, 1], out
    assert "but the key's record is leaf 2, after it" in out


def test_a_commitment_after_its_shoes_round_or_missing_fails(
        lab: tuple[Path, list[str]], tmp_path: Path, keys: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    root, order = lab
    span = shoe_span(order, root)
    moved = order[:]
    moved[span[0]], moved[span[1]] = moved[span[1]], moved[span[0]]  # the round first
    store = write_log(root, moved, KEY)
    checkpoint = kept(tmp_path, signed_checkpoint(store, store.size, KEY))
    code, out = verify(capsys, keys, root, "--checkpoint", checkpoint)
    assert code == 1 and failed_leaves(out) == [span[0]], out
    assert f"but its commitment is leaf {span[1]}, after it" in out
    # no commitment at all, in a log complete from leaf 0: the round and the reveal fail
    (root / order[span[0]]).unlink()
    rest = [rel for i, rel in enumerate(order) if i != span[0]]
    store = write_log(root, rest, KEY)
    checkpoint = kept(tmp_path, signed_checkpoint(store, store.size, KEY))
    code, out = verify(capsys, keys, root, "--checkpoint", checkpoint)
    assert code == 1 and failed_leaves(out) == [span[0], span[0] + 1], out
    assert "but its commitment is not in the log before it" in out


def test_key_records_are_the_trusted_keys(lab: tuple[Path, list[str]], tmp_path: Path,
                                          keys: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    root, _ = lab
    other = SigningKey.generate()
    both = tmp_path / "both.jwks.json"
    both.write_text(export_jwk({KEY.key_id: KEY.public_key, other.key_id: other.public_key}))
    rel = key_record(root, other)
    payload = payload_of(root / rel)
    # signed by another trusted key than the one it names
    (root / rel).write_bytes(sign_and_encode(payload, KEY))
    code, out = verify(capsys, both, root)
    assert code == 1
    assert f"FAIL key {other.key_id}: signature.key_id is {KEY.key_id}: a key record is signed " \
           "by the key it names" in out
    # naming itself but carrying another key's JWK
    payload["jwk"] = {**payload["jwk"], "x": json.loads(export_jwk(
        {KEY.key_id: KEY.public_key}))["keys"][0]["x"]}
    (root / rel).write_bytes(sign_and_encode(payload, other))
    code, out = verify(capsys, both, root)
    assert code == 1 and f"FAIL key {other.key_id}: jwk" in out, out


def test_a_commitment_must_match_its_shoes_rounds_and_reveal(
        lab: tuple[Path, list[str]], tmp_path: Path, keys: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    root, order = lab
    span = shoe_span(order, root)
    payload = payload_of(root / order[span[0]])
    commitment_record(root, KEY, shoe_id=payload["shoe_id"], commitment="ab" * 32,
                      game=payload["game"], decks=payload["decks"],
                      created_at=payload["created_at"])
    code, out = verify(capsys, keys, root)
    assert code == 1
    round_id = payload_of(root / order[span[1]])["round_id"]
    assert f"FAIL round {round_id}: shoe.commitment recorded" in out
    assert f"FAIL shoe {payload['shoe_id']}: commitment revealed" in out


def test_a_round_played_for_other_money_than_its_shoes_commitment_fails(
        lab: tuple[Path, list[str]], keys: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # demo play must never deal from a real-money shoe: a live round's mode is its shoe's
    root, order = lab
    span = shoe_span(order, root)
    commitment = root / order[span[0]]
    commitment.write_bytes(sign_and_encode({**payload_of(commitment), "mode": "DEMO"}, KEY))
    played = root / order[span[1]]
    round_id = payload_of(played)["round_id"]
    played.write_bytes(sign_and_encode({**payload_of(played), "mode": "REAL"}, KEY))
    code, out = verify(capsys, keys, root)
    assert code == 1
    assert (f'FAIL round {round_id}: mode recorded "REAL", but the shoe\'s commitment '
            f"{commitment.name} has \"DEMO\"") in out, out
    played.write_bytes(sign_and_encode({**payload_of(played), "mode": "DEMO"}, KEY))
    assert verify(capsys, keys, root)[0] == 0


def test_a_commitment_without_its_mode_fails(lab: tuple[Path, list[str]], keys: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    root, order = lab
    commitment = root / order[shoe_span(order, root)[0]]
    payload = payload_of(commitment)
    del payload["mode"]
    commitment.write_bytes(sign_and_encode(payload, KEY))
    code, out = verify(capsys, keys, root)
    assert code == 1 and f"FAIL commitment {payload['shoe_id']}: " in out, out
    assert "mode" in out


def test_a_seed_committed_for_two_shoes_fails(lab: tuple[Path, list[str]], keys: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    root, order = lab
    payload = payload_of(root / order[shoe_span(order, root)[0]])
    commitment_record(root, KEY, shoe_id="f" * 32, commitment=payload["commitment"],
                      game="snap", decks=payload["decks"], created_at=payload["created_at"])
    code, out = verify(capsys, keys, root)
    assert code == 1 and "is also another shoe's: a seed serves one shoe" in out, out


def test_a_shoe_committed_twice_differently_fails(lab: tuple[Path, list[str]], keys: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    root, order = lab
    span = shoe_span(order, root)
    payload = payload_of(root / order[span[0]])
    (root / "shoes" / "second.json").write_bytes(sign_and_encode(
        {**payload, "created_at": "2024-12-31T00:00:00.000Z", "decks": 1}, KEY))
    code, out = verify(capsys, keys, root)
    assert code == 1
    shoe_id = payload["shoe_id"]
    assert out.count(f"FAIL commitment {shoe_id}: shoe_id is committed twice, differently") == 2
    round_id = payload_of(root / order[span[1]])["round_id"]
    assert f"FAIL round {round_id}: shoe.id {shoe_id}: is committed twice, differently" in out


def test_a_commitment_signed_by_an_unknown_key_fails_alike_wherever_it_sorts(
        lab: tuple[Path, list[str]], keys: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A copy of a shoe's commitment signed by a key the auditor does not trust fails, and so
    does the shoe: the same lines whether its file sorts before the good one or after it (it
    once read "committed twice, differently" before and "its commitment ... failed" after)."""
    root, order = lab
    span = shoe_span(order, root)
    good = root / order[span[0]]
    payload = payload_of(good)
    outs = []
    for name in ("0" * 32, "f" * 32):
        copy = tmp_path / name / "lab"
        shutil.copytree(root, copy)
        (copy / "shoes" / f"{name}.json").write_bytes(
            sign_and_encode(payload, SigningKey.generate()))
        code, out = verify(capsys, keys, copy)
        assert code == 1, out
        outs.append(sorted(line.replace(name, "NAME") for line in out.splitlines()
                           if "unknown key id" not in line and not line.startswith("ok ")))
        unknown = [line for line in out.splitlines() if "unknown key id" in line]
        assert [line.split(":")[0] for line in unknown] == [
            f"FAIL round {payload_of(root / order[span[1]])['round_id']}",
            f"FAIL commitment {payload['shoe_id']}", f"FAIL shoe {payload['shoe_id']}"], out
    assert "committed twice" not in "\n".join(outs[0])
    assert outs[0] == outs[1]


# --- malformed log files: one FAIL line each, never a traceback ----------------------------------


HOSTILE_LINES = {
    "huge index": '{"index": ' + "9" * 5000 + ', "path": "rounds/x.json", "proof": []}',
    "deep nesting": "[" * 5000 + "]" * 5000,
    "not JSON": "index 3, path rounds/x.json",
    "lone surrogate": '{"index": 1, "path": "rounds/\\ud800.json", "proof": []}',
    "extra member": '{"index": 1, "path": "rounds/x.json", "proof": [], "kind": "round"}',
    "bad hex": '{"index": 1, "path": "rounds/x.json", "proof": ["zz' + "0" * 62 + '"]}',
    "short hash": '{"index": 1, "path": "rounds/x.json", "proof": ["abcd"]}',
    "too many hashes": json.dumps({"index": 1, "path": "rounds/x.json",
                                   "proof": ["00" * 32] * 70}),
    "negative index": '{"index": -1, "path": "rounds/x.json", "proof": []}',
    "boolean index": '{"index": true, "path": "rounds/x.json", "proof": []}',
    "duplicate member": '{"index": 1, "index": 2, "path": "rounds/x.json", "proof": []}',
    "empty line": "",
    "long line": json.dumps({"index": 1, "path": "rounds/" + "x" * 20_000, "proof": []}),
}


@pytest.mark.parametrize("name", sorted(HOSTILE_LINES))
def test_a_malformed_leaf_line_is_one_fail_line(
        name: str, lab: tuple[Path, list[str]], tmp_path: Path, keys: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    root, checkpoint = logged(lab, tmp_path)
    lines: list[dict[str, Any] | str] = list(read_lines(root))
    lines[1] = HOSTILE_LINES[name]
    write_lines(root, lines)
    code, out = verify(capsys, keys, root, "--checkpoint", checkpoint)
    assert code == 1, out
    bad = [line for line in out.splitlines() if "leaves.jsonl" in line and "FAIL" in line]
    assert len(bad) == 1 and "line 2" in bad[0], out
    assert all(line.isprintable() for line in out.splitlines())


@pytest.mark.parametrize("proof_bad", [
    (["0" * 63, "0" * 65], 0),  # the lengths add up, the hashes do not
    (["00" * 32, "AB" * 32], 1),
    (["00" * 32, "11" * 32, 5], 2),
    (["00" * 32, "00" * 31 + "0g"], 1),
    (["00" * 32, "00" * 32 + "\n"], 1),
], ids=["lengths", "upper case", "number", "not hex", "newline"])
def test_a_proof_names_its_first_hash_that_is_not_one(
        proof_bad: tuple[list[object], int], lab: tuple[Path, list[str]], tmp_path: Path,
        keys: Path, capsys: pytest.CaptureFixture[str]) -> None:
    proof, bad = proof_bad
    root, checkpoint = logged(lab, tmp_path)
    lines = read_lines(root)
    lines[3]["proof"] = proof
    write_lines(root, lines)
    code, out = verify(capsys, keys, root, "--checkpoint", checkpoint)
    fails = [line for line in out.splitlines() if "leaves.jsonl" in line and "FAIL" in line]
    assert code == 1 and len(fails) == 1, out
    assert f"line 4: proof[{bad}] is not a hash (64 lowercase hex digits) (leaf 3)" in fails[0]


@pytest.mark.parametrize("path", ["../lab/rounds/x.json", "/etc/passwd", "rounds/../keys/x.json",
                                  "rounds", "rules/x.json", "log/checkpoint", "rounds/",
                                  "rounds/x\nOK audit PASS.json"])
def test_a_leaf_path_outside_the_envelopes_fails_naming_the_leaf(
        path: str, lab: tuple[Path, list[str]], tmp_path: Path, keys: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    root, checkpoint = logged(lab, tmp_path)
    lines = read_lines(root)
    lines[2]["path"] = path
    write_lines(root, lines)
    code, out = verify(capsys, keys, root, "--checkpoint", checkpoint)
    assert code == 1 and 2 in failed_leaves(out), out
    assert all(line.isprintable() for line in out.splitlines())


def test_a_symlinked_leaf_fails(lab: tuple[Path, list[str]], tmp_path: Path, keys: Path,
                                capsys: pytest.CaptureFixture[str]) -> None:
    root, checkpoint = logged(lab, tmp_path)
    rel = lab[1][2]
    outside = tmp_path / "outside.json"
    shutil.move(root / rel, outside)
    (root / rel).symlink_to(outside)
    code, out = verify(capsys, keys, root, "--checkpoint", checkpoint)
    assert code == 1 and f"FAIL leaf 2: path {rel} is a symbolic link" in out, out


def test_a_duplicate_leaf_index_fails(lab: tuple[Path, list[str]], tmp_path: Path, keys: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    root, checkpoint = logged(lab, tmp_path)
    lines = read_lines(root)
    lines.insert(3, lines[2])
    write_lines(root, lines)
    code, out = verify(capsys, keys, root, "--checkpoint", checkpoint)
    assert code == 1 and "FAIL leaf 2: index is listed again or out of order" in out, out


@pytest.mark.parametrize("content", [
    b"", b"garbage", b"{}", b'{"size": 1, "hashes": []}', b'{"size": 99999999999999999999999, '
    b'"hashes": []}', b'{"size": 0, "hashes": [], "x": 1}', b"[" * 4000, b"\xff\xfe",
    b'{"size": 1, "hashes": ["' + b"AB" * 32 + b'"]}'])
def test_a_malformed_frontier_is_one_fail_line(
        content: bytes, lab: tuple[Path, list[str]], tmp_path: Path, keys: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    root, checkpoint = logged(lab, tmp_path)
    (root / LOG_SUBDIR / LOG_FRONTIER_FILE).write_bytes(content)
    code, out = verify(capsys, keys, root, "--checkpoint", checkpoint)
    assert code == 1, out
    assert sum(1 for line in out.splitlines() if "frontier.json" in line) == 1, out


def checkpoint_variants(note: str) -> dict[str, bytes]:
    text, _, sig = note.partition("\n\n")
    lines = text.split("\n")
    return {
        "garbage": b"not a note at all",
        "huge size": "\n".join([lines[0], "9" * 30, *lines[2:]]).encode() + b"\n" + sig.encode(),
        "bad signature": (text + "\n\n" + sig[:-8] + "AAAAAAA=\n").encode(),
        "other text": note.replace(lines[1], str(int(lines[1]) + 1), 1).encode(),
        "binary": b"\x00\xff" * 100,
        "too big": b"x" * (200 * 1024),
        "no signature": (text + "\n").encode(),
    }


@pytest.mark.parametrize("variant", ["garbage", "huge size", "bad signature", "other text",
                                     "binary", "too big", "no signature"])
def test_a_malformed_checkpoint_is_one_fail_line(
        variant: str, lab: tuple[Path, list[str]], tmp_path: Path, keys: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    root, checkpoint = logged(lab, tmp_path)
    checkpoint.write_bytes(checkpoint_variants(checkpoint.read_text())[variant])
    code, out = verify(capsys, keys, root, "--checkpoint", checkpoint)
    assert code == 1, out
    bad = [line for line in out.splitlines() if line.startswith("FAIL log")]
    assert len(bad) == 1 and str(checkpoint) in bad[0], out


def test_a_checkpoint_dated_outside_its_keys_validity_fails(
        lab: tuple[Path, list[str]], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root, checkpoint = logged(lab, tmp_path)  # dated 2025-01-02
    jwk = json.loads(export_jwk({KEY.key_id: KEY.public_key}))["keys"][0]
    retired = tmp_path / "retired.jwks.json"
    retired.write_text(json.dumps({"keys": [{**jwk, "valid_from": "2024-01-01T00:00:00Z",
                                             "valid_until": "2024-06-01T00:00:00Z"}]}))
    code, out = verify(capsys, retired, root, "--checkpoint", checkpoint)
    assert code == 1
    assert f"FAIL log {checkpoint}: is dated 2025-01-02T03:04:05Z, outside the validity of the " \
           "key that signed it" in out


def test_usage_errors(lab: tuple[Path, list[str]], tmp_path: Path, keys: Path,
                      capsys: pytest.CaptureFixture[str]) -> None:
    root, checkpoint = logged(lab, tmp_path)
    assert verify(capsys, keys, root, "--since", checkpoint)[0] == 2
    assert verify(capsys, keys, root, root, "--checkpoint", checkpoint)[0] == 2
    assert verify(capsys, keys, root, "--checkpoint", tmp_path / "nothing")[0] == 2
    assert verify(capsys, keys, root, "--checkpoint", checkpoint, "--operator", "a b")[0] == 2


def test_a_leaf_line_helper_round_trip(lab: tuple[Path, list[str]]) -> None:
    """The helper writes what the contract says: a proof per leaf, hex."""
    root, order = lab
    store = tree_of(root, order)
    line = json.loads(leaf_line(store, 1, order[1]))
    assert set(line) == {"index", "path", "proof"} and line["index"] == 1
    assert all(re.fullmatch(r"[0-9a-f]{64}", h) for h in line["proof"])


def test_a_flood_of_failing_leaves_stops_the_reading(
        lab: tuple[Path, list[str]], tmp_path: Path, keys: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    root, checkpoint = logged(lab, tmp_path)
    lines = read_lines(root)
    size = len(lines)
    flood = [{**lines[0], "index": size + k} for k in range(1500)]
    write_lines(root, lines + flood)
    code, out = verify(capsys, keys, root, "--checkpoint", checkpoint)
    assert code == 1
    assert f"leaves.jsonl: line {size + 1000}: read no further, 1000 leaves failed" in out, out
    assert len(failed_leaves(out)) == 20  # the rest are counted, not printed
    assert "980 more leaves fail" in out


def test_a_round_logged_twice_under_another_name_fails(
        lab: tuple[Path, list[str]], tmp_path: Path, keys: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    # the operator's own log holds a replayed record (same bytes, another file name) right
    # after the original, with a checkpoint it signed: complete, proven, and still a FAIL
    root, order = lab
    at = index_of(order, "rounds/")
    copy = f"rounds/{'f' * 32}.json"
    shutil.copy(root / order[at], root / copy)
    order.insert(at + 1, copy)
    root, checkpoint = logged((root, order), tmp_path)
    code, out = verify(capsys, keys, root, "--checkpoint", checkpoint)
    assert code == 1
    round_id = Path(order[at]).stem
    assert f"FAIL round {round_id}: round_id is also the id of" in out
    assert "complete against the checkpoint given" in summary(out)
    assert summary(out).splitlines()[-1].startswith(
        f"audit FAIL, complete against checkpoint {len(order)}: ")


def test_a_logged_key_the_auditor_does_not_trust_fails(
        lab: tuple[Path, list[str]], tmp_path: Path, keys: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    # the operator logs a key record of a key missing from --keys (self-signed, in order)
    root, order = lab
    other = SigningKey.generate()
    order.append(key_record(root, other))
    root, checkpoint = logged((root, order), tmp_path)
    code, out = verify(capsys, keys, root, "--checkpoint", checkpoint)
    assert code == 1, out
    assert re.search(rf"^FAIL key {re.escape(other.key_id)}: ", out, re.M), out


def test_a_checkpoint_from_the_future_or_a_split_view_since_fails(
        lab: tuple[Path, list[str]], tmp_path: Path, keys: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    root, order = lab
    store = write_log(root, order, KEY)
    future = kept(tmp_path, signed_checkpoint(store, store.size, KEY,
                                              when=datetime.now(UTC) + timedelta(days=1)))
    code, out = verify(capsys, keys, root, "--checkpoint", future)
    assert code == 1 and "in the future" in out, out
    # --since of the same size with another root (a split view), signed by the operator
    checkpoint = kept(tmp_path, signed_checkpoint(store, store.size, KEY), "now.note")
    fork = tree_of(root, [order[0], order[2], order[1], *order[3:]])
    split = kept(tmp_path, signed_checkpoint(fork, store.size, KEY), "split.note")
    code, out = verify(capsys, keys, root, "--checkpoint", checkpoint, "--since", split)
    assert code == 1, out
    assert "(a split view)" in out, out
