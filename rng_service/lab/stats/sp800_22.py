"""The 15 statistical tests of NIST SP 800-22 rev1a, vectorised with numpy.

Each test takes a sequence of bits (``0``/``1`` values; see :func:`as_bits`) and returns a
:class:`TestResult` with one P-value per row of the standard's final analysis report (most tests
have one row; cumulative sums 2, serial 2, random excursions 8, its variant 18, non-overlapping
templates one per template). Parameters default to the standard's (and its reference code
sts-2.1.2's) values.

Where the standard's reference code and its text disagree, the choice is stated beside the code:

* Overlapping template matching: the category probabilities default to the exact values (Hamano and
  Kaneko's correction, quoted in rev1a section 3.8 for m=9, M=1032), computed here by dynamic
  programming for any template and block length. The worked examples 2.8.4/2.8.8 and Appendix B
  were produced with the older compound-Poisson approximation; ``pi="asymptotic"`` reproduces them.
* Linear complexity: the category probabilities are the reference code's table (0.01047 for the
  first class, not 1/96), with which the standard's published results (2.10.8, Appendix B) were
  made.
* Cumulative sums: the summation bounds use C integer division as the reference code does; the
  worked example 2.13.4 (P=0.4116588) depends on it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Literal

import numpy as np
import numpy.typing as npt
from scipy.special import erfc, gammaincc

Bits = npt.NDArray[np.uint8]
IntArray = npt.NDArray[np.int64]


class SequenceTooShortError(ValueError):
    """The sequence is shorter than a test's parameters allow."""


@dataclass(frozen=True)
class TestResult:
    """One test over one sequence.

    ``labels[i]`` names the row of ``p_values[i]`` (``""`` for single-row tests). ``applicable`` is
    False when the standard says the result must not be counted (random excursions with too few
    cycles); the P-values are still computed.
    """

    __test__ = False  # not a pytest class

    name: str
    p_values: tuple[float, ...]
    labels: tuple[str, ...] = ("",)
    statistics: tuple[float, ...] = ()
    applicable: bool = True
    details: Mapping[str, object] = field(default_factory=dict)

    @property
    def p_value(self) -> float:
        """The test's one P-value (ValueError for a test with several)."""
        if len(self.p_values) != 1:
            raise ValueError(f"{self.name} has {len(self.p_values)} P-values")
        return self.p_values[0]

    def row(self, label: str) -> float:
        """The P-value of the row ``label``."""
        return self.p_values[self.labels.index(label)]


# --------------------------------------------------------------------------------------------------
# Bit helpers


def as_bits(data: str | bytes | Iterable[int] | npt.NDArray[np.integer]) -> Bits:
    """Bits from a ``"0101"`` string (spaces ignored), raw bytes (most significant bit first) or
    an iterable of 0/1 values."""
    if isinstance(data, str):
        text = "".join(data.split())
        if set(text) - {"0", "1"}:
            raise ValueError("a bit string may only contain 0 and 1")
        return np.frombuffer(text.encode("ascii"), dtype=np.uint8) - np.uint8(ord("0"))
    if isinstance(data, bytes | bytearray | memoryview):
        return np.unpackbits(np.frombuffer(bytes(data), dtype=np.uint8))
    bits = np.asarray(data if isinstance(data, np.ndarray) else list(data), dtype=np.uint8)
    if bits.ndim != 1 or np.any(bits > 1):
        raise ValueError("bits must be a flat sequence of 0 and 1")
    return bits


def _windows(bits: Bits, m: int, *, wrap: bool = False) -> IntArray:
    """The integer value of every m-bit window, first bit most significant.

    With ``wrap`` the sequence is extended by its first m-1 bits, so there are n windows.
    """
    ext = np.concatenate([bits, bits[: m - 1]]) if wrap else bits
    count = len(ext) - m + 1
    if count <= 0:
        return np.zeros(0, dtype=np.int64)
    out = np.zeros(count, dtype=np.int64)
    for j in range(m):
        out <<= 1
        out |= ext[j : j + count]
    return out


def _igamc(a: float, x: float) -> float:
    return float(gammaincc(a, x))


def _erfc(x: float) -> float:
    return float(erfc(x))


