"""MathService end to end over real gRPC: every RPC, its answers, and its error codes."""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction

import grpc
import pytest

from game_math.analysis.main_game import action_values
from game_math.cards import parse_cards
from game_math.games import game_rules
from game_math.rules import Rules
from rng_service.api import math_service
from rng_service.api.math_service import MAX_RULES_TOML_BYTES
from rng_service.api.proto_gen.fairshoe.math.v1 import math_pb2, math_pb2_grpc
from rng_service.api.proto_gen.fairshoe.round.v1 import round_types_pb2 as rt
from rng_service.api.server import ServerConfig, build_server


@pytest.fixture(scope="module")
def stub() -> Iterator[math_pb2_grpc.MathServiceStub]:
    server, port = build_server(ServerConfig(address="127.0.0.1:0", workers=2))
    with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
        yield math_pb2_grpc.MathServiceStub(ch)
    server.stop(grace=None)


def situation(game: str, player: list[str], dealer: list[str], *,
              removed_cards: list[str] | None = None, from_split: bool = False,
              hands_at_seat: int = 0) -> math_pb2.ActionValuesRequest:
    return math_pb2.ActionValuesRequest(situation=math_pb2.Situation(
        rules=math_pb2.RulesSource(game=game), player_cards=player, dealer_cards=dealer,
        removed_cards=removed_cards, from_split=from_split, hands_at_seat=hands_at_seat))


def fails(call: object, request: object) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as err:
        call(request)  # type: ignore[operator]
    return err.value


# ----- EvaluateHand ----------------------------------------------------------------------------


@pytest.mark.parametrize(("cards", "from_split", "want"), [
    (["AS", "6D"], False, (17, True, False, False, 7)),
    (["AS", "KD"], False, (21, True, True, False, 11)),
    (["AS", "KD"], True, (21, True, False, False, 11)),  # a split hand's 21 is no blackjack
    (["TS", "6D", "9H"], False, (25, False, False, True, 25)),
    (["AS", "AD", "9H"], False, (21, True, False, False, 11)),
    (["10h", "7c"], False, (17, False, False, False, 17)),  # "10" and lower case accepted
])
def test_evaluate_hand(stub: math_pb2_grpc.MathServiceStub, cards: list[str], from_split: bool,
                       want: tuple[int, bool, bool, bool, int]) -> None:
    r = stub.EvaluateHand(math_pb2.EvaluateHandRequest(cards=cards, from_split=from_split))
    assert (r.total, r.soft, r.blackjack, r.bust, r.hard_total) == want


@pytest.mark.parametrize(("cards", "field"), [
    (["AS", "XX"], "cards[1]: bad card code 'XX'"),
    ([], "cards: needs 1 to 21 cards, got 0"),
    (["AS"] * 22, "cards: needs 1 to 21 cards, got 22"),
])
def test_evaluate_hand_refuses_bad_cards(stub: math_pb2_grpc.MathServiceStub, cards: list[str],
                                         field: str) -> None:
    err = fails(stub.EvaluateHand, math_pb2.EvaluateHandRequest(cards=cards))
    assert err.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert (err.details() or "").startswith(field), err.details()


# ----- EvaluateSideBets ------------------------------------------------------------------------


def test_side_bets_with_the_game_paytables(stub: math_pb2_grpc.MathServiceStub) -> None:
    request = math_pb2.EvaluateSideBetsRequest(game="multi-hand", bets=[
        math_pb2.SideBetInput(name="perfect_pairs", cards=["8H", "8D"], stake_minor=100),
        math_pb2.SideBetInput(name="twenty_one_plus_three", cards=["5H", "6H", "7H"]),
        math_pb2.SideBetInput(name="perfect_pairs", cards=["8H", "9D"], stake_minor=100),
    ])
    coloured, straight_flush, loser = stub.EvaluateSideBets(request).results
    rules = game_rules("multi-hand")
    pp = rules.side_bet("perfect_pairs")
    assert pp is not None
    # two red eights: a coloured pair, paid at the game's own coloured-pair payout
    assert coloured.paying_line == "coloured_pair"
    returns = pp.payout("coloured_pair").returns
    assert Fraction(coloured.returns.numerator, coloured.returns.denominator) == returns
    assert coloured.returned_minor == 100 * returns
    assert [(x.line, x.qualifies, x.pays) for x in coloured.lines] == [
        ("perfect_pair", False, False), ("coloured_pair", True, True), ("mixed_pair", False, False)]
    # a suited straight qualifies for straight flush, straight and flush; only the best pays
    assert straight_flush.kind == math_pb2.SIDE_BET_KIND_TWENTY_ONE_PLUS_THREE
    assert straight_flush.paying_line == "straight_flush"
    assert {x.line for x in straight_flush.lines if x.qualifies} == {
        "straight_flush", "straight", "flush"}
    assert straight_flush.returned_minor == 0  # no stake given
    assert (loser.paying_line, loser.returned_minor, loser.returns.numerator) == ("", 0, 0)


