"""The signed envelopes' tables (records, reveals, RNG draws): stored once, read by id, and
paged through by the audit export; written once for both databases
(:mod:`rng_service.storage.sql.dialect`)."""

from __future__ import annotations

from typing import Final

from rng_service.service.ports import EnvelopeKind, RngDrawRow, StoredEnvelope, utc_now
from rng_service.storage.sql.dialect import SharedSql, SqlDialect

#: (kind, table, id column, envelope column) of each stored envelope, in EnvelopeKind order
ENVELOPE_SOURCES: Final = (
    (EnvelopeKind.ROUND, "records", "round_id", "envelope"),
    (EnvelopeKind.SHOE_REVEAL, "reveals", "shoe_id", "envelope"),
    (EnvelopeKind.RNG, "rng_draws", "draw_id", "record"),
    (EnvelopeKind.RNG_REVEAL, "rng_draws", "draw_id", "reveal"),
)


class EnvelopeSql:
    """The envelopes' statements in one dialect."""

    __slots__ = ("get_record", "get_reveal", "limit_each", "listing", "put_record", "put_reveal",
                 "put_rng_draw")

    def __init__(self, d: SqlDialect) -> None:
        self.put_record = d.q("INSERT INTO records VALUES (?, ?, ?, ?)")
        self.get_record = d.q("SELECT envelope FROM records WHERE operator = ? AND round_id = ?")
        self.put_reveal = d.q("INSERT INTO reveals VALUES (?, ?, ?, ?)")
        self.get_reveal = d.q("SELECT envelope FROM reveals WHERE operator = ? AND shoe_id = ?")
        self.put_rng_draw = d.q("INSERT INTO rng_draws (operator, draw_id, kind, commitment, "
                                "record, reveal, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)")
        #: a page's statement by the kind of the cursor it follows (None: the first page)
        self.listing = {kind: d.q(_listing(d, kind)) for kind in (None, *EnvelopeKind)}
        self.limit_each = d.limit_each


def _after(kind: EnvelopeKind, id_column: str, cursor: EnvelopeKind | None) -> str:
    """The condition "after the cursor" on one envelope source, in (created_at, kind, id)
    order, for a cursor of kind ``cursor``: a plain range on the source's
    (operator, created_at, id) index. Its parameters: :func:`_after_params`."""
    if cursor is None:
        return "TRUE"
    if kind.rank > cursor.rank:
        return "created_at >= ?"
    if kind.rank < cursor.rank:
        return "created_at > ?"
    return f"(created_at, {id_column}) > (?, ?)"


def _after_params(kind: EnvelopeKind, cursor: StoredEnvelope | None) -> tuple[str, ...]:
    if cursor is None:
        return ()
    if kind == cursor.kind:
        return cursor.created_at, cursor.ident
    return (cursor.created_at,)


def _listing(d: SqlDialect, cursor: EnvelopeKind | None) -> str:
    # SQLite: a compound SELECT ordered as a whole, whose sources' index scans SQLite merges, so
    # a page reads about ``limit`` rows of each source, never a whole table. PostgreSQL: each
    # source's page is one range scan of its (operator, created_at, id) index, at most
    # ``limit`` rows; the page of the whole listing is the first ``limit`` of their union.
    selects = []
    for kind, table, id_column, column in ENVELOPE_SOURCES:
        select = (f"SELECT '{kind}'{d.text_cast} AS kind, {kind.rank} AS rank, "
                  f"{id_column} AS ident, {column} AS envelope, created_at FROM {table} "
                  "WHERE operator = ? AND created_at >= ? AND created_at < ? AND "
                  f"{_after(kind, id_column, cursor)}")
        if d.limit_each:
            select = f"({select} ORDER BY created_at, {id_column} LIMIT ?)"
        selects.append(select)
    return " UNION ALL ".join(selects) + " ORDER BY 5, 2, 3 LIMIT ?"


class EnvelopeTables(SharedSql):
    """Records, reveals and RNG draws: a part of the unit of work."""

    def put_record(self, operator: str, round_id: str, envelope: bytes) -> None:
        """Store the signed record of a finished round."""
        self._write(self._sql.envelopes.put_record, (operator, round_id, envelope, utc_now()))

    def get_record(self, operator: str, round_id: str) -> bytes | None:
        """The signed record of round ``round_id``, or None if none is stored."""
        row = self._one(self._sql.envelopes.get_record, (operator, round_id))
        return None if row is None else bytes(row[0])

    def put_reveal(self, operator: str, shoe_id: str, envelope: bytes) -> None:
        """Store the signed reveal of a finished shoe."""
        self._write(self._sql.envelopes.put_reveal, (operator, shoe_id, envelope, utc_now()))

    def get_reveal(self, operator: str, shoe_id: str) -> bytes | None:
        """The signed reveal of shoe ``shoe_id``, or None if none is stored yet."""
        row = self._one(self._sql.envelopes.get_reveal, (operator, shoe_id))
        return None if row is None else bytes(row[0])

    def put_rng_draw(self, row: RngDrawRow) -> None:
        """Store a certified draw's record and reveal."""
        self._write(self._sql.envelopes.put_rng_draw,
                    (row.operator, row.draw_id, row.kind, row.commitment, row.record,
                     row.reveal, row.created_at))

    def list_envelopes(self, operator: str, start: str, end: str,
                       after: StoredEnvelope | None, limit: int) -> list[StoredEnvelope]:
        """At most ``limit`` signed envelopes stored at ``start <= created_at < end``,
        ordered by (created_at, kind, id), strictly after ``after`` if given."""
        sql = self._sql.envelopes
        each = (limit,) if sql.limit_each else ()
        params: list[object] = []
        for kind, _, _, _ in ENVELOPE_SOURCES:
            params += [operator, start, end, *_after_params(kind, after), *each]
        params.append(limit)
        rows = self._all(sql.listing[None if after is None else after.kind], params)
        return [StoredEnvelope(EnvelopeKind(k), ident, bytes(env), created)
                for k, _, ident, env, created in rows]
