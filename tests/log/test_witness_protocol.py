"""C2SP tlog-witness add-checkpoint: the spec's example bodies, the test witness written from the
spec (tests/support/witness_server.py) answering each case with the spec's status, and the service's
client (rng_service.service.witnessing) getting cosignatures from it over HTTP, a 409 included."""

from __future__ import annotations

import base64
from datetime import UTC, datetime

import pytest
from support.witness_server import TestWitness, serving

from rng_service.crypto.keys import SigningKey
from rng_service.log import (
    Checkpoint,
    MemoryNodeStore,
    checkpoint_verifier,
    consistency_proof,
    root_at,
    sign_checkpoint,
)
from rng_service.log.cosignature import verify_cosignatures
from rng_service.log.witness_protocol import parse_cosignatures, parse_request, request_body
from rng_service.service.witnessing import Witness, Witnessing

# c2sp.org/tlog-witness: its example request body and response body
SPEC_REQUEST = """old 20852014
PlRNCrwHpqhGrupue0L7gxbjbMiKA9temvuZZDDpkaw=
jrJZDmY8Y7SyJE0MWLpLozkIVMSMZcD5kvuKxPC3swk=
5+pKlUdi2LeF/BcMHBn+Ku6yhPGNCswZZD1X/6QgPd8=
/6WVhPs2CwSsb5rYBH5cjHV/wSmA79abXAwhXw3Kj/0=

example.com/behind-the-sofa
20852163
CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=

— example.com/behind-the-sofa Az3grlgtzPICa5OS8npVmf1Myq/5IZniMp+ZJurmRDeOoRDe4URYN7u5/Zhcyv2q1gGzGku9nTo+zyWE+xeMcTOAYQ8=
— example.com/behind-the-sofa opLqBQsREYCgu6xQkYQwJr9fo45a62DN9EdmHXnZdXNqlcVGlCum2Wks+49/V6267UEjw6QUXTS5Rovnzv++qbSzm9Q=
"""  # noqa: E501
SPEC_RESPONSE = """— witness.example/w1 CMp+6LWBU0anHGH5aNDTJkH/gj79sG+T6+iP2ThYN5krrDJbR1HDnucjL39QsZTSvVjyQLrdk3DXDqI5G2HgLatVs0pWh6Up69HVOw==
— witness.example/w1 I7rEps0pvK2UqkS2gSpVUDhrhVtQV9lgF6pRrWAvjJHjyWpW7VcE3SiOlVlbQNt64vWhO+DlkL0+UfzuOBMh9ChdMkP1vi/lCAsmlw==
— witness.example/w2 AWui8Sk55XjYLOijihBjhqEH6nS1ndDymE0a+6idX7pLcnoB+dhnz0854aLZgrrKbYKA7nC3HNJhm/kWl7oJlqU3rXXvpysAdyP3wQ==
"""  # noqa: E501
ORIGIN = "fairshoe.example/log/default"
LOG_KEY = SigningKey.generate()


def test_the_specs_example_bodies() -> None:
    request = parse_request(SPEC_REQUEST.encode())
    assert request.old_size == 20852014 and len(request.proof) == 4
    assert request.proof[0] == base64.b64decode("PlRNCrwHpqhGrupue0L7gxbjbMiKA9temvuZZDDpkaw=")
    assert request.note.startswith("example.com/behind-the-sofa\n20852163\n")
    assert request_body(request.old_size, request.proof, request.note) == SPEC_REQUEST.encode()
    lines = parse_cosignatures(SPEC_RESPONSE.encode())
    assert [line.name for line in lines] == ["witness.example/w1"] * 2 + ["witness.example/w2"]
    assert all(len(line.signature) == 72 for line in lines)  # timestamp and Ed25519 signature


def _log(size: int) -> MemoryNodeStore:
    store = MemoryNodeStore()
    for i in range(size):
        store.append_entry(b"leaf %d" % i)
    return store


def _note(store: MemoryNodeStore, size: int, key: SigningKey = LOG_KEY,
          origin: str = ORIGIN) -> str:
    return sign_checkpoint(Checkpoint(origin, size, root_at(store, size), datetime.now(UTC)),
                           key)


@pytest.fixture
def witness() -> TestWitness:
    return TestWitness("w1.test/witness",
                       {ORIGIN: [checkpoint_verifier(LOG_KEY.public_key, ORIGIN)]})


def test_the_test_witness_answers_as_the_spec_says(witness: TestWitness) -> None:
    store = _log(20)
    status, _, body = witness.add_checkpoint(request_body(0, [], _note(store, 5)))
    assert status == 200
    assert parse_cosignatures(body)[0].name == "w1.test/witness"
    assert witness.state[ORIGIN][0] == 5
    good = request_body(5, consistency_proof(store, 5, 12), _note(store, 12))
    assert witness.add_checkpoint(request_body(0, [], _note(store, 12)))[:2] == (
        409, "text/x.tlog.size")
    assert witness.add_checkpoint(request_body(0, [], _note(store, 12)))[2] == b"5\n"
    bad_proof = request_body(5, consistency_proof(store, 4, 12), _note(store, 12))
    assert witness.add_checkpoint(bad_proof)[0] == 422
    assert witness.add_checkpoint(request_body(13, [], _note(store, 12)))[0] == 400
    assert witness.add_checkpoint(b"old x\n\n" + _note(store, 12).encode())[0] == 400
    assert witness.add_checkpoint(request_body(5, [], _note(store, 12, origin="x/y")))[0] == 404
    other = SigningKey.generate()
    assert witness.add_checkpoint(request_body(5, consistency_proof(store, 5, 12),
                                               _note(store, 12, key=other)))[0] == 403
    # a fork of the same size as the one cosigned: another root
    fork = _log(4)
    fork.append_entry(b"another leaf")
    assert witness.add_checkpoint(request_body(5, [], _note(fork, 5)))[0] == 422
    assert witness.state[ORIGIN][0] == 5  # nothing refused changed the state
    status, _, body = witness.add_checkpoint(good)
    assert status == 200 and witness.state[ORIGIN][0] == 12


def test_the_services_client_gets_cosignatures_over_http(witness: TestWitness) -> None:
    store = _log(30)
    with serving(witness) as url:
        client = Witnessing([Witness(url, witness.cosigner)])
        note = client.cosign("default", ORIGIN, 7, _note(store, 7), lambda old: [])
        [found] = verify_cosignatures(note, [witness.cosigner])
        assert found.cosigner == witness.cosigner
        note = client.cosign("default", ORIGIN, 19, _note(store, 19),
                             lambda old: consistency_proof(store, old, 19))
        assert verify_cosignatures(note, [witness.cosigner])
        # a process that does not know the witness's size learns it from a 409
        fresh = Witnessing([Witness(url, witness.cosigner)])
        note = fresh.cosign("default", ORIGIN, 25, _note(store, 25),
                            lambda old: consistency_proof(store, old, 25))
        assert verify_cosignatures(note, [witness.cosigner])
        assert witness.requests[-2:] == [(0, 25, 409), (19, 25, 200)]
        # a refusal costs the cosignature, not the checkpoint
        forked = _log(20)
        plain = _note(forked, 20)
        assert fresh.cosign("default", ORIGIN, 20, plain, lambda old: []) == plain
