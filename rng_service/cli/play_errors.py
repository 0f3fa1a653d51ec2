"""A server's refusal as `fairshoe play` says it: one line in the table's words and units.

Read from the status details the server attaches (``rng_service.api.errors``), never from the
message: the ``google.rpc.ErrorInfo``'s reason and metadata (amounts in minor units under
``*_minor`` keys, ``hand_id``, ``action``, the rule's ``why``) and the ``google.rpc.BadRequest``'s
field. Amounts are shown in currency units with the currency's minor-unit exponent (EUR 2, JPY 0),
hands by the names the screen gives them ("Right", "Hand 2 (split 1)"). A refusal this module has
no words for, or whose metadata lacks a value, is shown with the server's message as it is.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from rng_service.core.currency import exponent, units_text

#: places shown for a currency the client does not know (the server refuses such a code)
DEFAULT_PLACES: Final = 2
_HAND_FIELD: Final = re.compile(r"^hands\[(\d+)\](?:\.(bet_minor|side_bets\[\d+\]))?")


def _hand_label(hand_id: int) -> str:
    return f"Hand {hand_id + 1}"


@dataclass(frozen=True)
class ErrorNames:
    """How the screen names what a refusal is about: the table's currency, the hands of the
    round on the screen (hand id -> name) and the spots bets are placed on (seat -> name)."""

    currency: str
    hand_names: Mapping[int, str] = field(default_factory=dict)
    seat_name: Callable[[int], str] = _hand_label

    def hand(self, hand_id: int) -> str:
        """The name of hand ``hand_id`` as the table shows it."""
        return self.hand_names.get(hand_id) or self.seat_name(hand_id)


@dataclass(frozen=True)
class Refusal:
    """What a failed call's status says, in structured form."""

    code: str
    message: str
    reason: str = ""
    metadata: Mapping[str, str] = field(default_factory=dict)
    field: str = ""
    field_description: str = ""

    @classmethod
    def of(cls, err: grpc.RpcError) -> Refusal:
        """The refusal ``err`` reports: its ErrorInfo and BadRequest details when it has them,
        the interim ``fairshoe-reason`` trailer otherwise."""
        if not isinstance(err, grpc.Call):
            return cls("ERROR", str(err))
        code = err.code()
        out = cls(code.name if code is not None else "ERROR", " ".join(
            str(err.details() or "").split()))
        info, bad = _details(err)
        reason = info.reason if info is not None else dict(
            err.trailing_metadata() or ()).get("fairshoe-reason", "")
        metadata = dict(info.metadata) if info is not None else {}
        violation = bad.field_violations[0] if bad is not None and bad.field_violations else None
        return cls(out.code, out.message, str(reason or ""), metadata,
                   str(violation.field) if violation else metadata.get("field", ""),
                   str(violation.description) if violation else "")


def _details(err: grpc.Call) -> tuple[error_details_pb2.ErrorInfo | None,
                                      error_details_pb2.BadRequest | None]:
    try:
        status = rpc_status.from_call(err)
    except (ValueError, AttributeError):  # a status that disagrees with the call's code
        return None, None
    info = bad = None
    for packed in status.details if status is not None else ():
        if packed.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            packed.Unpack(info)
        elif packed.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad = error_details_pb2.BadRequest()
            packed.Unpack(bad)
    return info, bad


def reason_of(err: grpc.RpcError) -> str:
    """The reason code of a refusal (e.g. SHOE_NOT_FINISHED), or ""."""
    return Refusal.of(err).reason


def describe_error(err: grpc.RpcError, names: ErrorNames | None = None) -> str:
    """One line: the status code, the reason code when the server sent one, and what it means
    in the table's units and names (``names``; without them, the server's message)."""
    refusal = Refusal.of(err)
    head = " ".join(x for x in (refusal.code, refusal.reason) if x)
    text = None
    if names is not None:
        try:
            text = _words(refusal, names)
        except (KeyError, ValueError):  # a value missing or not a number: say it as sent
            text = None
    return f"{head}: {text or refusal.message}"


def places_of(currency: str) -> int:
    """The decimal places amounts in ``currency`` are shown with (its ISO 4217 exponent)."""
    places = exponent(currency)
    return DEFAULT_PLACES if places is None else places


# ----- the words for each refusal ---------------------------------------------------------------


