"""Ways to tamper with a round record's payload, each with the field the audit must then name
and the rounds it applies to; and with a collection's log (:data:`LOG_TAMPERS`), each with what
the audit must then say: shared by the audit's tests (tests/audit/)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from game_math.games import game_rules
from game_math.rules import Rules, rules_from_dict
from rng_service.crypto.keys import SigningKey
from rng_service.log import parse_checkpoint, sign_checkpoint
from rng_service.records.schema import LOG_CHECKPOINT_FILE, LOG_LEAVES_FILE, LOG_SUBDIR
from support.audit_kit import load, save


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


def tamper_start(p: dict[str, Any]) -> str:
    p["shoe"]["start"] += 1
    return "shoe.start"


def tamper_decks(p: dict[str, Any]) -> str:
    p["shoe"]["decks"] -= 1
    return "shoe.decks"


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
    ("shoe start", tamper_start, lambda p: True),
    ("shoe decks", tamper_decks, lambda p: True),
]



# --- the log: ways to tamper with a collection's log/ (leaves.jsonl, its checkpoint) and with the
# files it lists. Each takes the collection and the key that signed it (its checkpoint too), and
# returns the texts the audit's lines must then hold (``|`` between two), without and with the
# genuine checkpoint given (--checkpoint); the leaves it touches lie far apart in leaves.jsonl,
# so that the workers read them in different chunks.


def _lines(lab: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in
            (lab / LOG_SUBDIR / LOG_LEAVES_FILE).read_text("utf-8").splitlines()]


def _write_lines(lab: Path, lines: Sequence[dict[str, Any] | str]) -> None:
    (lab / LOG_SUBDIR / LOG_LEAVES_FILE).write_text(
        "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines),
        "utf-8")


def _round_line(lines: list[dict[str, Any]], after: int) -> int:
    """The first line at or after ``after`` that lists a round record."""
    return next(i for i in range(after, len(lines)) if lines[i]["path"].startswith("rounds/"))


def leaf_changed(lab: Path, key: SigningKey) -> tuple[str, str]:
    """A round record re-signed with another service version: its leaf hash changed."""
    lines = _lines(lab)
    at = _round_line(lines, len(lines) // 2)
    path = lab / lines[at]["path"]
    envelope = load(path)
    envelope["payload"]["service_version"] = "9.9.9"
    save(path, envelope, key)
    wanted = f"does not prove {lines[at]['path']} is leaf {at}"
    return wanted, wanted


def proof_broken(lab: Path, key: SigningKey) -> tuple[str, str]:
    """A hash of one leaf's inclusion proof changed in leaves.jsonl."""
    lines = _lines(lab)
    at = 2 * len(lines) // 3
    first = lines[at]["proof"][0]
    lines[at]["proof"][0] = ("0" if first[0] != "0" else "1") + first[1:]
    _write_lines(lab, lines)
    wanted = f"does not prove {lines[at]['path']} is leaf {at}"
    return wanted, wanted


def checkpoint_resigned_wrong(lab: Path, key: SigningKey) -> tuple[str, str]:
    """The collection's own checkpoint re-signed by its key with another root: no leaf's proof
    holds against it (against the genuine checkpoint given, that it is another tree is said
    too)."""
    own = lab / LOG_SUBDIR / LOG_CHECKPOINT_FILE
    head = parse_checkpoint(own.read_bytes()).checkpoint
    wrong = dataclasses.replace(head, root_hash=hashlib.sha256(b"another tree").digest())
    own.write_text(sign_checkpoint(wrong, key), "utf-8")
    return "more leaves fail (only the first", "exported from another tree"


def leaf_missing(lab: Path, key: SigningKey) -> tuple[str, str]:
    """A line of leaves.jsonl deleted (its file kept): an envelope no line lists."""
    lines = _lines(lab)
    at = len(lines) // 3
    del lines[at]
    _write_lines(lab, lines)
    return "1 envelope files not in it", f"FAIL leaf {at}: is missing"


def file_missing(lab: Path, key: SigningKey) -> tuple[str, str]:
    """A round record deleted, its line kept."""
    lines = _lines(lab)
    at = _round_line(lines, len(lines) // 4)
    (lab / lines[at]["path"]).unlink()
    wanted = f"FAIL leaf {at}: path {lines[at]['path']} does not exist in the collection"
    return wanted, wanted


def file_listed_twice(lab: Path, key: SigningKey) -> tuple[str, str]:
    """A late line names the file an early one names, and a line the file the line before it
    names (in one chunk of 4 lines)."""
    lines = _lines(lab)
    early, late = 5, 4 * len(lines) // 5
    lines[late]["path"] = lines[early]["path"]
    lines[9]["path"] = lines[8]["path"]
    _write_lines(lab, lines)
    wanted = (f"FAIL leaf 9: path {lines[8]['path']} is also leaf 8: a file is one leaf"
              f"|FAIL leaf {late}: path {lines[early]['path']} is also leaf {early}")
    return wanted, wanted


def leaves_swapped(lab: Path, key: SigningKey) -> tuple[str, str]:
    """Two neighbouring lines swapped (across a chunk of 4 lines' end)."""
    lines = _lines(lab)
    lines[15], lines[16] = lines[16], lines[15]
    _write_lines(lab, lines)
    wanted = "FAIL leaf 15: index is listed again or out of order after leaf 16"
    return wanted, wanted


def line_malformed(lab: Path, key: SigningKey) -> tuple[str, str]:
    """A line of leaves.jsonl that is no JSON object: the reading ends there."""
    lines: list[dict[str, Any] | str] = list(_lines(lab))
    at = len(lines) - 5
    lines[at] = "{no"
    _write_lines(lab, lines)
    wanted = f"line {at + 1}: "
    return wanted, wanted


LogTamper = tuple[str, Callable[[Path, SigningKey], tuple[str, str]]]
LOG_TAMPERS: list[LogTamper] = [
    ("leaf changed", leaf_changed),
    ("proof broken", proof_broken),
    ("checkpoint re-signed wrong", checkpoint_resigned_wrong),
    ("leaf missing", leaf_missing),
    ("file missing", file_missing),
    ("file listed twice", file_listed_twice),
    ("leaves swapped", leaves_swapped),
    ("line malformed", line_malformed),
]
