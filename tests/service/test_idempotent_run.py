"""``idempotency.run`` without a read before the work (on SQLite and PostgreSQL): a retry whose
work would succeed again, or fails, gets the first answer and keeps nothing of its own run; a
new request's error stands and stores nothing; the same id with other content is refused after
its work ran; concurrent duplicates share one answer and one change."""

from __future__ import annotations

import threading
from collections.abc import Callable
from itertools import count

import pytest
from support.service_helpers import EUR, OP

from rng_service.core.errors import IllegalState, InvalidInput
from rng_service.service import idempotency
from rng_service.service.ports import AccountKey, AccountKind, Mode, Storage, UnitOfWork


class Opener:
    """Work that opens a new account each time it runs (account ``acc-N`` for run N) and
    answers N, or raises once told to."""

    def __init__(self) -> None:
        self.runs = count(1)
        self.fail = False
        self.discarded = 0
        self.lock = threading.Lock()

    def work(self, uow: UnitOfWork, op: str) -> int:
        with self.lock:
            n = next(self.runs)
        uow.open_account(AccountKey(op, f"acc-{n}", EUR, Mode.REAL), AccountKind.PLAYER)
        if self.fail:
            raise IllegalState("refused", reason="ILLEGAL_ACTION")
        return n

    def discard(self) -> None:
        with self.lock:
            self.discarded += 1

    def run(self, storage: Storage, request_id: str, params: dict[str, int] | None = None
            ) -> int:
        return idempotency.run(storage, operator=lambda _: OP, request_id=request_id,
                               operation="open", params=params or {"n": 1}, work=self.work,
                               encode=lambda n: str(n).encode(), decode=int,
                               discard=self.discard)


def accounts(storage: Storage) -> list[int]:
    """The runs whose account exists (committed)."""
    with storage.snapshot() as uow:
        return [n for n in range(1, 9)
                if uow.get_balance(AccountKey(OP, f"acc-{n}", EUR, Mode.REAL)) is not None]


def test_a_retry_whose_work_succeeds_again_gets_the_first_answer(storage: Storage) -> None:
    opener = Opener()
    assert opener.run(storage, "r-1") == 1
    assert opener.discarded == 0
    assert opener.run(storage, "r-1") == 1  # its work ran (run 2), rolled back
    assert accounts(storage) == [1]
    assert opener.discarded == 1


def test_a_retry_whose_work_fails_gets_the_first_answer(storage: Storage) -> None:
    opener = Opener()
    assert opener.run(storage, "r-1") == 1
    opener.fail = True
    assert opener.run(storage, "r-1") == 1
    assert accounts(storage) == [1]
    assert opener.discarded == 1


def test_a_new_requests_error_stands_and_stores_nothing(storage: Storage) -> None:
    opener = Opener()
    opener.fail = True
    with pytest.raises(IllegalState):
        opener.run(storage, "r-1")
    assert opener.discarded == 0
    opener.fail = False
    assert opener.run(storage, "r-1") == 2  # evaluated afresh
    assert accounts(storage) == [2]


@pytest.mark.parametrize("fail", [False, True])
def test_the_same_id_with_other_content_is_refused(storage: Storage, fail: bool) -> None:
    opener = Opener()
    assert opener.run(storage, "r-1") == 1
    opener.fail = fail
    with pytest.raises(InvalidInput) as refused:
        opener.run(storage, "r-1", {"n": 2})
    assert refused.value.field == "request_id"
    assert accounts(storage) == [1]


def test_concurrent_duplicates_share_one_answer_and_one_change(storage: Storage) -> None:
    opener = Opener()
    answers: list[int] = []
    errors: list[BaseException] = []
    start = threading.Barrier(6)

    def one() -> None:
        start.wait(10)
        try:
            answers.append(opener.run(storage, "dup"))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=one) for _ in range(6)]
    call: Callable[[threading.Thread], None]
    for call in (threading.Thread.start, threading.Thread.join):
        for thread in threads:
            call(thread)
    assert errors == []
    assert len(answers) == 6 and len(set(answers)) == 1
    assert accounts(storage) == answers[:1]
