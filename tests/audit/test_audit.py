"""`fairshoe collect rounds` and `fairshoe audit verify`: collected rounds pass; tampering fails.

Records are tampered three ways. Unsigned edits must fail on the signature, and so must a bare
payload put in place of a signed record. Edits re-signed with the genuine key (what an operator
holding the key could do) must fail on the replay, naming the field. Rounds the operator really
deals, with the genuine key, from the wrong shoe or the wrong place in a shoe must fail on the
shoe checks. Rules documents are unsigned: altering one must break the digest the signed records
commit to.

Every audit here trusts the operator's public keys as an auditor holds them: exported from the
key store and kept apart from the records (the ``trusted`` fixture). The ``keys.jwks.json`` a
collection carries is only a copy for the lab's own checks and is never the ``--keys`` given.
"""

from __future__ import annotations

import json
import random
import re
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.audit_kit import findings, load, pick_round, run, save, simple_player, summary
from support.audit_tampers import TAMPERS, Tamper, pays, six_to_five, tamper_payout

from game_math.games import game_rules
from game_math.round import Round
from game_math.rules import rules_from_dict
from rng_service.cli.main import main
from rng_service.crypto.keys import KeyStore, SigningKey, export_jwk
from rng_service.records.schema import (
    KEYS_FILE,
    REVEALS_SUBDIR,
    ROUNDS_SUBDIR,
    RULES_SCHEMA,
    RULES_SUBDIR,
    RecordWriter,
    ShoeRef,
    collect_rounds,
    play_round,
    random_bets,
    rfc3339_now,
    round_payload,
)
from rng_service.rng.shoe import Shoe, new_server_seed, seed_commitment, shoe_cards

ROUNDS = {"snap": 6, "double-deck": 6, "double-exposure": 30, "multi-hand": 12}
#: the verdict of an audit without a checkpoint
NOT_JUDGED = "completeness not judged"


def audit(capsys: pytest.CaptureFixture[str], keys: Path, *paths: Path,
          allow: str | None = None) -> tuple[int, str]:
    """`fairshoe audit verify PATHS --keys KEYS`, accepting the custom rule set ``allow``."""
    extra = ("--allow-custom-rules", allow) if allow else ()
    return run(capsys, "audit", "verify", *map(str, paths), "--keys", str(keys), *extra)