def test_side_bet_with_a_paytable_of_the_callers(stub: math_pb2_grpc.MathServiceStub) -> None:
    bet = math_pb2.SideBetInput(
        name="my_pairs", kind=math_pb2.SIDE_BET_KIND_PERFECT_PAIRS, cards=["QS", "QS"],
        stake_minor=50, paytable=[math_pb2.PaytableLine(line="perfect_pair", payout="30:1"),
                                  math_pb2.PaytableLine(line="mixed_pair", payout="5:1")])
    (result,) = stub.EvaluateSideBets(math_pb2.EvaluateSideBetsRequest(bets=[bet])).results
    assert (result.name, result.paying_line, result.returned_minor) == ("my_pairs",
                                                                         "perfect_pair", 1550)


@pytest.mark.parametrize(("request_", "code", "prefix"), [
    (math_pb2.EvaluateSideBetsRequest(game="baccarat", bets=[math_pb2.SideBetInput()]),
     grpc.StatusCode.NOT_FOUND, "game: no game 'baccarat'"),
    (math_pb2.EvaluateSideBetsRequest(game="double-deck", bets=[
        math_pb2.SideBetInput(name="perfect_pairs", cards=["8H", "8D"])]),
     grpc.StatusCode.NOT_FOUND, "bets[0].name: no side bet 'perfect_pairs' in game double-deck"),
    (math_pb2.EvaluateSideBetsRequest(game="multi-hand", bets=[
        math_pb2.SideBetInput(name="perfect_pairs", cards=["8H", "8D", "8C"])]),
     grpc.StatusCode.INVALID_ARGUMENT, "bets[0].cards: needs 2 cards, got 3"),
    (math_pb2.EvaluateSideBetsRequest(game="multi-hand", bets=[
        math_pb2.SideBetInput(name="perfect_pairs", cards=["8H", "8Z"])]),
     grpc.StatusCode.INVALID_ARGUMENT, "bets[0].cards[1]: bad card code '8Z'"),
    (math_pb2.EvaluateSideBetsRequest(bets=[math_pb2.SideBetInput(
        kind=math_pb2.SIDE_BET_KIND_PERFECT_PAIRS, cards=["8H", "8D"],
        paytable=[math_pb2.PaytableLine(line="royal_pair", payout="9:1")])]),
     grpc.StatusCode.INVALID_ARGUMENT, "bets[0].paytable[0].line: 'royal_pair' is not"),
    (math_pb2.EvaluateSideBetsRequest(bets=[math_pb2.SideBetInput(
        kind=math_pb2.SIDE_BET_KIND_PERFECT_PAIRS, cards=["8H", "8D"],
        paytable=[math_pb2.PaytableLine(line="mixed_pair", payout="lots")])]),
     grpc.StatusCode.INVALID_ARGUMENT, "bets[0].paytable[0].payout: bad payout 'lots'"),
    (math_pb2.EvaluateSideBetsRequest(bets=[math_pb2.SideBetInput(
        cards=["8H", "8D"], paytable=[math_pb2.PaytableLine(line="mixed_pair", payout="6:1")])]),
     grpc.StatusCode.INVALID_ARGUMENT, "bets[0].kind: required"),
    (math_pb2.EvaluateSideBetsRequest(game="snap", bets=[math_pb2.SideBetInput(
        name="snap", cards=["8H", "8H", "8H", "2C", "3D"])]),  # two decks, two eights of hearts
     grpc.StatusCode.INVALID_ARGUMENT, "bets[0].cards: 8H appears 3 times; a 2-deck shoe"),
    (math_pb2.EvaluateSideBetsRequest(bets=[]), grpc.StatusCode.INVALID_ARGUMENT,
     "bets: needs 1 to 16 bets, got 0"),
    (math_pb2.EvaluateSideBetsRequest(game="multi-hand", bets=[math_pb2.SideBetInput(
        name="perfect_pairs", cards=["8H", "8D"])] * 17), grpc.StatusCode.INVALID_ARGUMENT,
     "bets: needs 1 to 16 bets, got 17"),
])
def test_side_bets_refuse_bad_input(stub: math_pb2_grpc.MathServiceStub,
                                    request_: math_pb2.EvaluateSideBetsRequest,
                                    code: grpc.StatusCode, prefix: str) -> None:
    err = fails(stub.EvaluateSideBets, request_)
    assert err.code() is code
    assert (err.details() or "").startswith(prefix), err.details()


