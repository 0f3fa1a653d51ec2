"""Collections with their transparency log, laid out as the log contract says an export writes
them, made with the real signing code and the pure log core (MemoryNodeStore, inclusion_proof,
sign_checkpoint) rather than with the service, so the audit's side is tested on its own.

:func:`logged_collection` collects rounds as ``fairshoe collect rounds`` does, adds the key record
and a commitment per shoe, and returns the envelope files in the order the service logs them (the
key record; then for each shoe its commitment, its rounds, its reveal). :func:`write_log` writes
``log/`` for any files given in leaf order: ``leaves.jsonl`` for ``[first, size)``, the frontier of
``[0, first)`` and the signed checkpoint.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from game_math.games import game_rules
from game_math.round import Action, Round
from rng_service.crypto.keys import SigningKey, public_key_jwk
from rng_service.crypto.signing import sign_and_encode
from rng_service.log import (
    DEFAULT_ORIGIN,
    Checkpoint,
    MemoryNodeStore,
    compact_range_at,
    consistency_proof,
    inclusion_proof,
    root_at,
    sign_checkpoint,
)
from rng_service.records.schema import (
    KEYS_SUBDIR,
    LOG_CHECKPOINT_FILE,
    LOG_CONSISTENCY_FILE,
    LOG_FRONTIER_FILE,
    LOG_LEAVES_FILE,
    LOG_SUBDIR,
    REVEALS_SUBDIR,
    ROUNDS_SUBDIR,
    SHOES_SUBDIR,
    RecordWriter,
    collect_rounds,
    key_payload,
    rules_digest,
    shoe_commitment_payload,
)
from rng_service.rng.shoe import Shoe

ORIGIN = f"{DEFAULT_ORIGIN}/default"  # the operator "default"'s log
WHEN = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)


def write_envelope(root: Path, rel: str, payload: dict[str, Any], key: SigningKey) -> str:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(sign_and_encode(payload, key))
    return rel


def key_record(root: Path, key: SigningKey, valid_from: str = "2024-01-01T00:00:00Z") -> str:
    """keys/<key id>.json: the key's record, signed by itself."""
    payload = key_payload(key_id=key.key_id, jwk=public_key_jwk(key.public_key),
                          valid_from=valid_from)
    return write_envelope(root, f"{KEYS_SUBDIR}/{key.key_id}.json", payload, key)


def commitment_record(root: Path, key: SigningKey, *, shoe_id: str, commitment: str, game: str,
                      decks: int, created_at: str, mode: str = "REAL") -> str:
    payload = shoe_commitment_payload(
        shoe_id=shoe_id, commitment=commitment, game=game,
        rules_digest=rules_digest(game_rules(game)), decks=decks, mode=mode,
        created_at=created_at)
    return write_envelope(root, f"{SHOES_SUBDIR}/{shoe_id}.json", payload, key)


def payload_of(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_bytes())["payload"]
    return data


def logged_collection(root: Path, key: SigningKey, games: Sequence[tuple[str, int]],
                      player: Callable[[Round], Action], *, discarded: int = 0) -> list[str]:
    """Rounds of each (game, count) collected into ``root``, the key record and a commitment per
    shoe (and ``discarded`` shoes committed, never dealt nor revealed); the envelope files, as
    paths relative to ``root``, in the order the service would log them."""
    order = [key_record(root, key)]
    for game, count in games:
        before = {p.name for p in (root / ROUNDS_SUBDIR).glob("*.json")}
        collect_rounds(game_rules(game), count, RecordWriter(root, key), player)
        rounds = [payload_of(p) for p in sorted((root / ROUNDS_SUBDIR).glob("*.json"))
                  if p.name not in before]
        by_shoe: dict[str, list[dict[str, Any]]] = {}
        for rnd in sorted(rounds, key=lambda r: (r["started_at"], r["shoe"]["start"])):
            by_shoe.setdefault(rnd["shoe"]["id"], []).append(rnd)
        for shoe_id, dealt in by_shoe.items():
            dealt.sort(key=lambda r: r["shoe"]["start"])
            shoe = dealt[0]["shoe"]
            order.append(commitment_record(root, key, shoe_id=shoe_id,
                                           commitment=shoe["commitment"], game=game,
                                           decks=shoe["decks"],
                                           created_at=dealt[0]["started_at"]))
            order += [f"{ROUNDS_SUBDIR}/{r['round_id']}.json" for r in dealt]
            order.append(f"{REVEALS_SUBDIR}/{shoe_id}.json")
    for _ in range(discarded):
        shoe = Shoe.new(game_rules("snap").decks)
        order.append(commitment_record(root, key, shoe_id=shoe.id, commitment=shoe.commitment,
                                       game="snap", decks=shoe.decks,
                                       created_at="2025-01-01T00:00:00.000Z"))
    return order


