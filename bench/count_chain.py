"""The interceptor chain's own instructions a round transition, counted exactly: what the chain
(metrics, drain, authorization, decoding, status, the JSON line) adds to ``StartRound`` and
``Act`` beyond decoding the request, ``RoundApi``'s work and encoding the answer.

    .venv/bin/python bench/count_chain.py [--rounds 30] [--trees TREE ...]

``bench_served_gap.py --count`` takes the chain's share as the difference of two layers' counts
(2.5-2.7 M a transition each), which moves by 0.02-0.04 M from run to run. Here one process
under ``valgrind --tool=callgrind --collect-atstart=no`` plays ``--rounds`` rounds (with every
random byte from one seeded generator and ``PYTHONHASHSEED=0``, the same rounds for every tree)
through the chained handlers, counting only inside each call and not inside ``RoundApi``'s
method (callgrind's client request ``CALLGRIND_TOGGLE_COLLECT``, from a two-line C helper built
with ``cc`` against valgrind's headers); then the same through the plain handlers (decode and
encode only: the yardstick, ``/plain``). Chain = chained - plain, per transition, for each tree
in ``--trees`` (imported through ``PYTHONPATH``: a checkout of another commit, its generated
code and extensions in place). Some 5 minutes a tree on an idle core.
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
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tables import print_table

HELPER = "#include <valgrind/callgrind.h>\nvoid toggle(void) { CALLGRIND_TOGGLE_COLLECT; }\n"


def build_helper(directory: Path) -> Path:
    """The shared library whose ``toggle()`` toggles callgrind's collection."""
    source, library = directory / "toggle.c", directory / "libtoggle.so"
    source.write_text(HELPER)
    subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-o", str(library), str(source)],
                   check=True)
    return library


def child(mode: str, rounds: int, library: str) -> None:
    """Play ``rounds`` rounds through the chained or plain handlers; print the transitions."""
    import bench_served_gap as gap  # noqa: PLC0415
    import grpc  # noqa: PLC0415 - after the seeding
    from bench_interceptor import Context, Details  # noqa: PLC0415

    from rng_service.api.proto_gen.fairshoe.common.v1 import common_pb2  # noqa: PLC0415
    from rng_service.api.proto_gen.fairshoe.round.v1 import round_pb2  # noqa: PLC0415
    from rng_service.api.proto_gen.fairshoe.round.v1 import round_types_pb2 as rt  # noqa: PLC0415
    from rng_service.api.round_api import RoundApi  # noqa: PLC0415

    toggle = ctypes.CDLL(library).toggle

    def uncounted(behavior: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
        def inner(request: Any, context: Any) -> Any:
            toggle()
            try:
                return behavior(request, context)
            finally:
                toggle()
        return inner

    def counted(handler: Any, data: bytes) -> bytes:
        toggle()
        answer = handler.response_serializer(
            handler.unary_unary(handler.request_deserializer(data), Context()))
        toggle()
        return answer  # type: ignore[no-any-return]

    root = Path(tempfile.mkdtemp(prefix="bench-count-chain-"))
    os.environ["FAIRSHOE_DATA_DIR"] = str(root / "in-process")
    try:
        with gap.logging_to(root / "in-process.log"):
            layers = gap.Layers(root / "in-process")
            layers.play(gap.USE_CASE, 8)
            served = gap.served_handlers(RoundApi(layers.live.rounds))
            handlers = {}
            for name in ("StartRound", "Act"):
                handler = grpc.unary_unary_rpc_method_handler(
                    uncounted(served[name].unary_unary), served[name].request_deserializer,
                    served[name].response_serializer)
                if mode == "chained":
                    handler = layers.interceptor.intercept_service(
                        lambda _details, h=handler: h, Details(gap.ROUND_METHOD + name))
                handlers[name] = handler
            player, calls = layers.players[gap.CHAIN], 0
            for i in range(rounds):
                data = round_pb2.StartRoundRequest(
                    player_id=player, game=gap.GAMES[i % len(gap.GAMES)],
                    mode=common_pb2.MODE_REAL, currency="EUR",
                    hands=[rt.HandBet(bet_minor=gap.BET)],
                    request_id=layers.request_id()).SerializeToString()
                view = round_pb2.StartRoundResponse.FromString(
                    counted(handlers["StartRound"], data)).round
                calls += 1
                while view.status == rt.ROUND_STATUS_AWAITING_PLAYER:
                    totals = {h.hand_id: h.total for h in view.hands}
                    data = round_pb2.ActRequest(
                        player_id=player, round_id=view.round_id, hand_id=view.turn.hand_id,
                        action=gap.decide(totals, view.turn.hand_id, view.turn.decision),
                        expected_version=view.version,
                        request_id=layers.request_id()).SerializeToString()
                    view = round_pb2.ActResponse.FromString(counted(handlers["Act"], data)).round
                    calls += 1
            layers.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"COUNTED {calls}")


def counted_run(tree: Path, mode: str, rounds: int, library: Path) -> float:
    """Instructions a transition inside the calls of one child under callgrind."""
    return toggled_count(Path(__file__), tree, [mode, str(rounds), str(library)])


def toggled_count(script: Path, tree: Path, child_args: list[str]) -> float:
    """Instructions per counted call of ``script --child *child_args`` run under callgrind
    with collection toggled by the child (it prints ``COUNTED n``), ``tree`` on its path."""
    env = dict(os.environ, PYTHONHASHSEED="0", PYTHONPATH=str(tree.resolve()))
    cmd = ["valgrind", "--tool=callgrind", "--collect-atstart=no", "--callgrind-out-file=/dev/null",
           sys.executable, str(script.resolve()), "--child", *child_args]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env,
                         cwd=script.parent)
    collected = re.search(r"Collected : (\d+)", out.stderr)
    done = re.search(r"COUNTED (\d+)", out.stdout)
    if out.returncode != 0 or collected is None or done is None:
        raise SystemExit(f"the counted run failed:\n{out.stdout}\n{out.stderr[-3000:]}")
    return int(collected.group(1)) / int(done.group(1))


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], int(sys.argv[3]), sys.argv[4])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--trees", nargs="+", type=Path, default=[Path(".")])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-count-chain-") as scratch:
        library = build_helper(Path(scratch))
        rows = []
        for tree in args.trees:
            chained = counted_run(tree, "chained", args.rounds, library)
            plain = counted_run(tree, "plain", args.rounds, library)
            rows.append((str(tree), f"{chained / 1e3:.1f}", f"{plain / 1e3:.1f}",
                         f"{(chained - plain) / 1e3:.1f}", f"{(chained - plain) / plain:.2f}"))
    print(f"user-space instructions a transition inside the calls, {args.rounds} rounds")
    print_table(("tree", "chained k", "plain k", "chain k", "/plain"), rows)


if __name__ == "__main__":
    main()
