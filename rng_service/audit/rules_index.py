"""The rule sets a round may name (:class:`RulesIndex`): the built-in games' and those of the rules
documents (``fairshoe.rules/v1``) found. A document's digest is recomputed from its content, never
read from its file name; a document whose content does not hash to the digest its name claims
fails (it was altered), and so does a custom rule set under a built-in game's id unless the
auditor allowed it (``--allow-custom-rules``). The named checks: ``rules.document``
(:class:`RulesDocument`, a document indexed) and ``round.rules`` (:class:`RoundRules`, the rule set
a round names).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final

from game_math.errors import GameMathError, RulesError
from game_math.games import game_rules
from game_math.rules import GAME_IDS, Rules, rules_from_dict
from rng_service.audit.checks import Check, Subject
from rng_service.audit.failures import Doc, fail
from rng_service.audit.files import show, tok
from rng_service.audit.round_checks import RoundCase
from rng_service.records.schema import RULES_SCHEMA

_RULES_MEMBERS: Final = frozenset({"schema", "rules"})
_DIGEST_NAME: Final = re.compile(r"[0-9a-f]{64}")


def _parse_rules(data: dict[str, Any]) -> Rules:
    try:
        return rules_from_dict(data)
    except RulesError as exc:
        fail(f"rules.{exc.key}", str(exc).removeprefix(f"{exc.key}: "))
    except (GameMathError, ValueError, TypeError, KeyError, RecursionError) as exc:
        fail("rules", f"cannot be read: {type(exc).__name__}: {exc}")


class RulesIndex:
    """The rule sets a record may name, by digest: the built-in games' and those of the rules
    documents added. Only a digest recomputed from a document's content enters the index.

    A document whose game id is a built-in game's but whose rules differ from that game's is a
    custom rule set posing as the built-in game (blackjack paying 1:2 as ``double-exposure``): it
    fails, and so does every round naming it, unless the auditor named its digest in ``allowed``
    (``--allow-custom-rules``). A custom rule set under an id of its own is reported as custom.
    """

    def __init__(self, allowed: Iterable[str] = ()) -> None:
        self.builtin: dict[str, Rules] = {game_rules(g).digest(): game_rules(g) for g in GAME_IDS}
        self.builtin_of: dict[str, str] = {r.game: d for d, r in self.builtin.items()}
        self.allowed = frozenset(allowed)
        self.documents: dict[str, Rules] = {}
        #: custom rule sets under a built-in game's id that the auditor did not allow
        self.impostors: dict[str, Rules] = {}
        #: digest a document's file name claims -> (that document, the digest it really has)
        self.altered: dict[str, tuple[Path, str]] = {}

    def add_document(self, data: dict[str, Any], path: Path) -> tuple[Rules, str]:
        """Index a rules document; AuditFailure if it is not one or its name belies it."""
        doc = Doc(data, "")
        if doc.get_str("schema") != RULES_SCHEMA:
            fail("schema", f"is {show(doc.data['schema'])}, not {RULES_SCHEMA}")
        extra = sorted(set(data) - _RULES_MEMBERS)
        if extra:
            fail(extra[0], "is not a member of a rules document")
        rules = _parse_rules(doc.get_obj("rules").data)
        digest = rules.digest()
        claimed = path.stem
        if _DIGEST_NAME.fullmatch(claimed) and claimed != digest:
            self.altered[claimed] = (path, digest)
            fail("rules", f"hash to {digest}, not to the digest {claimed} the file is named "
                  "after: the document was altered")
        builtin = self.builtin_of.get(rules.game)
        if builtin is not None and digest != builtin and digest not in self.allowed:
            self.impostors[digest] = rules
            fail("rules.game", f"is {show(rules.game)}, a built-in game's id, but these rules "
                  f"(digest {digest}) are not the built-in {rules.game}'s ({builtin}): a custom "
                  f"rule set passes only if the auditor names it (--allow-custom-rules {digest})")
        self.documents.setdefault(digest, rules)
        return rules, digest

    def is_builtin(self, digest: str) -> bool:
        """True if ``digest`` is the rule set of a built-in game."""
        return digest in self.builtin

    def label(self, digest: str) -> str:
        """How the summary names a rule set: built-in, custom, or custom and allowed."""
        if digest in self.builtin:
            return "built-in"
        return "custom, allowed" if digest in self.allowed else "custom"

    def resolve(self, digest: str, game: str) -> Rules:
        """The rule set a record names; AuditFailure on ``rules_digest`` or ``game`` if none."""
        rules = (self.builtin.get(digest) or self.documents.get(digest)
                 or self.impostors.get(digest))
        if rules is None:
            hint = ""
            if digest in self.altered:
                path, real = self.altered[digest]
                hint = f" ({tok(path)} is named after it but hashes to {real}: it was altered)"
            fail("rules_digest", f"{digest} is not a built-in rule set and no rules document "
                  f"given hashes to it{hint}: pass its rules file (rules/{digest}.json, schema "
                  f"{RULES_SCHEMA}) among the PATHS")
        if rules.game != game:
            fail("game", f"recorded {show(game)}, rule set {digest} is for {show(rules.game)}")
        if digest in self.impostors:
            fail("rules_digest", f"{digest} is a custom rule set under the built-in game id "
                  f"{show(game)}, which the auditor did not allow (--allow-custom-rules)")
        return rules


class RulesCase(Subject):
    """A rules document being checked, and once indexed its rules and digest."""

    def __init__(self, path: Path, data: dict[str, Any]) -> None:
        self.path = path
        self.data = data
        self.rules: Rules | None = None
        self.digest = ""


class RulesDocument(Check[RulesCase]):
    """A rules document (``fairshoe.rules/v1``): its members, its rules readable, its content
    hashing to the digest its file name claims, and no custom rule set under a built-in game's
    id unless allowed (:meth:`RulesIndex.add_document`)."""

    name = "rules.document"

    def __init__(self, index: RulesIndex) -> None:
        self.index = index

    def check(self, subject: RulesCase) -> None:
        """The check the class docstring describes: returns if the subject passes it."""
        subject.rules, subject.digest = self.index.add_document(subject.data, subject.path)


class RoundRules(Check[RoundCase]):
    """2 and 11. The round's ``rules_digest`` names a known rule set of the game named, and not a
    custom one posing as a built-in game (:meth:`RulesIndex.resolve`)."""

    name = "round.rules"

    def __init__(self, index: RulesIndex) -> None:
        self.index = index

    def check(self, subject: RoundCase) -> None:
        """The check the class docstring describes: returns if the subject passes it."""
        doc = subject.doc
        subject.rules = self.index.resolve(doc.get_str("rules_digest"), doc.get_str("game"))