def tree_of(root: Path, entries: Sequence[str]) -> MemoryNodeStore:
    """The log whose leaves are the files ``entries`` (relative to ``root``), in order."""
    store = MemoryNodeStore()
    for rel in entries:
        store.append_entry((root / rel).read_bytes())
    return store


def signed_checkpoint(store: MemoryNodeStore, size: int, key: SigningKey, *,
                      origin: str = ORIGIN, when: datetime | None = WHEN) -> str:
    """The signed note of the tree of ``size`` leaves of ``store``."""
    return sign_checkpoint(Checkpoint(origin, size, root_at(store, size), when), key)


def leaf_line(store: MemoryNodeStore, index: int, path: str, size: int | None = None) -> str:
    """One line of leaves.jsonl (without its newline)."""
    proof = inclusion_proof(store, index, size if size is not None else store.size)
    return json.dumps({"index": index, "path": path, "proof": [h.hex() for h in proof]})


def write_log(root: Path, entries: Sequence[str], key: SigningKey, *, first: int = 0,
              origin: str = ORIGIN, consistency: bool = False) -> MemoryNodeStore:
    """``log/`` for the files ``entries`` in leaf order: leaves.jsonl for [first, size), the
    frontier of [0, first) and the checkpoint of the whole tree (and, with ``consistency``, the
    proof from ``first`` to the size). The files before ``first`` are left where they are."""
    store = tree_of(root, entries)
    size = store.size
    log = root / LOG_SUBDIR
    log.mkdir(exist_ok=True)
    lines = [leaf_line(store, i, entries[i]) for i in range(first, size)]
    (log / LOG_LEAVES_FILE).write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    frontier = compact_range_at(store, first)
    (log / LOG_FRONTIER_FILE).write_text(
        json.dumps({"size": first, "hashes": [h.hex() for h in frontier.hashes]}), "utf-8")
    (log / LOG_CHECKPOINT_FILE).write_text(signed_checkpoint(store, size, key, origin=origin),
                                           encoding="utf-8")
    if consistency:
        proof = consistency_proof(store, first, size)
        (log / LOG_CONSISTENCY_FILE).write_text(json.dumps(
            {"from": first, "to": size, "proof": [h.hex() for h in proof]}), "utf-8")
    return store


def read_lines(root: Path) -> list[dict[str, Any]]:
    """The objects of leaves.jsonl."""
    text = (root / LOG_SUBDIR / LOG_LEAVES_FILE).read_text("utf-8")
    return [json.loads(line) for line in text.splitlines()]


def write_lines(root: Path, lines: Sequence[dict[str, Any] | str]) -> None:
    """leaves.jsonl made of ``lines`` (objects, or raw text for hostile lines)."""
    text = "".join((line if isinstance(line, str) else json.dumps(line)) + "\n"
                   for line in lines)
    (root / LOG_SUBDIR / LOG_LEAVES_FILE).write_text(text, encoding="utf-8",
                                                     errors="surrogatepass")