@pytest.fixture(scope="module")
def collected(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Rounds of every game through ``collect_rounds`` (what the command runs), signed with a key
    from a key store; the public keys' copy beside them, as the command writes it."""
    base = tmp_path_factory.mktemp("collected")
    store = KeyStore(base / "keystore")
    store.create()
    key = store.load_signing_key()
    for game, count in ROUNDS.items():
        writer = RecordWriter(base / game, key)
        collect_rounds(game_rules(game), count, writer, simple_player, client_seed="lab ✓".encode())
        (base / game / KEYS_FILE).write_text(export_jwk(store.public_keys()))
    return base


@pytest.fixture(scope="module")
def trusted(tmp_path_factory: pytest.TempPathFactory, collected: Path) -> Path:
    """The operator's public keys as the auditor obtained them: exported from the key store on
    their own, not read from beside the records."""
    path = tmp_path_factory.mktemp("auditor") / "operator-keys.jwks.json"
    path.write_text(export_jwk(KeyStore(collected / "keystore").public_keys()))
    return path


def test_collect_rounds_command_output_verifies(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    out_dir = tmp_path / "out"
    code, out = run(capsys, "collect", "rounds", "--game", "snap", "--rounds", "5", "--out",
                    str(out_dir), "--key-store", str(tmp_path / "keys"), "--client-seed", "x")
    assert code == 0, out
    assert len(list((out_dir / ROUNDS_SUBDIR).iterdir())) == 5
    assert len(list((out_dir / REVEALS_SUBDIR).iterdir())) == 5  # snap: a shoe per round
    assert not list(out_dir.rglob("*.key"))  # the private key stays in the key store
    # the command must not tell the auditor to trust the keys lying beside the records
    assert f"--keys {out_dir / KEYS_FILE}" not in out
    hint = next(line for line in out.splitlines() if line.startswith("verify with:"))
    assert "independently" in hint and str(out_dir / KEYS_FILE) not in hint.split("(")[0]
    # the operator hands the public keys over on their own; the auditor passes those
    operator_keys = tmp_path / "auditor" / "operator.jwks.json"
    operator_keys.parent.mkdir()
    code, _ = run(capsys, "keys", "export", "--dir", str(tmp_path / "keys"), "--out",
                  str(operator_keys))
    assert code == 0
    operator = re.search(r"--operator (\S+)", hint)  # the collection's own log
    assert operator is not None
    code, out = run(capsys, "audit", "verify", str(out_dir), "--keys", str(operator_keys),
                    "--operator", operator.group(1))
    assert code == 0, out
    assert summary(out).startswith("5 rounds: 5 OK, 0 FAIL\n")
    assert summary(out).splitlines()[-1].startswith(f"audit PASS, {NOT_JUDGED}")


def copy_game(collected: Path, game: str, tmp_path: Path) -> Path:
    out = tmp_path / game
    shutil.copytree(collected / game, out)
    return out


def signing_key(collected: Path) -> SigningKey:
    return KeyStore(collected / "keystore").load_signing_key()


def test_collected_rounds_of_every_game_verify(trusted: Path, collected: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    code, out = audit(capsys, trusted, collected)
    assert code == 0, out
    found = findings(out)
    rounds = [k for k in found if k[0] == "round"]
    assert len(rounds) == sum(ROUNDS.values())
    assert all(status == "OK" for status, _, _ in found.values())
    reveals = len(list(collected.glob(f"*/{REVEALS_SUBDIR}/*.json")))
    assert sum(1 for k in found if k[0] == "shoe") == reveals
    # double exposure: 30 rounds overrun the cut card, so shoes are shared and reshuffled
    de_reveals = len(list((collected / "double-exposure" / REVEALS_SUBDIR).iterdir()))
    assert 2 <= de_reveals < ROUNDS["double-exposure"]
    # one rules document per collection, each a built-in rule set, listed once in the summary
    digests = {game_rules(game).digest() for game in ROUNDS}
    assert {k[1] for k in found if k[0] == "rules"} == digests
    text = summary(out)
    assert text.startswith(f"{len(rounds)} rounds: {len(rounds)} OK, 0 FAIL")
    assert text.splitlines()[-1].startswith(f"audit PASS, {NOT_JUDGED}")
    assert "4 rules documents: 4 OK" in text
    # the keys.jwks.json copies beside the records: passed over, neither used nor a failure
    assert "4 keys files not used" in text and "skipped" not in text
    for game in ROUNDS:
        assert f"rules: {game} {game_rules(game).digest()[:16]} (built-in)" in text


@pytest.mark.parametrize("how", ["re-signed", "unsigned", "bare payload"])
@pytest.mark.parametrize("case", TAMPERS, ids=[t[0] for t in TAMPERS])
def test_tampered_record_is_caught(trusted: Path, collected: Path, tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str], *, case: Tamper,
                                   how: str) -> None:
    name, tamper, wanted = case
    game_dir = copy_game(collected, "multi-hand" if name != "rules" else "snap", tmp_path)
    path, env = pick_round(game_dir, wanted)
    round_id = env["payload"]["round_id"]
    field = tamper(env["payload"])
    if how == "bare payload":  # the edited payload alone, no envelope, in place of the record
        path.write_text(json.dumps(env["payload"]), encoding="utf-8")
    else:
        save(path, env, signing_key(collected) if how == "re-signed" else None)
    code, out = audit(capsys, trusted, game_dir)
    assert code == 1
    found = findings(out)
    status, failed_field, message = found["round", round_id]
    assert status == "FAIL"
    assert failed_field is not None
    if how == "re-signed":
        assert failed_field.startswith(field), out
    elif how == "unsigned":
        assert failed_field == "signature.value" and "bad signature" in message
    else:
        assert failed_field == "signature" and "not a signed envelope" in message
    others = [v for k, v in found.items() if k != ("round", round_id)]
    assert others and all(v[0] == "OK" for v in others)  # only the tampered record fails
    assert summary(out).splitlines()[-1].startswith("audit FAIL")


def test_payout_failure_line_names_both_amounts(trusted: Path, collected: Path, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    game_dir = copy_game(collected, "snap", tmp_path)
    path, env = pick_round(game_dir, pays)
    field = tamper_payout(env["payload"])
    i = int(field.split("[")[1].split("]")[0])
    recorded = env["payload"]["wagers"][i]["returned"]
    save(path, env, signing_key(collected))
    _, out = audit(capsys, trusted, game_dir)
    round_id = env["payload"]["round_id"]
    assert (f"FAIL round {round_id}: {field} recorded {recorded}, replay {recorded // 2}"
            in out.splitlines())


def test_tampered_signature_and_key_id(trusted: Path, collected: Path, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    game_dir = copy_game(collected, "double-deck", tmp_path)
    paths = sorted((game_dir / ROUNDS_SUBDIR).iterdir())
    env = load(paths[0])
    value = env["signature"]["value"]
    env["signature"]["value"] = ("B" if value[0] != "B" else "C") + value[1:]
    save(paths[0], env, None)
    env2 = load(paths[1])
    env2["signature"]["key_id"] = "ed25519:" + "0" * 32
    save(paths[1], env2, None)
    code, out = audit(capsys, trusted, game_dir)
    found = findings(out)
    assert code == 1
    assert found["round", env["payload"]["round_id"]][:2] == ("FAIL", "signature.value")
    assert found["round", env2["payload"]["round_id"]][:2] == ("FAIL", "signature.key_id")


def busiest_reveal(game_dir: Path) -> Path:
    """The reveal of the shoe that dealt the most rounds."""
    rounds: dict[str, int] = {}
    for p in (game_dir / ROUNDS_SUBDIR).iterdir():
        shoe_id = load(p)["payload"]["shoe"]["id"]
        rounds[shoe_id] = rounds.get(shoe_id, 0) + 1
    return game_dir / REVEALS_SUBDIR / f"{max(rounds, key=lambda s: rounds[s])}.json"


@pytest.mark.parametrize("part", ["seed", "commitment"])
def test_tampered_reveal(trusted: Path, collected: Path, tmp_path: Path,
                         capsys: pytest.CaptureFixture[str], part: str) -> None:
    game_dir = copy_game(collected, "double-exposure", tmp_path)
    path = busiest_reveal(game_dir)
    env = load(path)
    value = env["payload"][part]
    env["payload"][part] = ("0" if value[0] != "0" else "1") + value[1:]
    save(path, env, signing_key(collected))
    code, out = audit(capsys, trusted, game_dir)
    assert code == 1
    found = findings(out)
    shoe_id = env["payload"]["shoe_id"]
    assert found["shoe", shoe_id][:2] == ("FAIL", "seed")
    rounds_of_shoe = [load(p)["payload"]["round_id"]
                      for p in (game_dir / ROUNDS_SUBDIR).iterdir()
                      if load(p)["payload"]["shoe"]["id"] == shoe_id]
    assert len(rounds_of_shoe) > 1  # a cut-card shoe: every round on it fails
    for round_id in rounds_of_shoe:
        assert found["round", round_id][:2] == ("FAIL", f"reveal.{part}")


def test_seed_the_shoe_rejects_fails_on_the_seed(trusted: Path, collected: Path, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """A seed of the wrong length whose commitment and round are re-signed to match it: only
    the shoe's own seed check (in shoe_cards) can catch it, and the audit must report it."""
    game_dir = copy_game(collected, "snap", tmp_path)
    key = signing_key(collected)
    shoe_id, first = first_shoe(game_dir)
    reveal_path = game_dir / REVEALS_SUBDIR / f"{shoe_id}.json"
    reveal = load(reveal_path)
    short = bytes.fromhex(reveal["payload"]["seed"])[: len(reveal["payload"]["seed"]) // 4]
    reveal["payload"]["seed"] = short.hex()
    reveal["payload"]["commitment"] = seed_commitment(short)
    save(reveal_path, reveal, key)
    record_path = game_dir / ROUNDS_SUBDIR / f"{first['round_id']}.json"
    record = load(record_path)
    record["payload"]["shoe"]["commitment"] = seed_commitment(short)
    save(record_path, record, key)
    code, out = audit(capsys, trusted, game_dir)
    assert code == 1
    failed = {k: v for k, v in findings(out).items() if v[0] != "OK"}
    assert set(failed) == {("shoe", shoe_id), ("round", first["round_id"])}, out
    assert failed["shoe", shoe_id][1] == "seed"
    assert f"seed has {len(short)} bytes" in failed["shoe", shoe_id][2]
    assert failed["round", first["round_id"]][1] == "reveal.seed"


def test_unrevealed_shoe_is_reported(trusted: Path, collected: Path, tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    game_dir = copy_game(collected, "double-exposure", tmp_path)
    path = busiest_reveal(game_dir)
    shoe_id = load(path)["payload"]["shoe_id"]
    path.unlink()
    code, out = audit(capsys, trusted, game_dir)
    assert code == 1
    found = findings(out)
    statuses = {k: v for k, v in found.items() if k[0] == "round"}
    unrevealed = [k for k, v in statuses.items() if v[0] == "UNREVEALED"]
    assert unrevealed and all(shoe_id in statuses[k][2] for k in unrevealed)
    assert all(v[0] == "OK" for k, v in statuses.items() if k not in unrevealed)
    # no commitment says the shoe was ever put in play: unrevealed, which fails
    assert f"{len(unrevealed)} unrevealed" in summary(out).splitlines()[0]
    assert summary(out).splitlines()[-1].startswith("audit FAIL")


def test_keys_beside_the_records_are_not_trusted(collected: Path, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    game_dir = copy_game(collected, "snap", tmp_path)
    stranger = tmp_path / "other.jwks.json"
    other = SigningKey.generate()
    stranger.write_text(export_jwk({other.key_id: other.public_key}))
    code, out = run(capsys, "audit", "verify", str(game_dir), "--keys", str(stranger))
    assert code == 1
    found = findings(out)
    signed = {k: v for k, v in found.items() if k[0] != "rules"}  # rules documents are unsigned
    assert signed and all(v[:2] == ("FAIL", "signature.key_id") for v in signed.values())
    with pytest.raises(SystemExit) as info:  # no --keys at all: a usage error
        main(["audit", "verify", str(game_dir)])
    assert info.value.code == 2


def test_damaged_and_duplicate_files(trusted: Path, collected: Path, tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    game_dir = copy_game(collected, "snap", tmp_path)
    first = sorted((game_dir / ROUNDS_SUBDIR).iterdir())[0]
    (game_dir / ROUNDS_SUBDIR / "truncated.json").write_bytes(first.read_bytes()[:100])
    shutil.copy(first, game_dir / ROUNDS_SUBDIR / "copy.json")
    code, out = audit(capsys, trusted, game_dir)
    assert code == 1
    lines = out.splitlines()
    assert any(line.startswith("FAIL file ") and "truncated.json" in line for line in lines)
    round_id = json.loads(first.read_bytes())["payload"]["round_id"]
    assert any(line.startswith(f"FAIL round {round_id}: round_id is also") for line in lines)


def test_missing_path_is_a_usage_error(tmp_path: Path, trusted: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    code, _ = audit(capsys, trusted, tmp_path / "nope")
    assert code == 2


# --- rules: built in, or documents beside the records ---------------------------------------


def round_ids(game_dir: Path) -> list[str]:
    return [load(p)["payload"]["round_id"] for p in sorted((game_dir / ROUNDS_SUBDIR).iterdir())]


def test_record_naming_another_games_rules_fails_on_game(
        trusted: Path, collected: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    game_dir = copy_game(collected, "snap", tmp_path)
    paths = sorted((game_dir / ROUNDS_SUBDIR).iterdir())
    builtin, documented = load(paths[0]), load(paths[1])
    builtin["payload"]["rules_digest"] = game_rules("double-deck").digest()
    save(paths[0], builtin, signing_key(collected))
    other_game = six_to_five("double-deck")  # a rules document, of another game
    RecordWriter(game_dir, signing_key(collected)).write_rules(other_game)
    documented["payload"]["rules_digest"] = other_game.digest()
    save(paths[1], documented, signing_key(collected))
    code, out = audit(capsys, trusted, game_dir, allow=other_game.digest())
    assert code == 1
    found = findings(out)
    for env in (builtin, documented):
        status, field, message = found["round", env["payload"]["round_id"]]
        assert (status, field) == ("FAIL", "game"), out
        assert message.startswith('recorded "snap", rule set ')
        assert message.endswith('is for "double-deck"')
    assert found["rules", other_game.digest()][0] == "OK"  # the document itself is genuine
    # unless the auditor allows it, a custom double-deck rule set fails as a document too
    code, out = audit(capsys, trusted, game_dir)
    assert findings(out)["rules", f"{other_game.digest()}.json"][:2] == ("FAIL", "rules.game")


@pytest.fixture(scope="module")
def custom(tmp_path_factory: pytest.TempPathFactory, collected: Path) -> Path:
    """Rounds under a custom rule set (6:5 blackjack), collected as the command would."""
    out = tmp_path_factory.mktemp("custom") / "lab"
    collect_rounds(six_to_five("snap"), 6, RecordWriter(out, signing_key(collected)),
                   simple_player)
    shutil.copy(collected / "snap" / KEYS_FILE, out / KEYS_FILE)
    return out


def test_custom_rules_verify_from_their_document(trusted: Path, custom: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    digest = six_to_five("snap").digest()
    assert [p.name for p in (custom / RULES_SUBDIR).iterdir()] == [f"{digest}.json"]
    code, out = audit(capsys, trusted, custom, allow=digest)  # snap's id, other rules: allowed
    assert code == 0, out
    text = summary(out)
    assert text.startswith("6 rounds: 6 OK") and "1 rules documents: 1 OK" in text
    assert text.splitlines()[-1].startswith("audit PASS")
    assert f"rules: snap {digest[:16]} (custom, allowed)" in text.splitlines()


def test_custom_rules_without_their_document_fail_and_say_what_to_pass(
        trusted: Path, custom: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    digest = six_to_five("snap").digest()
    code, out = audit(capsys, trusted, custom / ROUNDS_SUBDIR, custom / REVEALS_SUBDIR)
    assert code == 1
    found = findings(out)
    for round_id in round_ids(custom):
        status, field, message = found["round", round_id]
        assert (status, field) == ("FAIL", "rules_digest")
        assert message.startswith(f"{digest} is not a built-in rule set")
        assert f"pass its rules file (rules/{digest}.json" in message
    # the document passed by hand under any name: its content, not its name, says what it is
    renamed = tmp_path / "house-rules.json"
    shutil.copy(custom / RULES_SUBDIR / f"{digest}.json", renamed)
    code, out = audit(capsys, trusted, custom / ROUNDS_SUBDIR, custom / REVEALS_SUBDIR,
                      renamed, allow=digest)
    assert code == 0, out
    assert findings(out)["rules", digest][0] == "OK"


@pytest.mark.parametrize("where", ["payout", "dealer rule"])
def test_altered_rules_document_no_longer_matches_the_signed_digest(
        trusted: Path, custom: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        where: str) -> None:
    game_dir = tmp_path / "lab"
    shutil.copytree(custom, game_dir)
    digest = six_to_five("snap").digest()
    path = game_dir / RULES_SUBDIR / f"{digest}.json"
    doc = json.loads(path.read_text(encoding="utf-8"))
    assert doc["schema"] == RULES_SCHEMA
    if where == "payout":
        doc["rules"]["payouts"]["blackjack"] = "7:5"
    else:
        doc["rules"]["dealer"]["hits_soft_17"] = not doc["rules"]["dealer"]["hits_soft_17"]
    path.write_text(json.dumps(doc), encoding="utf-8")
    code, out = audit(capsys, trusted, game_dir)
    assert code == 1
    found = findings(out)
    real = rules_from_dict(doc["rules"]).digest()
    assert found["rules", path.name][:2] == ("FAIL", "rules")
    assert f"hash to {real}, not to the digest {digest}" in found["rules", path.name][2]
    for round_id in round_ids(game_dir):
        status, field, message = found["round", round_id]
        assert (status, field) == ("FAIL", "rules_digest")
        assert f"{path} is named after it but hashes to {real}: it was altered" in message


def test_malformed_rules_document_is_named(trusted: Path, collected: Path, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    game_dir = copy_game(collected, "snap", tmp_path)
    bad = game_dir / RULES_SUBDIR / "broken.json"
    data = game_rules("snap").to_dict()
    data["decks"] = "two"
    bad.write_text(json.dumps({"schema": RULES_SCHEMA, "rules": data}), encoding="utf-8")
    extra = game_dir / RULES_SUBDIR / "extra.json"
    extra.write_text(json.dumps({"schema": RULES_SCHEMA, "rules": game_rules("snap").to_dict(),
                                 "note": "unsigned"}), encoding="utf-8")
    code, out = audit(capsys, trusted, game_dir)
    assert code == 1
    found = findings(out)
    assert found["rules", "broken.json"][:2] == ("FAIL", "rules.decks")
    assert found["rules", "extra.json"][:2] == ("FAIL", "note")
    assert all(v[0] == "OK" for k, v in found.items() if k[0] == "round")


# --- rounds dealt off the rules, with the genuine key -------------------------------------------


def payloads_by_shoe(game_dir: Path) -> dict[str, list[dict[str, Any]]]:
    """Each shoe's round payloads, in shoe order."""
    shoes: dict[str, list[dict[str, Any]]] = {}
    for path in sorted((game_dir / ROUNDS_SUBDIR).iterdir()):
        payload = load(path)["payload"]
        shoes.setdefault(payload["shoe"]["id"], []).append(payload)
    for rounds in shoes.values():
        rounds.sort(key=lambda p: p["shoe"]["start"])
    return shoes


def write_round(game_dir: Path, key: SigningKey, rnd: Round, ref: ShoeRef,
                round_id: str | None = None) -> str:
    round_id = round_id or uuid.uuid4().hex
    payload = round_payload(rnd, round_id=round_id, shoe=ref, started_at=rfc3339_now(),
                            finished_at=rfc3339_now())
    RecordWriter(game_dir, key).write_round(payload, rnd.rules)
    return round_id


def deal_on(game_dir: Path, key: SigningKey, game: str, shoe_id: str, *, start: int,
            round_id: str | None = None) -> str:
    """A round really dealt from the revealed shoe ``shoe_id`` from position ``start``, with bets
    a player might place and the test player's decisions, signed with ``key``; its id (a record
    of ``round_id`` is replaced)."""
    reveal = load(game_dir / REVEALS_SUBDIR / f"{shoe_id}.json")["payload"]
    client_seed = bytes.fromhex(reveal["client_seed"])
    cards = shoe_cards(bytes.fromhex(reveal["seed"]), client_seed, reveal["decks"])
    rules = game_rules(game)
    bets = random_bets(rules, random.Random(start))
    rnd = Round(rules, cards, bets.hands, bets.side_bets, start=start, level=bets.level)
    while not rnd.finished:
        rnd.act(simple_player(rnd))
    ref = ShoeRef(shoe_id, reveal["commitment"], reveal["decks"], client_seed)
    return write_round(game_dir, key, rnd, ref, round_id)


def deal_new_shoe(game_dir: Path, key: SigningKey, game: str, decks: int) -> str:
    """A round played on the production path from a fresh ``decks``-deck shoe, and the shoe's
    reveal, signed with ``key``; the round's id."""
    rules = game_rules(game)
    shoe = Shoe.new(decks)
    shoe.start_round()
    rnd = play_round(rules, shoe, random_bets(rules, random.Random(decks)), simple_player)
    shoe.finish()
    round_id = write_round(game_dir, key, rnd, ShoeRef.of(shoe))
    RecordWriter(game_dir, key).write_reveal(shoe)
    return round_id


def first_shoe(game_dir: Path) -> tuple[str, dict[str, Any]]:
    shoe_id, rounds = min(payloads_by_shoe(game_dir).items())
    assert len(rounds) == 1  # a shoe per round
    return shoe_id, rounds[0]


def cut_card_shoe(game_dir: Path) -> tuple[str, list[dict[str, Any]]]:
    """A double-exposure shoe of three rounds or more, finished by its cut card."""
    cut = game_rules("double-exposure").cut_position
    assert cut is not None
    for shoe_id, rounds in sorted(payloads_by_shoe(game_dir).items()):
        if len(rounds) >= 3 and rounds[-1]["shoe"]["end"] >= cut:
            return shoe_id, rounds
    raise AssertionError("no collected shoe has what the test needs")


#: the rounds (id -> field) and reveals (shoe id -> field) that must fail, and nothing else
Expected = tuple[dict[str, str], dict[str, str]]


def from_decks(decks: int) -> Callable[[Path, SigningKey], Expected]:
    def setup(game_dir: Path, key: SigningKey) -> Expected:
        return {deal_new_shoe(game_dir, key, "snap", decks): "shoe.decks"}, {}
    return setup


def every_round_mid_shoe(game_dir: Path, key: SigningKey) -> Expected:
    shoe_id, first = first_shoe(game_dir)
    # the same round, dealt from card 37 of its shoe
    deal_on(game_dir, key, "multi-hand", shoe_id, start=37, round_id=first["round_id"])
    return {first["round_id"]: "shoe.start"}, {}


def every_round_twice(game_dir: Path, key: SigningKey) -> Expected:
    shoe_id, first = first_shoe(game_dir)
    second = deal_on(game_dir, key, "multi-hand", shoe_id, start=first["shoe"]["end"])
    return {first["round_id"]: "shoe.id", second: "shoe.id"}, {}


def past_the_cut(game_dir: Path, key: SigningKey) -> Expected:
    shoe_id, rounds = cut_card_shoe(game_dir)
    extra = deal_on(game_dir, key, "double-exposure", shoe_id,
                    start=rounds[-1]["shoe"]["end"])
    return {extra: "shoe.start"}, {}


def withheld(index: int) -> Callable[[Path, SigningKey], Expected]:
    """A cut-card shoe whose round ``index`` has no record: the next round starts at a gap."""
    def setup(game_dir: Path, key: SigningKey) -> Expected:
        _, rounds = cut_card_shoe(game_dir)
        (game_dir / ROUNDS_SUBDIR / f"{rounds[index]['round_id']}.json").unlink()
        return {rounds[index + 1]["round_id"]: "shoe.start"}, {}
    return setup


def overlapping(game_dir: Path, key: SigningKey) -> Expected:
    shoe_id, rounds = cut_card_shoe(game_dir)
    last = rounds[-1]
    deal_on(game_dir, key, "double-exposure", shoe_id, start=last["shoe"]["start"] - 1,
            round_id=last["round_id"])
    return {last["round_id"]: "shoe.start"}, {}


def shared_seed(game_dir: Path, key: SigningKey) -> Expected:
    """A second shoe id for the same seed: its reveal and a round's copy, both re-signed."""
    shoe_a, first = first_shoe(game_dir)
    shoe_b, copy_id = uuid.uuid4().hex, uuid.uuid4().hex
    reveal = load(game_dir / REVEALS_SUBDIR / f"{shoe_a}.json")
    reveal["payload"]["shoe_id"] = shoe_b
    save(game_dir / REVEALS_SUBDIR / f"{shoe_b}.json", reveal, key)
    copy = load(game_dir / ROUNDS_SUBDIR / f"{first['round_id']}.json")
    copy["payload"]["shoe"]["id"], copy["payload"]["round_id"] = shoe_b, copy_id
    save(game_dir / ROUNDS_SUBDIR / f"{copy_id}.json", copy, key)
    return ({first["round_id"]: "shoe.commitment", copy_id: "shoe.commitment"},
            {shoe_a: "commitment", shoe_b: "commitment"})


Deal = tuple[str, str, Callable[[Path, SigningKey], Expected]]
DEALS: list[Deal] = [
    ("1-deck snap shoe", "snap", from_decks(1)),
    ("16-deck snap shoe", "snap", from_decks(16)),
    ("every-round shoe from card 37", "multi-hand", every_round_mid_shoe),
    ("every-round shoe dealt twice", "multi-hand", every_round_twice),
    ("round after the cut card", "double-exposure", past_the_cut),
    ("gap between rounds", "double-exposure", withheld(1)),
    ("shoe not dealt from its first card", "double-exposure", withheld(0)),
    ("overlapping rounds", "double-exposure", overlapping),
    ("one seed, two shoe ids", "multi-hand", shared_seed),
]


@pytest.mark.parametrize("case", DEALS, ids=[d[0] for d in DEALS])
def test_round_dealt_off_the_rules_fails_on_its_shoe(trusted: Path, collected: Path,
                                                     tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str],
                                                     case: Deal) -> None:
    _, game, setup = case
    game_dir = copy_game(collected, game, tmp_path)
    rounds, reveals = setup(game_dir, signing_key(collected))
    code, out = audit(capsys, trusted, game_dir)
    assert code == 1
    failed = {k: v[1] for k, v in findings(out).items() if v[0] != "OK"}
    assert failed == ({("round", r): f for r, f in rounds.items()}
                      | {("shoe", s): f for s, f in reveals.items()}), out


@pytest.mark.parametrize(("decks", "cut"), [(6, "1/2"), (1, "2/3"), (8, "3/4"), (5, "5/7"),
                                            (2, "1/3")])
def test_cut_position_is_the_shoes(decks: int, cut: str) -> None:
    data = game_rules("double-exposure").to_dict()
    data["decks"], data["shuffle"]["cut_card"] = decks, cut
    rules = rules_from_dict(data)
    shoe = Shoe(shoe_id="s", seed=new_server_seed(), decks=decks, cut=rules.shuffle.cut_card)
    assert rules.cut_position == shoe.cut_position is not None
    assert game_rules("snap").cut_position is None  # reshuffled every round: no cut card


# --- files that are not signed envelopes --------------------------------------------------------


def test_files_under_rounds_and_reveals_that_are_not_envelopes_fail(
        trusted: Path, collected: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    game_dir = copy_game(collected, "snap", tmp_path)
    rounds_dir, reveals_dir = game_dir / ROUNDS_SUBDIR, game_dir / REVEALS_SUBDIR
    # a bare reveal payload in place of the signed reveal: its round cannot be checked either
    shoe_id, first = first_shoe(game_dir)
    reveal = reveals_dir / f"{shoe_id}.json"
    reveal.write_text(json.dumps(load(reveal)["payload"]), encoding="utf-8")
    strays = [rounds_dir / "notes.txt", rounds_dir / ".hidden.json", reveals_dir / KEYS_FILE]
    strays[0].write_text("round 7 looked fine", encoding="utf-8")
    strays[1].write_text("{}", encoding="utf-8")
    shutil.copy(game_dir / KEYS_FILE, strays[2])  # keys are passed over only outside these
    code, out = audit(capsys, trusted, game_dir)
    assert code == 1
    failed = {k: v for k, v in findings(out).items() if v[0] != "OK"}
    assert set(failed) == {("shoe", shoe_id), ("round", first["round_id"]),
                           *(("file", str(p)) for p in strays)}, out
    assert failed["shoe", shoe_id][1:] == ("signature", "is missing: the file holds a bare "
                                           "payload, not a signed envelope")
    assert failed["round", first["round_id"]][1] == "shoe.id"
    for stray in strays:
        assert "not a signed envelope" in failed["file", str(stray)][2]


def test_any_other_file_is_skipped_and_fails_the_audit(
        trusted: Path, collected: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    game_dir = copy_game(collected, "snap", tmp_path)
    (game_dir / "notes.json").write_text('{"comment": "an unsigned note"}', encoding="utf-8")
    code, out = audit(capsys, trusted, game_dir)
    assert code == 1
    assert all(v[0] == "OK" for v in findings(out).values())
    text = summary(out)
    assert text.startswith("6 rounds: 6 OK") and "1 skipped" in text
    assert text.splitlines()[-1].startswith(f"audit FAIL, {NOT_JUDGED}: 1 checks FAIL")
    # a file named like the keys copy is passed over only if it is a JWK Set
    (game_dir / "notes.json").unlink()
    (game_dir / KEYS_FILE).write_text('{"keys": "none"}', encoding="utf-8")
    code, out = audit(capsys, trusted, game_dir)
    assert code == 1
    assert findings(out)["file", str(game_dir / KEYS_FILE)][0] == "FAIL"


# --- void rounds --------------------------------------------------------------------------------


def void_mid_play(game_dir: Path, key: SigningKey) -> Path:
    """A multi-hand round voided by a malfunction after the player's first decision, recorded and
    revealed as the service does it; the record's path."""
    rules = game_rules("multi-hand")
    for attempt in range(200):
        shoe = Shoe.new(rules.decks)
        shoe.start_round()
        bets = random_bets(rules, random.Random(attempt))
        rnd = Round(rules, shoe.cards, bets.hands, bets.side_bets, level=bets.level)
        if not rnd.finished:
            rnd.act(simple_player(rnd))
        if rnd.finished or any(w.returned is not None for w in rnd.wagers):
            continue  # only a round with no settled wager may be voided
        rnd.void("malfunction: table display fault")
        shoe.take(rnd.position)
        shoe.finish()
        round_id = write_round(game_dir, key, rnd, ShoeRef.of(shoe))
        RecordWriter(game_dir, key).write_reveal(shoe)
        return game_dir / ROUNDS_SUBDIR / f"{round_id}.json"
    raise AssertionError("no round lasted past its first decision")


def settled_round_recorded_void(game_dir: Path, key: SigningKey) -> tuple[Path, str]:
    path, env = pick_round(game_dir, lambda p: bool(p["actions"]))
    p = env["payload"]
    p["status"], p["void_reason"] = "void", "malfunction: table display fault"
    for item in (*p["wagers"], *p["hands"]):
        item["outcome"] = "void"
    for wager in p["wagers"]:
        wager["returned"] = wager["staked"]
    p["total_returned"] = p["total_staked"]
    save(path, env, key)
    return path, "status"


def void_payout_changed(game_dir: Path, key: SigningKey) -> tuple[Path, str]:
    path = void_mid_play(game_dir, key)
    env = load(path)
    env["payload"]["wagers"][0]["returned"] += 100
    save(path, env, key)
    return path, "wagers[0].returned"


@pytest.mark.parametrize("case", ["genuine", "payout changed", "settled round voided"])
def test_void_round(trusted: Path, collected: Path, tmp_path: Path,
                    capsys: pytest.CaptureFixture[str], case: str) -> None:
    game_dir = copy_game(collected, "multi-hand", tmp_path)
    key = signing_key(collected)
    if case == "genuine":
        path, field = void_mid_play(game_dir, key), None
    elif case == "payout changed":
        path, field = void_payout_changed(game_dir, key)
    else:
        path, field = settled_round_recorded_void(game_dir, key)
    round_id = load(path)["payload"]["round_id"]
    code, out = audit(capsys, trusted, game_dir)
    found = findings(out)
    others = [v for k, v in found.items() if k != ("round", round_id)]
    assert others and all(v[0] == "OK" for v in others)
    text = summary(out)
    if field is None:
        assert code == 0, out
        status, _, message = found["round", round_id]
        assert status == "OK" and message.endswith("(void)")
        assert "1 void" in text
    else:
        assert code == 1
        assert found["round", round_id][:2] == ("FAIL", field), out