def _custom(kind: math_pb2.SideBetKind, cards: list[str], line: str, payout: str,
            stake: int = 0) -> math_pb2.EvaluateSideBetsRequest:
    return math_pb2.EvaluateSideBetsRequest(bets=[math_pb2.SideBetInput(
        kind=kind, cards=cards, stake_minor=stake,
        paytable=[math_pb2.PaytableLine(line=line, payout=payout)])])


_TWENTY_ONE, _PAIRS = (math_pb2.SIDE_BET_KIND_TWENTY_ONE_PLUS_THREE,
                       math_pb2.SIDE_BET_KIND_PERFECT_PAIRS)


@pytest.mark.parametrize(("request_", "prefix"), [
    # a payout whose return (stake included) is past int64: 2**63, 10**20 + 1, a denominator 2**63
    (_custom(_TWENTY_ONE, ["TS", "4S", "5S"], "flush", "9223372036854775807:1"),
     "bets[0].paytable[0].payout: "),
    (_custom(_TWENTY_ONE, ["TS", "4S", "5S"], "flush", "99999999999999999999:1"),
     "bets[0].paytable[0].payout: "),
    (_custom(_TWENTY_ONE, ["TS", "4S", "5S"], "flush", "1:9223372036854775808"),
     "bets[0].paytable[0].payout: "),
    # the same on a line the cards do not qualify for (its return is listed all the same)
    (_custom(_TWENTY_ONE, ["TS", "4D", "9S"], "flush", "9223372036854775807:1"),
     "bets[0].paytable[0].payout: "),
    (_custom(_PAIRS, ["8H", "8H"], "perfect_pair", "99999999999999999999 for 1"),
     "bets[0].paytable[0].payout: "),
    # a payout that fits, with a stake whose return does not
    (_custom(_TWENTY_ONE, ["TS", "4S", "5S"], "flush", "1000000000000:1", stake=10_000_000),
     "bets[0].stake_minor: "),
])
def test_side_bets_refuse_returns_past_int64(stub: math_pb2_grpc.MathServiceStub,
                                             request_: math_pb2.EvaluateSideBetsRequest,
                                             prefix: str) -> None:
    err = fails(stub.EvaluateSideBets, request_)
    assert err.code() is grpc.StatusCode.INVALID_ARGUMENT, err.details()
    assert (err.details() or "").startswith(prefix), err.details()


def test_side_bets_answer_the_largest_return_that_fits(stub: math_pb2_grpc.MathServiceStub
                                                       ) -> None:
    (result,) = stub.EvaluateSideBets(_custom(
        _TWENTY_ONE, ["TS", "4S", "5S"], "flush", "9223372036854775806:1", stake=1)).results
    assert result.returned_minor == result.returns.numerator == 2**63 - 1


# ----- ActionValues ----------------------------------------------------------------------------


def kinds(reply: math_pb2.ActionValuesResponse) -> set[int]:
    return {v.action for v in reply.values}