def _chi_square(observed: npt.ArrayLike, expected: npt.ArrayLike) -> float:
    obs = np.asarray(observed, dtype=np.float64)
    exp = np.asarray(expected, dtype=np.float64)
    return float(np.sum((obs - exp) ** 2 / exp))


def _require(n: int, minimum: int, test: str) -> None:
    if n < minimum:
        raise SequenceTooShortError(f"{test} needs at least {minimum} bits, got {n}")


# --------------------------------------------------------------------------------------------------
# 2.1 Frequency (monobit)


def frequency(bits: Bits) -> TestResult:
    """SP 800-22 section 2.1: the frequency (monobit) test."""
    n = len(bits)
    _require(n, 1, "frequency")
    s_n = 2 * int(np.count_nonzero(bits)) - n
    s_obs = abs(s_n) / math.sqrt(n)
    return TestResult("Frequency", (_erfc(s_obs / math.sqrt(2)),), statistics=(s_obs,),
                      details={"S_n": s_n})


# 2.2 Frequency within a block


def block_frequency(bits: Bits, M: int = 128) -> TestResult:
    """SP 800-22 section 2.2: the frequency test within blocks of ``M`` bits."""
    n_blocks = len(bits) // M
    _require(n_blocks, 1, f"block frequency with M={M} (blocks)")
    proportions = bits[: n_blocks * M].reshape(n_blocks, M).sum(axis=1) / M
    chi2 = float(4 * M * np.sum((proportions - 0.5) ** 2))
    return TestResult("BlockFrequency", (_igamc(n_blocks / 2, chi2 / 2),), statistics=(chi2,),
                      details={"M": M, "N": n_blocks})


# 2.3 Runs


def runs(bits: Bits) -> TestResult:
    """SP 800-22 section 2.3: the runs test (not applicable when the frequency
    prerequisite fails).
    """
    n = len(bits)
    _require(n, 2, "runs")
    pi = int(np.count_nonzero(bits)) / n
    # The frequency prerequisite: the runs statistic is meaningless for a badly biased sequence.
    if abs(pi - 0.5) >= 2 / math.sqrt(n):
        return TestResult("Runs", (0.0,), details={"pi": pi, "prerequisite_failed": True})
    v_obs = 1 + int(np.count_nonzero(bits[1:] != bits[:-1]))
    num = abs(v_obs - 2 * n * pi * (1 - pi))
    den = 2 * math.sqrt(2 * n) * pi * (1 - pi)
    return TestResult("Runs", (_erfc(num / den),), statistics=(float(v_obs),),
                      details={"pi": pi, "V_n": v_obs})


# 2.4 Longest run of ones in a block

# (M, lowest class v_0, probabilities) of sections 2.4.4 / 3.4, as the reference code has them
_LONGEST_RUN_TABLES: tuple[tuple[int, int, tuple[float, ...]], ...] = (
    (8, 1, (0.21484375, 0.3671875, 0.23046875, 0.1875)),
    (128, 4, (0.1174035788, 0.242955959, 0.249363483, 0.17517706, 0.102701071, 0.112398847)),
    (10_000, 10, (0.0882, 0.2092, 0.2483, 0.1933, 0.1208, 0.0675, 0.0727)),
)


def _longest_runs(blocks: Bits) -> IntArray:
    """The longest run of ones in each row of a 2-D bit array."""
    rows, width = blocks.shape
    padded = np.zeros((rows, width + 2), dtype=np.int8)
    padded[:, 1:-1] = blocks
    edges = np.diff(padded, axis=1)
    start_rows, starts = np.nonzero(edges == 1)
    _, ends = np.nonzero(edges == -1)  # row-major order pairs each start with its end
    longest = np.zeros(rows, dtype=np.int64)
    np.maximum.at(longest, start_rows, ends - starts)
    return longest


def longest_run_of_ones(bits: Bits) -> TestResult:
    """SP 800-22 section 2.4: the longest run of ones in a block."""
    n = len(bits)
    _require(n, 128, "longest run of ones")
    table = _LONGEST_RUN_TABLES[0 if n < 6272 else 1 if n < 750_000 else 2]
    M, v_low, pi = table
    n_blocks = n // M
    longest = _longest_runs(bits[: n_blocks * M].reshape(n_blocks, M))
    k = len(pi) - 1
    classes = np.clip(longest - v_low, 0, k)
    nu = np.bincount(classes, minlength=k + 1)
    chi2 = _chi_square(nu, n_blocks * np.asarray(pi))
    return TestResult("LongestRun", (_igamc(k / 2, chi2 / 2),), statistics=(chi2,),
                      details={"M": M, "N": n_blocks, "nu": nu.tolist()})