class _Say:
    """A refusal's metadata read as amounts and hands of one table."""

    def __init__(self, refusal: Refusal, names: ErrorNames) -> None:
        self.meta, self.names = refusal.metadata, names
        self.currency = refusal.metadata.get("currency") or names.currency
        self.places = places_of(self.currency)

    def money(self, key: str) -> str:
        """The amount under ``key`` (minor units) in currency units, with the currency."""
        return f"{units_text(int(self.meta[key]), self.places)} {self.currency}"

    def amount(self, key: str) -> str:
        """The amount under ``key`` in currency units, without the currency."""
        return units_text(int(self.meta[key]), self.places)

    def hand(self, key: str = "hand_id") -> str:
        return self.names.hand(int(self.meta[key]))

    def stakes(self) -> str:
        """The stakes an action takes: "between 1.00 and 10.00 EUR" or "0.00 or 5.00 EUR"."""
        if "min_stake_minor" in self.meta:
            return (f"between {self.amount('min_stake_minor')} and "
                    f"{self.money('max_stake_minor')}")
        amounts = [units_text(int(a), self.places) for a in self.meta["stakes_minor"].split(",")]
        return f"{' or '.join(amounts)} {self.currency}"


def _words(refusal: Refusal, names: ErrorNames) -> str | None:
    say = _Say(refusal, names)
    meta = refusal.metadata
    if refusal.reason == "INSUFFICIENT_FUNDS":
        if "stake_minor" in meta:
            return (f"the stake {say.money('stake_minor')} exceeds the balance "
                    f"{say.money('balance_minor')}")
        return f"{say.money('amount_minor')} needed, the balance is {say.money('balance_minor')}"
    if refusal.reason == "INVALID_BET":
        return _bet_words(say, _field_name(refusal.field, names))
    if refusal.reason == "ILLEGAL_ACTION":
        return _action_words(say)
    if refusal.reason == "NOT_THIS_HAND":
        return f"{say.hand()} is not awaiting a decision; {say.hand('turn_hand_id')} is"
    if refusal.field and refusal.field_description:  # a malformed request: its field by name
        return f"{_field_name(refusal.field, names)}: {refusal.field_description}"
    return None


def _field_name(field_path: str, names: ErrorNames) -> str:
    """A StartRound field as the table says it: ``hands[1].bet_minor`` -> "Left bet"."""
    match = _HAND_FIELD.match(field_path)
    if match is None:
        return "side bet" if field_path.startswith("side_bets") else field_path
    spot = names.seat_name(int(match.group(1)))
    part = match.group(2) or ""
    return f"{spot} side bet" if part.startswith("side_bets") else f"{spot} bet"


def _bet_words(say: _Say, what: str) -> str | None:
    meta = say.meta
    if "max_minor" in meta:
        return (f"{what} {say.money('stake_minor')} is outside the limits "
                f"{say.amount('min_minor')} to {say.money('max_minor')} (level {meta['level']})")
    if "hand_counts" in meta:
        return f"{meta['hands']} hands bet; the game plays {meta['hand_counts']}"
    if "min_minor" in meta:
        return (f"{what} {say.money('stake_minor')}: playing {meta['hands']} hands needs each "
                f"bet to be at least {say.money('min_minor')}")
    if "chip_minor" in meta:
        return (f"{what} {say.money('stake_minor')} is not made of chips (the smallest is "
                f"{say.money('chip_minor')})")
    if "multiple_minor" in meta:
        return (f"{what} {say.money('stake_minor')} must be a multiple of "
                f"{say.money('multiple_minor')}")
    if "balance_minor" in meta:
        return (f"the stake {say.money('stake_minor')} exceeds the balance "
                f"{say.money('balance_minor')}")
    return None


def _action_words(say: _Say) -> str | None:
    meta = say.meta
    action = meta["action"].replace("_", " ")
    if "why" in meta:
        return f"cannot {action} {say.hand()}: {meta['why']} (allowed: {meta['allowed']})"
    if "amount_minor" in meta:
        return f"{action} on {say.hand()} must be {say.stakes()}, got {say.money('amount_minor')}"
    if "decision" in meta:
        decision = meta["decision"].replace("_", " ")
        return f"{say.hand()} must decide {decision} now, not {action}"
    if "allowed" in meta:
        return f"{action} is not offered now (allowed on {say.hand()}: {meta['allowed']})"
    return None
