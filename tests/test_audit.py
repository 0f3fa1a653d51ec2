"""`fairshoe collect rounds` and `fairshoe audit verify`: collected rounds pass; tampering fails.

Records are tampered two ways. Unsigned edits must fail on the signature. Edits re-signed with the
genuine key (what an operator holding the key could do) must fail on the replay, naming the field.
Rules documents are unsigned: altering one must break the digest the signed records commit to.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from game_math.games import game_rules
from game_math.round import Action, Round
from game_math.rules import Rules, rules_from_dict
from rng_service.cli import main
from rng_service.keys import KeyStore, SigningKey, export_jwk
from rng_service.records import (
    KEYS_FILE,
    REVEALS_SUBDIR,
    ROUNDS_SUBDIR,
    RULES_SCHEMA,
    RULES_SUBDIR,
    RecordWriter,
    collect_rounds,
    write_envelope,
)
from rng_service.signing import decode_envelope, sign_payload

ROUNDS = {"snap": 6, "double-deck": 6, "double-exposure": 30, "multi-hand": 12}
LINE = re.compile(r"^(OK|FAIL|UNREVEALED) +(round|shoe|rules|file) (\S+?):? (?:(\S+) )?(.*)$")

Envelope = dict[str, Any]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    with pytest.raises(SystemExit) as info:
        main(list(argv))
    return int(info.value.code or 0), capsys.readouterr().out


def simple_player(rnd: Round) -> Action:
    """A cheap stand-in for basic strategy (the audit does not depend on the strategy): it
    splits, doubles and hits often enough that the records hold every kind of decision."""
    legal = {la.action: la for la in rnd.legal_actions()}
    if "even_money" in legal:
        return Action("even_money", accept=False)
    if "insurance" in legal:
        return Action("insurance", 0)
    hand = rnd.hand(rnd.turn.hand or 0)
    values = {min(10, c % 13 + 1) for c in hand.cards}
    if "split" in legal and values & {1, 8}:
        return Action("split")
    if "double" in legal and hand.total in (10, 11):
        return Action("double", legal["double"].max_stake)
    return Action("hit" if hand.total < 17 and "hit" in legal else "stand")


@pytest.fixture(scope="module")
def collected(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Rounds of every game through ``collect_rounds`` (what the command runs), signed with a key
    from a key store; the public keys beside them, as the command writes them."""
    base = tmp_path_factory.mktemp("collected")
    store = KeyStore(base / "keystore")
    store.create()
    key = store.load_signing_key()
    for game, count in ROUNDS.items():
        writer = RecordWriter(base / game, key)
        collect_rounds(game_rules(game), count, writer, simple_player, client_seed="lab ✓".encode())
        (base / game / KEYS_FILE).write_text(export_jwk(store.public_keys()))
    return base


