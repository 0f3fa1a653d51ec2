"""The ops files' PromQL: every expression of the Grafana dashboard (ops/grafana/fairshoe.json)
and of the Prometheus rules (ops/prometheus/alerts.yml), and the metric names an expression
reads. Used by tests/ops (syntax, through promtool) and tests/api (names against a real scrape).

The rules file is read without a YAML library: its ``expr:`` values are plain one-liners or
``|`` blocks, which :func:`rule_exprs` takes as written.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "ops" / "grafana" / "fairshoe.json"
RULES = ROOT / "ops" / "prometheus" / "alerts.yml"

#: Grafana's variables in a range or a label value, replaced for promtool
GRAFANA_VARIABLES = {"$__rate_interval": "5m", "$__interval": "1m", "$__range": "1h",
                     "$instance": ".*", "${datasource}": "prometheus"}
_KEYWORDS = {"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring",
             "group_left", "group_right", "inf", "nan"}


def dashboard_panels(path: Path = DASHBOARD) -> list[dict[str, Any]]:
    """Every panel, those inside collapsed rows too."""
    out = []
    for panel in json.loads(path.read_text())["panels"]:
        out.append(panel)
        out.extend(panel.get("panels", []))
    return out


def dashboard_exprs(path: Path = DASHBOARD) -> list[str]:
    """Every target's expression, with Grafana's variables replaced (valid PromQL)."""
    exprs = []
    for panel in dashboard_panels(path):
        for target in panel.get("targets", []):
            expr = target["expr"]
            for name, value in GRAFANA_VARIABLES.items():
                expr = expr.replace(name, value)
            exprs.append(expr)
    return exprs


def rule_exprs(path: Path = RULES) -> tuple[list[str], set[str]]:
    """(every rule's expression, the names recording rules define)."""
    lines = path.read_text().splitlines()
    exprs, recorded = [], set()
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if stripped.startswith("- record:"):
            recorded.add(stripped.split(":", 1)[1].strip())
        if stripped.startswith("expr:"):
            value = stripped.split(":", 1)[1].strip()
            if value == "|":
                indent = len(line) - len(line.lstrip())
                block = []
                i += 1
                while i < len(lines) and (not lines[i].strip()
                                          or len(lines[i]) - len(lines[i].lstrip()) > indent):
                    block.append(lines[i].strip())
                    i += 1
                exprs.append("\n".join(block).strip())
                continue
            exprs.append(value)
        i += 1
    return exprs, recorded


def metric_names(expr: str) -> set[str]:
    """The metric names ``expr`` selects (not functions, aggregations, keywords or labels).

    >>> sorted(metric_names('sum by (le) (rate(a_bucket{x="y"}[5m])) / on (g) b + time()'))
    ['a_bucket', 'b']
    """
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # string literals
    text = re.sub(r"\{[^}]*\}", "", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", "", text)  # ranges and subqueries
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", text)
    text = re.sub(r"\boffset\s+\w+", "", text)
    names = set()
    for match in re.finditer(r"(?<![\w.])[a-zA-Z_:][a-zA-Z0-9_:]*", text):
        if text[match.end():].lstrip().startswith("("):
            continue  # a function or an aggregation
        if match.group().lower() not in _KEYWORDS:
            names.add(match.group())
    return names
