"""``RoundApi``'s own instructions a transition, counted exactly: the request decoded and
checked, the answer built and serialized, as the server registers ``StartRound`` and ``Act``,
without the use case.

    .venv/bin/python bench/count_round_api.py [--rounds 200] [--trees TREE ...]

``bench_served_gap.py --count`` takes the messages layer as the difference of two layers' counts
(2.3-2.7 M a transition each), which moves by about 0.05 M between runs. Here one process plays
``--rounds`` rounds on the use case (every random byte from one seeded generator and
``PYTHONHASHSEED=0``: the same rounds for every tree), keeping each request's bytes and the view
its use case answered with (the handlers not yet called: nothing of the answers encoded); then
the requests are replayed once, in order, through the handlers as the server registers them, on
a use case that returns the kept views, as a fresh server meets them. Under ``valgrind
--tool=callgrind --collect-atstart=no`` only the replay after its first 20 transitions is
counted (callgrind's ``CALLGRIND_TOGGLE_COLLECT``, the helper of ``count_chain.py``). For each
tree in ``--trees`` (imported through ``PYTHONPATH``). A minute or two a tree.
"""

from __future__ import annotations

import os
import random
import sys

if __name__ == "__main__" and len(sys.argv) > 1 and sys.argv[1] == "--child":
    _SEEDED = random.Random(7)
    os.urandom = _SEEDED.randbytes
    random._urandom = _SEEDED.randbytes  # type: ignore[attr-defined]

import argparse
import ctypes
import shutil
import tempfile
from collections import deque
from pathlib import Path
from typing import Any

from count_chain import build_helper, toggled_count
from tables import print_table

WARM = 20  # transitions replayed before the count starts


def child(rounds: int, library: str) -> None:
    """Play, keep, replay; print the transitions counted."""
    import bench_served_gap as gap  # noqa: PLC0415
    from bench_interceptor import Context  # noqa: PLC0415

    from game_math.round import HandBet  # noqa: PLC0415
    from rng_service.api.proto_gen.fairshoe.common.v1 import common_pb2  # noqa: PLC0415
    from rng_service.api.proto_gen.fairshoe.round.v1 import round_pb2  # noqa: PLC0415
    from rng_service.api.proto_gen.fairshoe.round.v1 import round_types_pb2 as rt  # noqa: PLC0415
    from rng_service.api.round_api import RoundApi  # noqa: PLC0415
    from rng_service.service.ports import DEFAULT_OPERATOR, Mode  # noqa: PLC0415

    DECISIONS = {"insurance": rt.DECISION_INSURANCE, "even_money": rt.DECISION_EVEN_MONEY,
                 "play": rt.DECISION_PLAY}

    toggle = ctypes.CDLL(library).toggle
    root = Path(tempfile.mkdtemp(prefix="bench-count-round-api-"))
    os.environ["FAIRSHOE_DATA_DIR"] = str(root / "in-process")
    try:
        with gap.logging_to(root / "in-process.log"):
            layers = gap.Layers(root / "in-process")
            rounds_service = layers.live.rounds
            kept: deque[Any] = deque()
            played: list[tuple[str, bytes]] = []

            class Recorded:
                """The use case, its answers kept; then those answers again, in order."""

                replaying = False

                def start_round(self, *args: Any, **kwargs: Any) -> Any:
                    if self.replaying:
                        return kept.popleft()
                    view = rounds_service.start_round(*args, **kwargs)
                    kept.append(view)
                    return view

                def act(self, *args: Any, **kwargs: Any) -> Any:
                    if self.replaying:
                        return kept.popleft()
                    view = rounds_service.act(*args, **kwargs)
                    kept.append(view)
                    return view

            use_case = Recorded()
            handlers = gap.served_handlers(RoundApi(use_case))  # type: ignore[arg-type]

            def call(name: str, data: bytes) -> bytes:
                handler = handlers[name]
                return handler.response_serializer(  # type: ignore[no-any-return]
                    handler.unary_unary(handler.request_deserializer(data), Context()))

            # played on the use case itself (nothing encoded yet: the replay meets each
            # answer as a fresh server would), each request's bytes kept beside its answer
            player = layers.players[gap.MESSAGES]
            for i in range(rounds):
                request_id = layers.request_id()
                view = use_case.start_round(DEFAULT_OPERATOR, player, gap.GAMES[i % len(gap.GAMES)],
                                            mode=Mode.REAL, currency="EUR",
                                            hands=[HandBet(gap.BET)], request_id=request_id)
                played.append(("StartRound", round_pb2.StartRoundRequest(
                    player_id=player, game=gap.GAMES[i % len(gap.GAMES)],
                    mode=common_pb2.MODE_REAL, currency="EUR",
                    hands=[rt.HandBet(bet_minor=gap.BET)],
                    request_id=request_id).SerializeToString()))
                while view.status == "awaiting":
                    request_id = layers.request_id()
                    action = gap.decide({h.hand_id: h.total for h in view.hands},
                                        view.turn_hand, DECISIONS[view.decision])
                    played.append(("Act", round_pb2.ActRequest(
                        player_id=player, round_id=view.round_id, hand_id=view.turn_hand,
                        action=action, expected_version=view.version,
                        request_id=request_id).SerializeToString()))
                    view = use_case.act(DEFAULT_OPERATOR, view.round_id, gap.engine_action(view),
                                        hand_id=view.turn_hand, expected_version=view.version,
                                        request_id=request_id, player=player)
            use_case.replaying = True
            for n, (name, data) in enumerate(played):
                if n == WARM:
                    toggle()
                call(name, data)
            toggle()
            layers.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"COUNTED {len(played) - WARM}")


def counted_run(tree: Path, rounds: int, library: Path) -> float:
    """Instructions a transition of the counted replay, in one child under callgrind."""
    return toggled_count(Path(__file__), tree, [str(rounds), str(library)])


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(int(sys.argv[2]), sys.argv[3])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--trees", nargs="+", type=Path, default=[Path(".")])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-count-round-api-") as scratch:
        library = build_helper(Path(scratch))
        rows = [(str(tree), f"{counted_run(tree, args.rounds, library) / 1e3:.1f}")
                for tree in args.trees]
    print(f"user-space instructions a transition in RoundApi's handlers (use case excluded), "
          f"{args.rounds} rounds")
    print_table(("tree", "k instructions"), rows)


if __name__ == "__main__":
    main()