def test_action_values_are_the_analysers_best_first(stub: math_pb2_grpc.MathServiceStub) -> None:
    reply = stub.ActionValues(situation("snap", ["TS", "6H"], ["TD"], removed_cards=["5C"]))
    rules = game_rules("snap")
    want = action_values(rules, parse_cards(["TS", "6H"]), parse_cards(["TD"]),
                         parse_cards(["5C"]), can_double=True)
    got = {rt.ActionKind.Name(v.action): v.expected_value for v in reply.values}
    assert got == {f"ACTION_KIND_{a.upper()}": v for a, v in want.items()}
    assert [v.expected_value for v in reply.values] == sorted(got.values(), reverse=True)
    assert reply.best == reply.values[0].action
    assert not reply.HasField("insurance_value")  # a ten shows: nothing to insure


def test_action_values_offer_what_the_engine_offers(stub: math_pb2_grpc.MathServiceStub) -> None:
    # double-deck doubles on 10-11 only, splits to four hands
    eights = stub.ActionValues(situation("double-deck", ["8S", "8H"], ["6D"]))
    assert kinds(eights) == {rt.ACTION_KIND_HIT, rt.ACTION_KIND_STAND, rt.ACTION_KIND_SPLIT}
    assert eights.best == rt.ACTION_KIND_SPLIT
    eleven = stub.ActionValues(situation("double-deck", ["6S", "5H"], ["6D"]))
    assert rt.ACTION_KIND_DOUBLE in kinds(eleven) and eleven.best == rt.ACTION_KIND_DOUBLE
    at_four = stub.ActionValues(situation("double-deck", ["8S", "8H"], ["6D"], from_split=True,
                                          hands_at_seat=4))
    assert rt.ACTION_KIND_SPLIT not in kinds(at_four)
    # a split ace takes one card and stands (no resplitting aces in snap)
    aces = stub.ActionValues(situation("snap", ["AS", "AH"], ["6D"], from_split=True,
                                       hands_at_seat=2))
    assert kinds(aces) == {rt.ACTION_KIND_STAND}
    # double exposure shows both dealer cards
    exposed = stub.ActionValues(situation("double-exposure", ["TS", "6H"], ["TD", "7C"]))
    assert exposed.best == rt.ACTION_KIND_HIT  # 16 against a made 17: stand loses for sure


def test_action_values_report_insurance_under_an_ace(stub: math_pb2_grpc.MathServiceStub
                                                     ) -> None:
    reply = stub.ActionValues(situation("snap", ["9S", "7H"], ["AD"]))
    # 104 cards less 9, 7, A leave 32 tens in 101: insurance pays 2:1
    assert reply.insurance_value == pytest.approx(3 * 32 / 101 - 1)


@pytest.mark.parametrize(("request_", "code", "prefix"), [
    (situation("baccarat", ["TS", "6H"], ["TD"]), grpc.StatusCode.NOT_FOUND,
     "situation.rules.game: no game 'baccarat'"),
    (situation("snap", ["TS", "6Q"], ["TD"]), grpc.StatusCode.INVALID_ARGUMENT,
     "situation.player_cards[1]: bad card code '6Q'"),
    (situation("snap", ["TS", "6H"], ["TD", "5C"]), grpc.StatusCode.INVALID_ARGUMENT,
     "situation.dealer_cards: needs 1 cards, got 2"),
    (situation("snap", ["TS", "6H", "8C"], ["TD"]), grpc.StatusCode.INVALID_ARGUMENT,
     "situation.player_cards: the hand is bust (24)"),
    (situation("snap", ["AS", "KH"], ["TD"]), grpc.StatusCode.INVALID_ARGUMENT,
     "situation.player_cards: a blackjack is settled"),
    (situation("snap", ["TS", "6H"], ["TD"], removed_cards=["TS", "TS"]),
     grpc.StatusCode.INVALID_ARGUMENT, "situation: TS appears 3 times; a 2-deck shoe holds 2"),
    (situation("snap", ["TS", "6H"], ["TD"], removed_cards=["2C"] * 105),
     grpc.StatusCode.INVALID_ARGUMENT, "situation.removed_cards: needs 0 to 104 cards, got 105"),
    (math_pb2.ActionValuesRequest(), grpc.StatusCode.INVALID_ARGUMENT, "decision: set"),
    (math_pb2.ActionValuesRequest(live=math_pb2.LiveDecision(player_id="p", round_id="r1")),
     grpc.StatusCode.NOT_FOUND, "live.round_id: no round 'r1'"),
])
def test_action_values_refuse_bad_input(stub: math_pb2_grpc.MathServiceStub,
                                        request_: math_pb2.ActionValuesRequest,
                                        code: grpc.StatusCode, prefix: str) -> None:
    err = fails(stub.ActionValues, request_)
    assert err.code() is code
    assert (err.details() or "").startswith(prefix), err.details()