# 2.5 Binary matrix rank


def rank_probabilities(M: int = 32, Q: int = 32) -> tuple[float, float, float]:
    """P(rank = full), P(rank = full - 1) and the rest for a random M x Q binary matrix (3.5)."""

    def p_rank(r: int) -> float:
        product = 1.0
        for i in range(r):
            product *= (1 - 2.0 ** (i - Q)) * (1 - 2.0 ** (i - M)) / (1 - 2.0 ** (i - r))
        return 2.0 ** (r * (Q + M - r) - M * Q) * product

    full = min(M, Q)
    p_full, p_minus = p_rank(full), p_rank(full - 1)
    return p_full, p_minus, 1 - p_full - p_minus


def _gf2_ranks(rows: npt.NDArray[np.uint64], width: int) -> IntArray:
    """Rank over GF(2) of each matrix; ``rows[k, i]`` holds row i of matrix k as a bit mask."""
    rows = rows.copy()
    count, height = rows.shape
    index = np.arange(count)
    used = np.zeros((count, height), dtype=bool)
    rank = np.zeros(count, dtype=np.int64)
    for col in range(width):
        bit = np.uint64(1) << np.uint64(width - 1 - col)
        has = (rows & bit) != 0
        candidates = has & ~used
        found = candidates.any(axis=1)
        pivot = candidates.argmax(axis=1)
        pivot_row = rows[index, pivot]
        eliminate = has & found[:, None]
        eliminate[index, pivot] = False
        rows ^= np.where(eliminate, pivot_row[:, None], np.uint64(0))
        used[index[found], pivot[found]] = True
        rank += found
    return rank


def binary_matrix_rank(bits: Bits, M: int = 32, Q: int = 32,
                       probabilities: tuple[float, float, float] | None = None) -> TestResult:
    """``probabilities`` overrides the (full, full-1, rest) rank probabilities of M x Q."""
    if Q > 64:
        raise ValueError("rows wider than 64 bits are not supported")
    n_matrices = len(bits) // (M * Q)
    _require(n_matrices, 1, f"binary matrix rank with {M}x{Q} matrices (matrices)")
    matrix_bits = bits[: n_matrices * M * Q].reshape(n_matrices, M, Q).astype(np.uint64)
    weights = np.uint64(1) << np.arange(Q - 1, -1, -1, dtype=np.uint64)
    rows = (matrix_bits * weights).sum(axis=2, dtype=np.uint64)
    ranks = _gf2_ranks(rows, Q)
    full = min(M, Q)
    f_full = int(np.count_nonzero(ranks == full))
    f_minus = int(np.count_nonzero(ranks == full - 1))
    observed = (f_full, f_minus, n_matrices - f_full - f_minus)
    probs = probabilities if probabilities is not None else rank_probabilities(M, Q)
    chi2 = _chi_square(observed, n_matrices * np.asarray(probs))
    return TestResult("Rank", (math.exp(-chi2 / 2),), statistics=(chi2,),
                      details={"N": n_matrices, "F": observed})


# 2.6 Discrete Fourier transform (spectral)


