"""The SP 800-22 battery: many sequences through all 15 tests, then the standard's two criteria.

Section 4.2 of SP 800-22 rev1a judges a generator by the P-values of m sequences, per row of the
final analysis report (a row is one P-value a test produces per sequence; there are 188 rows):

* **Proportion**: the fraction of sequences with P >= alpha must lie in
  p̂ ± 3·sqrt(p̂(1 - p̂)/m), p̂ = 1 - alpha.
* **Uniformity**: the P-values, binned into ten equal bins, give a chi-square statistic with 9
  degrees of freedom; its P-value P_T must be >= 0.0001. The standard asks for at least 55
  sequences for this; with fewer it is not evaluated.

Random excursions rows count only sequences with enough cycles (J >= max(0.005·sqrt(n), 500)).

**Verdict.** With 188 rows, a perfect generator fails the proportion interval of a few rows in most
full-size runs (at m=100 each row fails with probability ~1.8 %), so "any row fails" is not a usable
verdict and the standard leaves interpretation to the tester. This battery FAILS when any of:

1. a row's uniformity P_T < 0.0001 (the standard's threshold, per row);
2. a row's pass count is so low that a correct generator would reach it with probability below
   0.001 / rows (a Bonferroni-corrected proportion test: one test failing badly);
3. more rows fail the proportion interval than a correct generator would produce with
   probability 0.001 (each row's failure probability computed exactly from the binomial; rows
   treated as independent).

Every row's own proportion and uniformity flags are reported as the standard defines them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np
from scipy.special import gammaincc
from scipy.stats import binom

from rng_service.lab.stats import sp800_22
from rng_service.lab.stats.sp800_22 import Bits, TestResult

ALPHA = 0.01
UNIFORMITY_THRESHOLD = 0.0001
MIN_SEQUENCES_FOR_UNIFORMITY = 55
#: Family-wise false-alarm target of the verdict's rules 2 and 3.
VERDICT_LEVEL = 0.001


@dataclass(frozen=True)
class RowSummary:
    """One row of the final analysis report over all sequences."""

    test: str
    label: str
    sample_size: int
    passed: int
    histogram: tuple[int, ...]
    proportion_range: tuple[float, float] | None
    uniformity_p: float | None
    #: P(pass count <= observed) for a correct generator: small means too many failures.
    proportion_tail: float | None
    #: Probability that a correct generator fails this row's proportion interval.
    false_failure_probability: float

    @property
    def name(self) -> str:
        """The row's name as the report prints it: the test, then its label (if any)."""
        return f"{self.test} {self.label}".strip()

    @property
    def proportion(self) -> float | None:
        """The share of sequences passing at ``alpha``; None without sequences."""
        return self.passed / self.sample_size if self.sample_size else None

    @property
    def proportion_ok(self) -> bool | None:
        """Whether the proportion lies in its acceptable range; None when not evaluated."""
        if self.proportion is None or self.proportion_range is None:
            return None
        low, high = self.proportion_range
        return low <= self.proportion <= high

    @property
    def uniformity_ok(self) -> bool | None:
        """Whether the P-values are uniform (SP 800-22 section 4.2.2); None when not evaluated."""
        return None if self.uniformity_p is None else self.uniformity_p >= UNIFORMITY_THRESHOLD

    @property
    def ok(self) -> bool:
        """Both of the standard's criteria hold (criteria not evaluated count as holding)."""
        return self.proportion_ok is not False and self.uniformity_ok is not False


@dataclass(frozen=True)
class BatteryResult:
    """The judged battery: every row, the verdict and the reasons for it."""
    n_bits: int
    sequences: int
    alpha: float
    rows: tuple[RowSummary, ...]
    allowed_proportion_failures: int
    reasons: tuple[str, ...]
    #: Rows that failed the verdict on their own (rules 1 and 2).
    decisive_rows: tuple[str, ...] = ()
    elapsed_seconds: float = 0.0
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def passed(self) -> bool:
        """The verdict: True when nothing failed."""
        return not self.reasons

    @property
    def proportion_failures(self) -> int:
        """How many rows fail the proportion criterion."""
        return sum(1 for row in self.rows if row.proportion_ok is False)


def proportion_range(sample_size: int, alpha: float = ALPHA) -> tuple[float, float]:
    """The acceptable proportion of passing sequences, ``p ± 3 sqrt(p (1 - p) / m)`` with
    ``p = 1 - alpha`` (SP 800-22 section 4.2.1).
    """
    p_hat = 1 - alpha
    half = 3 * math.sqrt(p_hat * (1 - p_hat) / sample_size)
    return p_hat - half, p_hat + half


def uniformity_p_value(p_values: Iterable[float]) -> tuple[float, tuple[int, ...]]:
    """P-value of the chi-square over ten equal bins (a P-value of 1.0 falls in the last bin)."""
    values = np.asarray(list(p_values), dtype=np.float64)
    bins = np.minimum((values * 10).astype(np.int64), 9)
    histogram = np.bincount(bins, minlength=10)
    expected = len(values) / 10
    chi2 = float(np.sum((histogram - expected) ** 2 / expected))
    return float(gammaincc(9 / 2, chi2 / 2)), tuple(int(h) for h in histogram)


def _false_failure_probability(sample_size: int, alpha: float) -> float:
    low, high = proportion_range(sample_size, alpha)
    passes = np.arange(sample_size + 1)
    inside = (passes / sample_size >= low) & (passes / sample_size <= high)
    return float(1 - binom.pmf(passes[inside], sample_size, 1 - alpha).sum())