def test_action_values_need_an_unseen_half_deck(stub: math_pb2_grpc.MathServiceStub) -> None:
    seen = {"TS", "6H", "TD"}
    deck = [r + s for s in "SHDC" for r in "A23456789TJQK"]
    removed = [c for c in deck * 2 if c not in seen][:80]  # 104 - 3 - 80 = 21 unseen
    err = fails(stub.ActionValues, situation("snap", ["TS", "6H"], ["TD"],
                                             removed_cards=removed))
    assert err.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert (err.details() or "").startswith("situation.removed_cards: leaves 21 unseen cards")


# ----- GetReturns ------------------------------------------------------------------------------


def test_get_returns_of_a_game_and_of_a_rules_document(stub: math_pb2_grpc.MathServiceStub
                                                       ) -> None:
    rules = game_rules("double-deck")
    game = stub.GetReturns(math_pb2.GetReturnsRequest(rules=math_pb2.RulesSource(
        game="double-deck")))
    assert game.rules_digest == rules.digest()
    rtp = Fraction(game.basic_return.ratio.numerator, game.basic_return.ratio.denominator)
    edge = game.basic_house_edge.ratio
    assert 0.99 < rtp < 1.0 and float(game.basic_return.decimal) == pytest.approx(float(rtp))
    assert rtp + Fraction(edge.numerator, edge.denominator) == pytest.approx(1, abs=1e-15)
    assert game.frequencies.win + game.frequencies.push + game.frequencies.lose == \
        pytest.approx(1.0)
    assert '"format": "fairshoe.par/v1"' in game.par_json
    # the same rules as a document: the same digest, answered from the cache
    same = stub.GetReturns(math_pb2.GetReturnsRequest(rules=math_pb2.RulesSource(
        rules_toml=rules.to_toml())))
    assert same == game
    # standing on soft 17 is worth more to the player than the game's hitting
    s17 = rules.to_toml().replace("hits_soft_17 = true", "hits_soft_17 = false")
    other = stub.GetReturns(math_pb2.GetReturnsRequest(rules=math_pb2.RulesSource(
        rules_toml=s17)))
    assert other.rules_digest != game.rules_digest
    assert other.basic_return.decimal > game.basic_return.decimal


def test_get_returns_lists_side_bets_with_published_figures(
        stub: math_pb2_grpc.MathServiceStub) -> None:
    # without its published return (whose reconciliation would analyse eight more rule sets)
    lines = game_rules("multi-hand").to_toml().splitlines()
    doc = "\n".join(line for line in lines if not line.startswith("published_return"))
    reply = stub.GetReturns(math_pb2.GetReturnsRequest(rules=math_pb2.RulesSource(
        rules_toml=doc)))
    names = {s.name for s in reply.side_bets}
    assert names == {"perfect_pairs", "twenty_one_plus_three"}
    for s in reply.side_bets:
        assert 0.8 < float(s.expected_return.decimal) < 1.0


