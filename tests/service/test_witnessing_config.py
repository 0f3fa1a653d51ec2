"""``FAIRSHOE_WITNESSES``: entries for every operator's log (``<url> <vkey>``) and entries scoped to
one operator's (``operator=<id> <url> <vkey>``); which witnesses an operator's checkpoint goes to;
a malformed entry is one ConfigError naming it."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from rng_service.core import config
from rng_service.core.config import ConfigError
from rng_service.log.cosignature import Cosigner
from rng_service.service.witnessing import Witness, configured_witnesses, witnesses_for

# fixed keys: the parameters' test ids are the same in every pytest-xdist worker
ONE, TWO = (Cosigner.from_public_key(
    f"witness.test/{name}", Ed25519PrivateKey.from_private_bytes(bytes([n]) * 32).public_key()
    ).vkey() for n, name in ((1, "one"), (2, "two")))


def _configured(value: str) -> list[Witness]:
    return configured_witnesses({config.WITNESSES_ENV: value})


def test_an_unscoped_entry_is_every_operators_and_a_scoped_one_only_its_operators() -> None:
    witnesses = _configured(f" http://a.test/ {ONE} , operator=op-b  https://b.test/w {TWO},")
    assert [(w.url, w.operator, w.cosigner.vkey()) for w in witnesses] == [
        ("http://a.test", None, ONE), ("https://b.test/w", "op-b", TWO)]
    assert [w.url for w in witnesses_for(witnesses, "op-a")] == ["http://a.test"]
    assert [w.url for w in witnesses_for(witnesses, "op-b")] == ["http://a.test",
                                                                  "https://b.test/w"]
    assert _configured("") == []


def test_a_witness_of_several_operators_is_one_entry_each_and_asked_once() -> None:
    witnesses = _configured(f"operator=op-a http://w.test {ONE}, operator=op-b http://w.test {ONE},"
                            f"http://w.test {ONE}")
    assert [w.operator for w in witnesses] == ["op-a", "op-b", None]
    assert [w.operator for w in witnesses_for(witnesses, "op-a")] == ["op-a"]
    assert [w.operator for w in witnesses_for(witnesses, "op-c")] == [None]


@pytest.mark.parametrize(("value", "named"), [
    (f"a.test {ONE}", "'a.test "),
    ("http://a.test", "'http://a.test'"),
    (f"http://a.test {ONE} extra", "extra"),
    (f"operator= http://a.test {ONE}", "operator= "),
    (f"operator=op-a {ONE}", "operator=op-a"),
    (f"operator=-bad http://a.test {ONE}", "operator=-bad"),
    (f"operator=op-a operator=op-b http://a.test {ONE}", "operator=op-b"),
    ("http://a.test not-a-vkey", "http://a.test"),
])
def test_a_malformed_entry_is_one_error_naming_it(value: str, named: str) -> None:
    with pytest.raises(ConfigError) as err:
        _configured(f"http://fine.test {TWO}, {value}")
    message = str(err.value)
    assert message.startswith(config.WITNESSES_ENV) and named in message, message
    assert "fine.test" not in message