def summarize_row(test: str, label: str, p_values: list[float], alpha: float = ALPHA) -> RowSummary:
    """One row's summary: how many of its P-values pass, their histogram and uniformity."""
    size = len(p_values)
    if size == 0:
        return RowSummary(test, label, 0, 0, (0,) * 10, None, None, None, 0.0)
    passed = sum(1 for p in p_values if p >= alpha)
    uniformity, histogram = uniformity_p_value(p_values)
    return RowSummary(
        test=test,
        label=label,
        sample_size=size,
        passed=passed,
        histogram=histogram,
        proportion_range=proportion_range(size, alpha),
        uniformity_p=uniformity if size >= MIN_SEQUENCES_FOR_UNIFORMITY else None,
        proportion_tail=float(binom.cdf(passed, size, 1 - alpha)),
        false_failure_probability=_false_failure_probability(size, alpha),
    )


def allowed_failures(probabilities: Iterable[float], level: float = VERDICT_LEVEL) -> int:
    """Smallest c with P(more than c rows fail) <= level, rows failing independently."""
    distribution = np.array([1.0])
    for q in probabilities:
        distribution = np.convolve(distribution, [1 - q, q])
    tail = 1 - np.cumsum(distribution)
    return int(np.argmax(tail <= level))


class BatteryCollector:
    """Accumulates each row's P-values sequence by sequence, then judges them."""

    def __init__(self, n_bits: int, alpha: float = ALPHA) -> None:
        self.n_bits = n_bits
        self.alpha = alpha
        self.sequences = 0
        self._rows: dict[tuple[str, str], list[float]] = {}

    def add(self, results: Iterable[TestResult]) -> None:
        """Add the results of one more sequence."""
        self.sequences += 1
        for result in results:
            for label, p in zip(result.labels, result.p_values, strict=True):
                values = self._rows.setdefault((result.name, label), [])
                if result.applicable:
                    values.append(p)

    def result(self, elapsed_seconds: float = 0.0) -> BatteryResult:
        """The battery judged over every sequence added."""
        rows = tuple(summarize_row(test, label, values, self.alpha)
                     for (test, label), values in self._rows.items())
        return judge(rows, self.n_bits, self.sequences, self.alpha, elapsed_seconds)


def judge(rows: tuple[RowSummary, ...], n_bits: int, sequences: int, alpha: float,
          elapsed_seconds: float = 0.0) -> BatteryResult:
    """The verdict over ``rows``: proportion failures beyond the allowance, and non-uniform
    P-values, fail the battery; the reasons and notes say which rows decided.
    """
    evaluated = [row for row in rows if row.sample_size > 0]
    reasons: list[str] = []
    decisive: list[str] = []
    notes: list[str] = []
    empty = dict.fromkeys(row.test for row in rows if row.sample_size == 0)
    notes.extend(f"{test}: no sequence had enough cycles; not evaluated" for test in empty)
    if sequences < MIN_SEQUENCES_FOR_UNIFORMITY:
        notes.append(f"uniformity not evaluated: {sequences} sequences, the standard asks for "
                     f"at least {MIN_SEQUENCES_FOR_UNIFORMITY}")
    for row in evaluated:
        if row.uniformity_ok is False:
            reasons.append(f"{row.name}: P-values not uniform (P_T = {row.uniformity_p:.6f})")
            decisive.append(row.name)
    bonferroni = VERDICT_LEVEL / max(len(evaluated), 1)
    for row in evaluated:
        if row.proportion_tail is not None and row.proportion_tail < bonferroni:
            reasons.append(f"{row.name}: only {row.passed}/{row.sample_size} sequences pass "
                           f"(chance for a correct generator {row.proportion_tail:.2e})")
            decisive.append(row.name)
    allowed = allowed_failures(row.false_failure_probability for row in evaluated)
    failing = sum(1 for row in evaluated if row.proportion_ok is False)
    if failing > allowed:
        reasons.append(f"{failing} rows fail the proportion criterion; a correct generator "
                       f"exceeds {allowed} with probability <= {VERDICT_LEVEL}")
    return BatteryResult(n_bits, sequences, alpha, rows, allowed, tuple(reasons),
                         tuple(dict.fromkeys(decisive)), elapsed_seconds, tuple(notes))


def split_sequences(chunks: Iterable[bytes], n_bits: int, count: int) -> Iterator[Bits]:
    """Cut a byte stream (most significant bit first) into ``count`` sequences of ``n_bits``."""
    pending = np.zeros(0, dtype=np.uint8)
    produced = 0
    for chunk in chunks:
        pending = np.concatenate([pending, np.unpackbits(np.frombuffer(chunk, dtype=np.uint8))])
        while len(pending) >= n_bits and produced < count:
            yield pending[:n_bits]
            pending = pending[n_bits:]
            produced += 1
        if produced == count:
            return
    if produced < count:
        raise ValueError(f"the stream ended after {produced} of {count} sequences")


def run_battery(sequences: Iterable[Bits], n_bits: int, *, alpha: float = ALPHA,
                on_sequence: Callable[[], object] | None = None,
                clock: Callable[[], float] | None = None) -> BatteryResult:
    """Run all 15 tests over every sequence (each exactly ``n_bits`` long) and judge the rows."""
    if n_bits < sp800_22.BATTERY_MIN_BITS:
        raise ValueError(f"the battery's parameters need sequences of at least "
                         f"{sp800_22.BATTERY_MIN_BITS} bits, got {n_bits}")
    start = clock() if clock else 0.0
    collector = BatteryCollector(n_bits, alpha)
    for bits in sequences:
        if len(bits) != n_bits:
            raise ValueError(f"sequence of {len(bits)} bits, expected {n_bits}")
        collector.add(sp800_22.run_all(bits))
        if on_sequence:
            on_sequence()
    if collector.sequences == 0:
        raise ValueError("no sequences to test")
    elapsed = (clock() - start) if clock else 0.0
    return collector.result(elapsed)