@pytest.mark.parametrize(("source", "code", "prefix"), [
    (math_pb2.RulesSource(game="baccarat"), grpc.StatusCode.NOT_FOUND,
     "rules.game: no game 'baccarat'"),
    (math_pb2.RulesSource(), grpc.StatusCode.INVALID_ARGUMENT, "rules: set game or rules_toml"),
    (math_pb2.RulesSource(rules_toml="game = 'x'\ndecks = 'two'\n"),
     grpc.StatusCode.INVALID_ARGUMENT, "rules.rules_toml: decks: must be int"),
    (math_pb2.RulesSource(rules_toml="game = [\n"), grpc.StatusCode.INVALID_ARGUMENT,
     "rules.rules_toml: toml:"),
    (math_pb2.RulesSource(rules_toml="#" * (MAX_RULES_TOML_BYTES + 1)),
     grpc.StatusCode.INVALID_ARGUMENT, f"rules.rules_toml: {MAX_RULES_TOML_BYTES + 1} bytes"),
    (math_pb2.RulesSource(rules_toml="a = " + "[" * 30_000 + "]" * 30_000),
     grpc.StatusCode.INVALID_ARGUMENT, "rules.rules_toml:"),
])
def test_get_returns_refuses_bad_rules(stub: math_pb2_grpc.MathServiceStub,
                                       source: math_pb2.RulesSource, code: grpc.StatusCode,
                                       prefix: str) -> None:
    err = fails(stub.GetReturns, math_pb2.GetReturnsRequest(rules=source))
    assert err.code() is code
    assert (err.details() or "").startswith(prefix), err.details()


def _snap_paying(payout: str) -> math_pb2.GetReturnsRequest:
    doc = game_rules("snap").to_toml().replace('matching_pair_both_hands = "1000 for 1"',
                                               f'matching_pair_both_hands = "{payout}"')
    assert payout in doc
    return math_pb2.GetReturnsRequest(rules=math_pb2.RulesSource(rules_toml=doc))


@pytest.mark.parametrize(("request_", "prefix"), [
    # the side bet's expected return (n/10403) would not fit an int64 ratio
    (_snap_paying("99999999999999999999 for 1"),
     "rules.rules_toml: side_bets.snap.paytable.matching_pair_both_hands: "),
    # a blackjack paying so much that the main game's return does not fit
    (math_pb2.GetReturnsRequest(rules=math_pb2.RulesSource(rules_toml=game_rules(
        "double-deck").to_toml().replace('blackjack = "3:2"', 'blackjack = "999999999999:1"'))),
     "rules.rules_toml: payouts.blackjack: "),
])
def test_get_returns_refuses_unreportable_payouts_before_analysing(
        monkeypatch: pytest.MonkeyPatch, request_: math_pb2.GetReturnsRequest,
        prefix: str) -> None:
    def no_analysis(rules: Rules) -> None:
        raise AssertionError("analysed rules whose figures cannot be answered")

    monkeypatch.setattr(math_service, "par_sheet", no_analysis)
    with pytest.raises(math_service.InvalidInput) as err:
        math_service.MathService().returns(request_)
    assert str(err.value).startswith(prefix), err.value


def test_get_returns_refuses_unreportable_payouts_over_grpc(
        stub: math_pb2_grpc.MathServiceStub) -> None:
    err = fails(stub.GetReturns, _snap_paying("99999999999999999999 for 1"))
    assert err.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "matching_pair_both_hands" in (err.details() or ""), err.details()


def test_par_cache_analyses_each_digest_once(monkeypatch: pytest.MonkeyPatch) -> None:
    analysed: list[str] = []

    class Sheet:
        def __init__(self, rules: Rules) -> None:
            self.rules = rules

        def to_dict(self) -> dict[str, str]:
            return {"game": self.rules.game}

    def fake_sheet(rules: Rules) -> Sheet:
        analysed.append(rules.game)
        return Sheet(rules)

    monkeypatch.setattr(math_service, "par_sheet", fake_sheet)
    monkeypatch.setattr(math_service, "returns_response",
                        lambda doc: math_pb2.GetReturnsResponse(game=doc["game"]))
    cache = math_service.ParCache(size=1)
    snap, deck = game_rules("snap"), game_rules("double-deck")
    assert cache.get(snap).game == "snap" and cache.get(snap).game == "snap"
    assert analysed == ["snap"]
    cache.get(deck)  # evicts snap: the cache holds one answer
    cache.get(snap)
    assert analysed == ["snap", "double-deck", "snap"]


def test_reportable_bound_uses_the_par_sheets_denominator() -> None:
    from game_math.analysis.par import FLOAT_DENOMINATOR_LIMIT  # noqa: PLC0415

    assert math_service._PAR_FLOAT_DENOMINATOR == FLOAT_DENOMINATOR_LIMIT