def spectral(bits: Bits) -> TestResult:
    """SP 800-22 section 2.6: the discrete Fourier transform (spectral) test, with rev1a's
    threshold.
    """
    n = len(bits)
    _require(n, 2, "spectral")
    x = 2.0 * bits - 1.0
    moduli = np.abs(np.fft.rfft(x))[: n // 2]
    threshold = math.sqrt(math.log(1 / 0.05) * n)  # the rev1a threshold, not rev1's sqrt(3n)
    n1 = int(np.count_nonzero(moduli < threshold))
    d, p = spectral_statistic(n1, n)
    return TestResult("FFT", (p,), statistics=(d,),
                      details={"N0": 0.95 * n / 2, "N1": n1, "T": threshold})


def spectral_statistic(n1: int, n: int) -> tuple[float, float]:
    """(d, P-value) from N1, the number of the first n/2 moduli below the threshold."""
    n0 = 0.95 * n / 2
    d = (n1 - n0) / math.sqrt(n * 0.95 * 0.05 / 4)
    return d, _erfc(abs(d) / math.sqrt(2))


# 2.7 Non-overlapping template matching


def is_aperiodic(template: int, m: int) -> bool:
    """True when no proper prefix of the m-bit template equals its suffix (no self-overlap)."""
    for shift in range(1, m):
        width = m - shift
        mask = (1 << width) - 1
        if (template >> shift) == (template & mask):
            return False
    return True


@lru_cache(maxsize=32)
def aperiodic_templates(m: int) -> tuple[int, ...]:
    """All aperiodic m-bit templates in ascending order (148 for m=9, as the reference list)."""
    return tuple(t for t in range(1 << m) if is_aperiodic(t, m))


def template_label(template: int, m: int) -> str:
    """A template's row label: its ``m`` bits.

    >>> template_label(0b101, 4)
    '0101'
    """
    return format(template, f"0{m}b")


def _block_window_counts(bits: Bits, m: int, M: int, n_blocks: int) -> IntArray:
    """counts[b, v]: occurrences of the m-bit value v wholly inside block b."""
    windows = _windows(bits[: n_blocks * M], m)
    starts = np.arange(M - m + 1)
    index = (np.arange(n_blocks)[:, None] * M + starts).ravel()
    block = np.repeat(np.arange(n_blocks), M - m + 1)
    keys = block * (1 << m) + windows[index]
    return np.bincount(keys, minlength=n_blocks << m).reshape(n_blocks, 1 << m)


def non_overlapping_template_matching(bits: Bits, m: int = 9,
                                      templates: Sequence[int] | None = None,
                                      n_blocks: int = 8) -> TestResult:
    """One row per template (default: all aperiodic templates of length m)."""
    chosen = tuple(templates) if templates is not None else aperiodic_templates(m)
    for t in chosen:
        if not is_aperiodic(t, m):
            raise ValueError(f"template {template_label(t, m)} is periodic")
    M = len(bits) // n_blocks
    _require(M, m, f"non-overlapping template matching with {n_blocks} blocks (block length)")
    # An aperiodic template cannot overlap itself, so counting every occurrence equals the
    # standard's scan that skips m bits after each match.
    counts = _block_window_counts(bits, m, M, n_blocks)[:, list(chosen)]
    mu = (M - m + 1) / 2**m
    var = M * (1 / 2**m - (2 * m - 1) / 2 ** (2 * m))
    chi2 = ((counts - mu) ** 2 / var).sum(axis=0)
    p_values = tuple(float(p) for p in gammaincc(n_blocks / 2, chi2 / 2))
    return TestResult("NonOverlappingTemplate", p_values,
                      labels=tuple(template_label(t, m) for t in chosen),
                      statistics=tuple(float(c) for c in chi2),
                      details={"M": M, "N": n_blocks, "mu": mu, "sigma2": var})


# 2.8 Overlapping template matching


def _match_automaton(template: str) -> list[tuple[int, int]]:
    """KMP automaton over template prefixes: state -> (next state on 0, next state on 1)."""
    m = len(template)
    failure = [0] * (m + 1)
    k = 0
    for i in range(1, m):
        while k and template[i] != template[k]:
            k = failure[k]
        if template[i] == template[k]:
            k += 1
        failure[i + 1] = k

    def step(state: int, bit: str) -> int:
        if state == m:
            state = failure[m]
        while state and template[state] != bit:
            state = failure[state]
        return state + 1 if template[state] == bit else 0

    return [(step(s, "0"), step(s, "1")) for s in range(m + 1)]


@lru_cache(maxsize=32)
def overlapping_probabilities_exact(template: str, M: int, K: int = 5) -> tuple[float, ...]:
    """Exact P(0), ..., P(K-1), P(>=K) overlapping occurrences of ``template`` in M random bits.

    Dynamic programming over the matching automaton with integer path counts, so nothing is
    approximated; for 111111111 in 1032 bits it gives Hamano and Kaneko's corrected values.
    """
    m = len(template)
    automaton = _match_automaton(template)
    ways = [[0] * (K + 1) for _ in range(m + 1)]  # ways[state][matches so far, capped at K]
    ways[0][0] = 1
    for _ in range(M):
        nxt = [[0] * (K + 1) for _ in range(m + 1)]
        for state, row in enumerate(ways):
            for target in automaton[state]:
                bump = 1 if target == m else 0
                for count, w in enumerate(row):
                    if w:
                        nxt[target][min(count + bump, K)] += w
        ways = nxt
    totals = [sum(ways[s][c] for s in range(m + 1)) for c in range(K + 1)]
    return tuple(t / 2**M for t in totals)


def overlapping_probabilities_asymptotic(m: int, M: int, K: int = 5) -> tuple[float, ...]:
    """The compound-Poisson approximation of the standard's text (sts-2.1.2 ``Pr(u, eta)``)."""
    eta = (M - m + 1) / 2**m / 2
    probs = [math.exp(-eta)]
    for u in range(1, K):
        probs.append(sum(
            math.exp(-eta - u * math.log(2) + k * math.log(eta) - math.lgamma(k + 1)
                     + math.lgamma(u) - math.lgamma(k) - math.lgamma(u - k + 1))
            for k in range(1, u + 1)))
    probs.append(1 - sum(probs))
    return tuple(probs)


def overlapping_template_matching(
    bits: Bits, m: int = 9, M: int = 1032, K: int = 5, *, template: str | None = None,
    pi: Literal["exact", "asymptotic"] | Sequence[float] = "exact",
) -> TestResult:
    """Default template: m ones. ``pi`` chooses the category probabilities (module docstring)."""
    pattern = template if template is not None else "1" * m
    m = len(pattern)
    n_blocks = len(bits) // M
    _require(n_blocks, 1, f"overlapping template matching with M={M} (blocks)")
    if isinstance(pi, str):
        probs = (overlapping_probabilities_exact(pattern, M, K) if pi == "exact"
                 else overlapping_probabilities_asymptotic(m, M, K))
    else:
        probs = tuple(pi)
    counts = _block_window_counts(bits, m, M, n_blocks)[:, int(pattern, 2)]
    nu = np.bincount(np.minimum(counts, K), minlength=K + 1)
    chi2 = _chi_square(nu, n_blocks * np.asarray(probs))
    return TestResult("OverlappingTemplate", (_igamc(K / 2, chi2 / 2),), statistics=(chi2,),
                      details={"M": M, "N": n_blocks, "nu": nu.tolist(), "pi": list(probs)})


# 2.9 Maurer's universal statistical test

# Expected value and variance of f_n for L = 1..16 (section 2.9.4 / Maurer), index = L.
_UNIVERSAL_EXPECTED = (0.0, 0.7326495, 1.5374383, 2.4016068, 3.3112247, 4.2534266, 5.2177052,
                       6.1962507, 7.1836656, 8.1764248, 9.1723243, 10.170032, 11.168765,
                       12.168070, 13.167693, 14.167488, 15.167379)
_UNIVERSAL_VARIANCE = (0.0, 0.690, 1.338, 1.901, 2.358, 2.705, 2.954, 3.125, 3.238, 3.311, 3.356,
                       3.384, 3.401, 3.410, 3.416, 3.419, 3.421)
# Smallest n for each L from 6 to 16 (section 2.9.7); Q = 10 * 2^L.
_UNIVERSAL_MIN_N = ((16, 1_059_061_760), (15, 496_435_200), (14, 231_669_760),
                    (13, 107_560_960), (12, 49_643_520), (11, 22_753_280), (10, 10_342_400),
                    (9, 4_654_080), (8, 2_068_480), (7, 904_960), (6, 387_840))


def universal_parameters(n: int) -> tuple[int, int]:
    """(L, Q) recommended for an n-bit sequence."""
    for L, minimum in _UNIVERSAL_MIN_N:
        if n >= minimum:
            return L, 10 * 2**L
    raise SequenceTooShortError(f"Maurer's universal test needs at least 387840 bits, got {n}")


def universal(bits: Bits, L: int | None = None, Q: int | None = None) -> TestResult:
    """SP 800-22 section 2.9: Maurer's universal statistical test (``L`` and ``Q`` from the
    length by default).
    """
    n = len(bits)
    if L is None or Q is None:
        L, Q = universal_parameters(n)
    if not 1 <= L <= 16:
        raise ValueError("L must be between 1 and 16")
    total = n // L
    K = total - Q
    _require(K, 1, f"Maurer's universal test with L={L}, Q={Q} (test blocks)")
    weights = 1 << np.arange(L - 1, -1, -1, dtype=np.int64)
    values = bits[: total * L].reshape(total, L).astype(np.int64) @ weights
    position = np.arange(1, total + 1)
    # Previous occurrence of each block's value: sort by (value, position), neighbours share value.
    order = np.lexsort((position, values))
    previous_sorted = np.zeros(total, dtype=np.int64)
    same = values[order][1:] == values[order][:-1]
    previous_sorted[1:] = np.where(same, position[order][:-1], 0)
    previous = np.empty(total, dtype=np.int64)
    previous[order] = previous_sorted
    distances = position[Q:] - previous[Q:]  # a value never seen before counts from position 0
    fn = float(np.sum(np.log2(distances))) / K
    c = 0.7 - 0.8 / L + (4 + 32 / L) * K ** (-3 / L) / 15
    sigma = c * math.sqrt(_UNIVERSAL_VARIANCE[L] / K)
    expected = _UNIVERSAL_EXPECTED[L]
    p = _erfc(abs(fn - expected) / (math.sqrt(2) * sigma))
    return TestResult("Universal", (p,), statistics=(fn,),
                      details={"L": L, "Q": Q, "K": K, "expected": expected, "sigma": sigma})


# 2.10 Linear complexity

# The reference code's probabilities (sts-2.1.2); they reproduce 2.10.8 and Appendix B.
_LINEAR_COMPLEXITY_PI = (0.01047, 0.03125, 0.12500, 0.50000, 0.25000, 0.06250, 0.020833)


def _shift_up(words: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """Multiply each row's bit polynomial by x (bit i moves to bit i+1 across 64-bit words)."""
    carry = np.zeros_like(words)
    carry[:, 1:] = words[:, :-1] >> np.uint64(63)
    return (words << np.uint64(1)) | carry


def linear_complexities(blocks: Bits) -> IntArray:
    """Berlekamp–Massey linear complexity of each row, all rows at once, on packed bits."""
    count, M = blocks.shape
    n_words = (M + 64) // 64
    connection = np.zeros((count, n_words), dtype=np.uint64)  # C(x), bit i = c_i
    connection[:, 0] = 1
    shifted_prev = np.zeros_like(connection)  # x^m * B(x) in Massey's notation
    shifted_prev[:, 0] = 2
    window = np.zeros_like(connection)  # bit i = s_{n-i}
    length = np.zeros(count, dtype=np.int64)
    for n in range(M):
        window = _shift_up(window)
        window[:, 0] |= blocks[:, n].astype(np.uint64)
        folded = np.bitwise_xor.reduce(connection & window, axis=1)
        discrepancy = (np.bitwise_count(folded) & 1).astype(bool)
        grows = discrepancy & (2 * length <= n)
        previous = connection
        connection = np.where(discrepancy[:, None], connection ^ shifted_prev, connection)
        shifted_prev = _shift_up(np.where(grows[:, None], previous, shifted_prev))
        length = np.where(grows, n + 1 - length, length)
    return length


def linear_complexity(bits: Bits, M: int = 500) -> TestResult:
    """SP 800-22 section 2.10: the linear complexity test over blocks of ``M`` bits."""
    n_blocks = len(bits) // M
    _require(n_blocks, 1, f"linear complexity with M={M} (blocks)")
    lengths = linear_complexities(bits[: n_blocks * M].reshape(n_blocks, M))
    mu = M / 2 + (9 + (-1) ** (M + 1)) / 36 - (M / 3 + 2 / 9) / 2**M
    t = (-1) ** M * (lengths - mu) + 2 / 9
    classes = np.digitize(t, [-2.5, -1.5, -0.5, 0.5, 1.5, 2.5], right=True)
    nu = np.bincount(classes, minlength=7)
    chi2 = _chi_square(nu, n_blocks * np.asarray(_LINEAR_COMPLEXITY_PI))
    return TestResult("LinearComplexity", (_igamc(3, chi2 / 2),), statistics=(chi2,),
                      details={"M": M, "N": n_blocks, "mu": mu, "nu": nu.tolist(),
                               "L": lengths.tolist() if n_blocks <= 16 else None})


# 2.11 Serial


def _psi_squared(bits: Bits, m: int) -> float:
    if m <= 0:
        return 0.0
    n = len(bits)
    counts = np.bincount(_windows(bits, m, wrap=True), minlength=1 << m).astype(np.float64)
    return float(2**m / n * np.sum(counts**2) - n)


def serial(bits: Bits, m: int = 16) -> TestResult:
    """SP 800-22 section 2.11: the serial test (two P-values)."""
    _require(len(bits), m, f"serial with m={m}")
    psi = [_psi_squared(bits, m - k) for k in range(3)]
    delta1 = psi[0] - psi[1]
    delta2 = psi[0] - 2 * psi[1] + psi[2]
    p1 = _igamc(2 ** (m - 2), delta1 / 2)
    p2 = _igamc(2 ** (m - 3), delta2 / 2)
    return TestResult("Serial", (p1, p2), labels=("1", "2"), statistics=(delta1, delta2),
                      details={"m": m, "psi2": psi})


# 2.12 Approximate entropy


def _phi(bits: Bits, m: int) -> float:
    if m <= 0:
        return 0.0
    n = len(bits)
    counts = np.bincount(_windows(bits, m, wrap=True), minlength=1 << m)
    c = counts[counts > 0] / n
    return float(np.sum(c * np.log(c)))


def approximate_entropy(bits: Bits, m: int = 10) -> TestResult:
    """SP 800-22 section 2.12: the approximate entropy test."""
    n = len(bits)
    _require(n, m + 1, f"approximate entropy with m={m}")
    apen = _phi(bits, m) - _phi(bits, m + 1)
    chi2 = 2 * n * (math.log(2) - apen)
    return TestResult("ApproximateEntropy", (_igamc(2 ** (m - 1), chi2 / 2),),
                      statistics=(chi2,), details={"m": m, "ApEn": apen})


# 2.13 Cumulative sums


def _c_div(a: int, b: int) -> int:
    """Integer division truncating toward zero, as C does."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _normal_cdf(x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    return np.asarray(0.5 * erfc(-x / math.sqrt(2)), dtype=np.float64)


def _cusum_p_value(z: int, n: int) -> float:
    root = math.sqrt(n)
    k1 = np.arange(_c_div(_c_div(-n, z) + 1, 4), _c_div(_c_div(n, z) - 1, 4) + 1)
    sum1 = np.sum(_normal_cdf((4 * k1 + 1) * z / root) - _normal_cdf((4 * k1 - 1) * z / root))
    k2 = np.arange(_c_div(_c_div(-n, z) - 3, 4), _c_div(_c_div(n, z) - 1, 4) + 1)
    sum2 = np.sum(_normal_cdf((4 * k2 + 3) * z / root) - _normal_cdf((4 * k2 + 1) * z / root))
    return float(1 - sum1 + sum2)


def cumulative_sums(bits: Bits) -> TestResult:
    """Two rows: forward (mode 0) and backward (mode 1)."""
    n = len(bits)
    _require(n, 1, "cumulative sums")
    steps = 2 * bits.astype(np.int64) - 1
    z_forward = int(np.max(np.abs(np.cumsum(steps))))
    z_backward = int(np.max(np.abs(np.cumsum(steps[::-1]))))
    return TestResult("CumulativeSums",
                      (_cusum_p_value(z_forward, n), _cusum_p_value(z_backward, n)),
                      labels=("forward", "backward"),
                      statistics=(float(z_forward), float(z_backward)))


# 2.14 / 2.15 Random excursions and its variant


def _excursion_walk(bits: Bits) -> tuple[IntArray, int]:
    """The partial sums S_1..S_n and the number of cycles J (excursions from zero)."""
    walk = np.cumsum(2 * bits.astype(np.int64) - 1)
    zeros = int(np.count_nonzero(walk == 0))
    cycles = zeros + (1 if walk[-1] != 0 else 0)
    return walk, cycles


def excursion_cycle_minimum(n: int) -> float:
    """Fewer cycles than this and the random excursions tests do not apply (3.14)."""
    return max(0.005 * math.sqrt(n), 500)


def _excursion_pi(x: int) -> tuple[float, ...]:
    """P(a cycle visits state x exactly k times), k = 0..4, and >= 5 (section 3.14)."""
    a = abs(x)
    pis = [1 - 1 / (2 * a)]
    pis += [1 / (4 * a * a) * (1 - 1 / (2 * a)) ** (k - 1) for k in range(1, 5)]
    pis.append(1 / (2 * a) * (1 - 1 / (2 * a)) ** 4)
    return tuple(pis)


EXCURSION_STATES = (-4, -3, -2, -1, 1, 2, 3, 4)
VARIANT_STATES = tuple(x for x in range(-9, 10) if x != 0)


def state_label(x: int) -> str:
    """A random-excursions state's row label.

    >>> state_label(-4), state_label(3)
    ('x=-4', 'x=+3')
    """
    return f"x={x:+d}"


def random_excursions(bits: Bits) -> TestResult:
    """SP 800-22 section 2.14: the random excursions test (one P-value per state)."""
    n = len(bits)
    _require(n, 1, "random excursions")
    walk, cycles = _excursion_walk(bits)
    # Cycle of each step: the number of zeros strictly before it (a zero closes its cycle).
    cycle_of = np.concatenate([[0], np.cumsum(walk == 0)[:-1]])
    in_range = (np.abs(walk) >= 1) & (np.abs(walk) <= 4)
    state_index = np.where(walk[in_range] < 0, walk[in_range] + 4, walk[in_range] + 3)
    visits = np.bincount(cycle_of[in_range] * 8 + state_index,
                         minlength=(cycles + 1) * 8)[: cycles * 8].reshape(cycles, 8)
    p_values, stats = [], []
    nus = {}
    for column, x in enumerate(EXCURSION_STATES):
        nu = np.bincount(np.minimum(visits[:, column], 5), minlength=6)
        chi2 = _chi_square(nu, cycles * np.asarray(_excursion_pi(x)))
        nus[state_label(x)] = nu.tolist()
        stats.append(chi2)
        p_values.append(_igamc(2.5, chi2 / 2))
    return TestResult("RandomExcursions", tuple(p_values),
                      labels=tuple(state_label(x) for x in EXCURSION_STATES),
                      statistics=tuple(stats), applicable=cycles >= excursion_cycle_minimum(n),
                      details={"J": cycles, "nu": nus})


def random_excursions_variant(bits: Bits) -> TestResult:
    """SP 800-22 section 2.15: the random excursions variant test (one P-value per state)."""
    n = len(bits)
    _require(n, 1, "random excursions variant")
    walk, cycles = _excursion_walk(bits)
    in_range = np.abs(walk) <= 9
    totals = np.bincount(walk[in_range] + 9, minlength=19)
    p_values, xi = [], []
    for x in VARIANT_STATES:
        count = int(totals[x + 9])
        xi.append(float(count))
        p_values.append(_erfc(abs(count - cycles) / math.sqrt(2 * cycles * (4 * abs(x) - 2))))
    return TestResult("RandomExcursionsVariant", tuple(p_values),
                      labels=tuple(state_label(x) for x in VARIANT_STATES),
                      statistics=tuple(xi), applicable=cycles >= excursion_cycle_minimum(n),
                      details={"J": cycles})


# --------------------------------------------------------------------------------------------------
# All 15 with the battery's parameters

#: The order of the reference code's final analysis report.
TEST_NAMES = ("Frequency", "BlockFrequency", "CumulativeSums", "Runs", "LongestRun", "Rank",
              "FFT", "NonOverlappingTemplate", "OverlappingTemplate", "Universal",
              "ApproximateEntropy", "RandomExcursions", "RandomExcursionsVariant", "Serial",
              "LinearComplexity")

#: Minimum sequence length for the battery: several tests' parameters assume n >= 10^6.
BATTERY_MIN_BITS = 1_000_000


def run_all(bits: Bits) -> list[TestResult]:
    """All 15 tests with the standard's default parameters (block frequency M=128, templates m=9,
    approximate entropy m=10, serial m=16, linear complexity M=500), in report order."""
    return [
        frequency(bits),
        block_frequency(bits, 128),
        cumulative_sums(bits),
        runs(bits),
        longest_run_of_ones(bits),
        binary_matrix_rank(bits),
        spectral(bits),
        non_overlapping_template_matching(bits, 9),
        overlapping_template_matching(bits, 9),
        universal(bits),
        approximate_entropy(bits, 10),
        random_excursions(bits),
        random_excursions_variant(bits),
        serial(bits, 16),
        linear_complexity(bits, 500),
    ]