def test_collect_rounds_command_output_verifies(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    out_dir = tmp_path / "out"
    code, out = run(capsys, "collect", "rounds", "--game", "snap", "--rounds", "5", "--out",
                    str(out_dir), "--key-store", str(tmp_path / "keys"), "--client-seed", "x")
    assert code == 0, out
    assert len(list((out_dir / ROUNDS_SUBDIR).iterdir())) == 5
    assert len(list((out_dir / REVEALS_SUBDIR).iterdir())) == 5  # snap: a shoe per round
    assert not list(out_dir.rglob("*.key"))  # the private key stays in the key store
    code, out = run(capsys, "audit", "verify", str(out_dir), "--keys",
                    str(out_dir / KEYS_FILE))
    assert code == 0, out
    assert out.strip().splitlines()[-1].startswith("audit PASS: 5 rounds: 5 OK")


def copy_game(collected: Path, game: str, tmp_path: Path) -> Path:
    out = tmp_path / game
    shutil.copytree(collected / game, out)
    return out


def signing_key(collected: Path) -> SigningKey:
    return KeyStore(collected / "keystore").load_signing_key()


def findings(out: str) -> dict[tuple[str, str], tuple[str, str | None, str]]:
    """(kind, id) -> (status, field, message) for each record line."""
    result = {}
    for line in out.splitlines():
        m = LINE.match(line)
        if m and not line.startswith("audit "):
            status, kind, ident, field, message = m.groups()
            result[kind, ident] = (status, field if status != "OK" else None, message)
    return result


def test_collected_rounds_of_every_game_verify(collected: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    keys = collected / "snap" / "keys.jwks.json"
    code, out = run(capsys, "audit", "verify", str(collected), "--keys", str(keys))
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
    summary = out.strip().splitlines()[-1]
    assert summary.startswith(f"audit PASS: {len(rounds)} rounds: {len(rounds)} OK, 0 FAIL")
    assert "4 rules documents: 4 OK" in summary
    assert "4 skipped" in summary  # the keys.jwks.json files beside the records
    for game in ROUNDS:
        assert f"{game} {game_rules(game).digest()[:16]} (built-in)" in summary


def load(path: Path) -> Envelope:
    return decode_envelope(path.read_bytes())


def save(path: Path, envelope: Envelope, key: SigningKey | None) -> None:
    """Write ``envelope``, re-signed with ``key`` if given (else its old signature is kept)."""
    if key is not None:
        envelope = sign_payload(envelope["payload"], key)
    write_envelope(path, envelope)


def pick_round(game_dir: Path, wanted: Callable[[dict[str, Any]], bool]) -> tuple[Path, Envelope]:
    for path in sorted((game_dir / ROUNDS_SUBDIR).iterdir()):
        env = load(path)
        if wanted(env["payload"]):
            return path, env
    raise AssertionError("no collected round has what the test needs")


def other_card(code: str) -> str:
    return ("2S" if code != "2S" else "3S")


def tamper_card(p: dict[str, Any]) -> str:
    p["cards"][2] = other_card(p["cards"][2])
    return "cards[2]"


def tamper_payout(p: dict[str, Any]) -> str:
    i = next(i for i, w in enumerate(p["wagers"]) if w["returned"])
    p["wagers"][i]["returned"] *= 2
    return f"wagers[{i}].returned"


def tamper_action(p: dict[str, Any]) -> str:
    entry = p["actions"][0]
    entry["action"] = "stand" if entry["action"] == "hit" else "hit"
    return "actions"


def tamper_illegal_action(p: dict[str, Any]) -> str:
    p["actions"][0]["action"] = {"action": "double", "amount": 10**6}
    return "actions[0].action"


def six_to_five(game: str) -> Rules:
    """``game``'s rules, blackjack paying 6:5: a custom rule set the audit is not given."""
    data = game_rules(game).to_dict()
    data["payouts"]["blackjack"] = "6:5"
    return rules_from_dict(data)


def tamper_rules(p: dict[str, Any]) -> str:
    p["rules_digest"] = six_to_five(p["game"]).digest()
    return "rules_digest"


def tamper_commitment(p: dict[str, Any]) -> str:
    p["shoe"]["commitment"] = "0" * 64
    return "shoe.commitment"


def tamper_bet(p: dict[str, Any]) -> str:
    p["bets"]["hands"][0]["bet"] *= 2
    return "wagers[0].staked"


def has_actions(p: dict[str, Any]) -> bool:
    return bool(p["actions"]) and p["actions"][0]["action"] in ("hit", "stand")


def pays(p: dict[str, Any]) -> bool:
    return any(w["returned"] for w in p["wagers"])


def bet_can_double(p: dict[str, Any]) -> bool:
    """Doubling the first bet still replays, so the stake comparison is what fails: the bet stays
    within the limit, and no recorded double or insurance names an amount tied to the old bet."""
    level = game_rules(p["game"]).level(p["level"])
    return (2 * p["bets"]["hands"][0]["bet"] <= level.max_bet
            and not any(isinstance(e["action"], dict) and e["action"].get("amount")
                        for e in p["actions"]))


Tamper = tuple[str, Callable[[dict[str, Any]], str], Callable[[dict[str, Any]], bool]]
TAMPERS: list[Tamper] = [
    ("card", tamper_card, lambda p: True),
    ("payout", tamper_payout, pays),
    ("action", tamper_action, has_actions),
    ("illegal action", tamper_illegal_action, has_actions),
    ("rules", tamper_rules, lambda p: True),
    ("commitment", tamper_commitment, lambda p: True),
    ("bet", tamper_bet, bet_can_double),
]


@pytest.mark.parametrize("resign", [True, False], ids=["re-signed", "unsigned"])
@pytest.mark.parametrize("case", TAMPERS, ids=[t[0] for t in TAMPERS])
def test_tampered_record_is_caught(collected: Path, tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str], case: Tamper,
                                   resign: bool) -> None:
    name, tamper, wanted = case
    game_dir = copy_game(collected, "multi-hand" if name != "rules" else "snap", tmp_path)
    path, env = pick_round(game_dir, wanted)
    round_id = env["payload"]["round_id"]
    field = tamper(env["payload"])
    save(path, env, signing_key(collected) if resign else None)
    code, out = run(capsys, "audit", "verify", str(game_dir), "--keys",
                    str(game_dir / "keys.jwks.json"))
    assert code == 1
    found = findings(out)
    status, failed_field, message = found["round", round_id]
    assert status == "FAIL"
    assert failed_field is not None
    if resign:
        assert failed_field.startswith(field), out
    else:
        assert failed_field == "signature.value" and "bad signature" in message
    others = [v for k, v in found.items() if k != ("round", round_id)]
    assert others and all(v[0] == "OK" for v in others)  # only the tampered record fails
    assert out.strip().splitlines()[-1].startswith("audit FAIL")


def test_payout_failure_line_names_both_amounts(collected: Path, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    game_dir = copy_game(collected, "snap", tmp_path)
    path, env = pick_round(game_dir, pays)
    field = tamper_payout(env["payload"])
    i = int(field.split("[")[1].split("]")[0])
    recorded = env["payload"]["wagers"][i]["returned"]
    save(path, env, signing_key(collected))
    _, out = run(capsys, "audit", "verify", str(game_dir), "--keys",
                 str(game_dir / "keys.jwks.json"))
    round_id = env["payload"]["round_id"]
    assert (f"FAIL round {round_id}: {field} recorded {recorded}, replay {recorded // 2}"
            in out.splitlines())


def test_tampered_signature_and_key_id(collected: Path, tmp_path: Path,
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
    code, out = run(capsys, "audit", "verify", str(game_dir), "--keys",
                    str(game_dir / "keys.jwks.json"))
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
def test_tampered_reveal(collected: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                         part: str) -> None:
    game_dir = copy_game(collected, "double-exposure", tmp_path)
    path = busiest_reveal(game_dir)
    env = load(path)
    value = env["payload"][part]
    env["payload"][part] = ("0" if value[0] != "0" else "1") + value[1:]
    save(path, env, signing_key(collected))
    code, out = run(capsys, "audit", "verify", str(game_dir), "--keys",
                    str(game_dir / "keys.jwks.json"))
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


def test_unrevealed_shoe_is_reported(collected: Path, tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    game_dir = copy_game(collected, "double-exposure", tmp_path)
    path = busiest_reveal(game_dir)
    shoe_id = load(path)["payload"]["shoe_id"]
    path.unlink()
    code, out = run(capsys, "audit", "verify", str(game_dir), "--keys",
                    str(game_dir / "keys.jwks.json"))
    assert code == 1
    found = findings(out)
    statuses = {k: v for k, v in found.items() if k[0] == "round"}
    unrevealed = [k for k, v in statuses.items() if v[0] == "UNREVEALED"]
    assert unrevealed and all(shoe_id in statuses[k][2] for k in unrevealed)
    assert all(v[0] == "OK" for k, v in statuses.items() if k not in unrevealed)
    assert f"{len(unrevealed)} unrevealed" in out.strip().splitlines()[-1]


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


def test_damaged_and_duplicate_files(collected: Path, tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    game_dir = copy_game(collected, "snap", tmp_path)
    first = sorted((game_dir / ROUNDS_SUBDIR).iterdir())[0]
    (game_dir / ROUNDS_SUBDIR / "truncated.json").write_bytes(first.read_bytes()[:100])
    shutil.copy(first, game_dir / ROUNDS_SUBDIR / "copy.json")
    code, out = run(capsys, "audit", "verify", str(game_dir), "--keys",
                    str(game_dir / "keys.jwks.json"))
    assert code == 1
    lines = out.splitlines()
    assert any(line.startswith("FAIL file ") and "truncated.json" in line for line in lines)
    round_id = json.loads(first.read_bytes())["payload"]["round_id"]
    assert any(line.startswith(f"FAIL round {round_id}: round_id is also") for line in lines)


def test_missing_path_is_a_usage_error(tmp_path: Path, collected: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    code, _ = run(capsys, "audit", "verify", str(tmp_path / "nope"), "--keys",
                  str(collected / "snap" / "keys.jwks.json"))
    assert code == 2


# --- rules: built in, or documents beside the records ---------------------------------------


def audit(capsys: pytest.CaptureFixture[str], keys: Path, *paths: Path) -> tuple[int, str]:
    return run(capsys, "audit", "verify", *map(str, paths), "--keys", str(keys))


def round_ids(game_dir: Path) -> list[str]:
    return [load(p)["payload"]["round_id"] for p in sorted((game_dir / ROUNDS_SUBDIR).iterdir())]


def test_record_naming_another_games_rules_fails_on_game(
        collected: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    game_dir = copy_game(collected, "snap", tmp_path)
    paths = sorted((game_dir / ROUNDS_SUBDIR).iterdir())
    builtin, documented = load(paths[0]), load(paths[1])
    builtin["payload"]["rules_digest"] = game_rules("double-deck").digest()
    save(paths[0], builtin, signing_key(collected))
    other_game = six_to_five("double-deck")  # a rules document, of another game
    RecordWriter(game_dir, signing_key(collected)).write_rules(other_game)
    documented["payload"]["rules_digest"] = other_game.digest()
    save(paths[1], documented, signing_key(collected))
    code, out = audit(capsys, game_dir / KEYS_FILE, game_dir)
    assert code == 1
    found = findings(out)
    for env in (builtin, documented):
        status, field, message = found["round", env["payload"]["round_id"]]
        assert (status, field) == ("FAIL", "game"), out
        assert message.startswith('recorded "snap", rule set ')
        assert message.endswith('is for "double-deck"')
    assert found["rules", other_game.digest()][0] == "OK"  # the document itself is genuine


@pytest.fixture(scope="module")
def custom(tmp_path_factory: pytest.TempPathFactory, collected: Path) -> Path:
    """Rounds under a custom rule set (6:5 blackjack), collected as the command would."""
    out = tmp_path_factory.mktemp("custom") / "lab"
    collect_rounds(six_to_five("snap"), 6, RecordWriter(out, signing_key(collected)),
                   simple_player)
    shutil.copy(collected / "snap" / KEYS_FILE, out / KEYS_FILE)
    return out


def test_custom_rules_verify_from_their_document(custom: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    digest = six_to_five("snap").digest()
    assert [p.name for p in (custom / RULES_SUBDIR).iterdir()] == [f"{digest}.json"]
    code, out = audit(capsys, custom / KEYS_FILE, custom)
    assert code == 0, out
    summary = out.strip().splitlines()[-1]
    assert summary.startswith("audit PASS: 6 rounds: 6 OK") and "1 rules documents: 1 OK" in summary
    assert summary.endswith(f"rules: snap {digest[:16]} (custom)")


def test_custom_rules_without_their_document_fail_and_say_what_to_pass(
        custom: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    digest = six_to_five("snap").digest()
    code, out = audit(capsys, custom / KEYS_FILE, custom / ROUNDS_SUBDIR, custom / REVEALS_SUBDIR)
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
    code, out = audit(capsys, custom / KEYS_FILE, custom / ROUNDS_SUBDIR, custom / REVEALS_SUBDIR,
                      renamed)
    assert code == 0, out
    assert findings(out)["rules", digest][0] == "OK"


@pytest.mark.parametrize("where", ["payout", "dealer rule"])
def test_altered_rules_document_no_longer_matches_the_signed_digest(
        custom: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str) -> None:
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
    code, out = audit(capsys, game_dir / KEYS_FILE, game_dir)
    assert code == 1
    found = findings(out)
    real = rules_from_dict(doc["rules"]).digest()
    assert found["rules", path.name][:2] == ("FAIL", "rules")
    assert f"hash to {real}, not to the digest {digest}" in found["rules", path.name][2]
    for round_id in round_ids(game_dir):
        status, field, message = found["round", round_id]
        assert (status, field) == ("FAIL", "rules_digest")
        assert f"{path} is named after it but hashes to {real}: it was altered" in message


def test_malformed_rules_document_is_named(collected: Path, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    game_dir = copy_game(collected, "snap", tmp_path)
    bad = game_dir / RULES_SUBDIR / "broken.json"
    data = game_rules("snap").to_dict()
    data["decks"] = "two"
    bad.write_text(json.dumps({"schema": RULES_SCHEMA, "rules": data}), encoding="utf-8")
    extra = game_dir / RULES_SUBDIR / "extra.json"
    extra.write_text(json.dumps({"schema": RULES_SCHEMA, "rules": game_rules("snap").to_dict(),
                                 "note": "unsigned"}), encoding="utf-8")
    code, out = audit(capsys, game_dir / KEYS_FILE, game_dir)
    assert code == 1
    found = findings(out)
    assert found["rules", "broken.json"][:2] == ("FAIL", "rules.decks")
    assert found["rules", "extra.json"][:2] == ("FAIL", "note")
    assert all(v[0] == "OK" for k, v in found.items() if k[0] == "round")
