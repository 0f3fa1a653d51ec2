"""Text and JSON reports of the SP 800-22 battery and the shuffle tests."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rng_service.lab.stats.battery import BatteryResult, RowSummary
from rng_service.lab.stats.shuffle_tests import SHUFFLE_ALPHA, ShuffleTestResult


def _groups(rows: Sequence[RowSummary]) -> dict[str, list[RowSummary]]:
    groups: dict[str, list[RowSummary]] = {}
    for row in rows:
        groups.setdefault(row.test, []).append(row)
    return groups


def _worst_proportion(rows: list[RowSummary]) -> RowSummary | None:
    evaluated = [row for row in rows if row.sample_size]
    if not evaluated:
        return None
    return min(evaluated, key=lambda row: (row.proportion_tail or 0.0, row.label))


def _group_result(rows: list[RowSummary], decisive: set[str]) -> str:
    if any(row.name in decisive for row in rows):
        return "FAIL"
    if all(row.sample_size == 0 for row in rows):
        return "n/a"
    flagged = sum(1 for row in rows if not row.ok)
    return f"flagged {flagged}" if flagged else "ok"


def battery_table(result: BatteryResult) -> str:
    """One line per test (multi-row tests show their worst row), then the verdict."""
    decisive = set(result.decisive_rows)
    header = (f"{'test':<24} {'rows':>4} {'seqs':>5} {'worst proportion':>26} "
              f"{'min allowed':>11} {'min P_T':>9}  result")
    lines = [f"NIST SP 800-22 rev1a: {result.sequences} sequences of {result.n_bits} bits, "
             f"alpha = {result.alpha}", header, "-" * len(header)]
    for test, rows in _groups(result.rows).items():
        worst = _worst_proportion(rows)
        if worst is None or worst.proportion_range is None:
            proportion, allowed = "-", "-"
        else:
            where = f" ({worst.label})" if len(rows) > 1 else ""
            proportion = f"{worst.passed}/{worst.sample_size}{where}"
            allowed = f"{worst.proportion_range[0]:.4f}"
        uniform = [row.uniformity_p for row in rows if row.uniformity_p is not None]
        min_pt = f"{min(uniform):.6f}" if uniform else "-"
        seqs = max(row.sample_size for row in rows)
        lines.append(f"{test:<24} {len(rows):>4} {seqs:>5} {proportion:>26} {allowed:>11} "
                     f"{min_pt:>9}  {_group_result(rows, decisive)}")
    lines.append("")
    lines.append(f"rows outside the proportion interval: {result.proportion_failures} of "
                 f"{sum(1 for r in result.rows if r.sample_size)} (a correct generator exceeds "
                 f"{result.allowed_proportion_failures} with probability <= 0.001)")
    lines.extend(f"note: {note}" for note in result.notes)
    lines.extend(f"FAIL: {reason}" for reason in result.reasons)
    took = f" ({result.elapsed_seconds:.1f} s)" if result.elapsed_seconds else ""
    lines.append(f"SP 800-22 verdict: {'PASS' if result.passed else 'FAIL'}{took}")
    return "\n".join(lines)


def shuffle_table(results: Sequence[ShuffleTestResult]) -> str:
    """The shuffle tests as a fixed-width text table."""
    header = (f"{'shuffle test':<26} {'shuffles':>9} {'cells':>6} {'E/cell':>9} {'df':>6} "
              f"{'chi-square':>11} {'P-value':>9}  result")
    lines = [f"Shuffle uniformity on the production path (fail below P = {SHUFFLE_ALPHA})",
             header, "-" * len(header)]
    for r in results:
        lines.append(f"{r.name:<26} {r.shuffles:>9} {r.cells:>6} {r.expected_count:>9.1f} "
                     f"{r.df:>6} {r.statistic:>11.2f} {r.p_value:>9.6f}  "
                     f"{'ok' if r.passed else 'FAIL'}")
    return "\n".join(lines)


def row_json(row: RowSummary) -> dict[str, Any]:
    """One battery row as JSON."""
    return {
        "test": row.test,
        "label": row.label,
        "sequences": row.sample_size,
        "passed": row.passed,
        "proportion": row.proportion,
        "proportion_range": list(row.proportion_range) if row.proportion_range else None,
        "proportion_ok": row.proportion_ok,
        "uniformity_p": row.uniformity_p,
        "uniformity_ok": row.uniformity_ok,
        "histogram": list(row.histogram),
    }


def battery_json(result: BatteryResult) -> dict[str, Any]:
    """The battery's verdict and rows as JSON."""
    return {
        "verdict": "PASS" if result.passed else "FAIL",
        "n_bits": result.n_bits,
        "sequences": result.sequences,
        "alpha": result.alpha,
        "elapsed_seconds": round(result.elapsed_seconds, 3),
        "proportion_failures": result.proportion_failures,
        "allowed_proportion_failures": result.allowed_proportion_failures,
        "reasons": list(result.reasons),
        "notes": list(result.notes),
        "rows": [row_json(row) for row in result.rows],
    }


def shuffle_json(result: ShuffleTestResult) -> dict[str, Any]:
    """One shuffle test's result as JSON."""
    return {
        "name": result.name,
        "shuffles": result.shuffles,
        "cells": result.cells,
        "expected_count": result.expected_count,
        "df": result.df,
        "statistic": result.statistic,
        "p_value": result.p_value,
        "min_count": result.min_count,
        "max_count": result.max_count,
        "passed": result.passed,
    }


def full_json(battery: BatteryResult, shuffles: Sequence[ShuffleTestResult],
              parameters: Mapping[str, object]) -> dict[str, Any]:
    """The whole ``rng-test`` document: verdict, parameters, battery and shuffle tests."""
    passed = battery.passed and all(r.passed for r in shuffles)
    return {
        "verdict": "PASS" if passed else "FAIL",
        "parameters": dict(parameters),
        "sp800_22": battery_json(battery),
        "shuffles": [shuffle_json(r) for r in shuffles],
    }
