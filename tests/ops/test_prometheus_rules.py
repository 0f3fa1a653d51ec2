"""The ops files: the Prometheus rules pass ``promtool check rules`` and their unit tests
(``promtool test rules``: every alert fired and not fired), and every dashboard query is valid
PromQL (checked by promtool as a rule). That every metric they read is one the server exports is
checked against a real scrape in tests/api/test_metrics_live.py."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from support.promql_names import DASHBOARD, RULES, dashboard_exprs, dashboard_panels

pytestmark = pytest.mark.processes  # it starts programs (tests/support/tiers.py)


def promtool(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    path = shutil.which("promtool")
    if path is None:
        pytest.fail("promtool is missing: run scripts/setup-tests (installs prometheus)")
    return subprocess.run([path, *args], cwd=cwd, capture_output=True, text=True, timeout=300,
                          check=False)


def test_the_rules_pass_promtool_check() -> None:
    result = promtool("check", "rules", str(RULES))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_every_alert_fires_and_stays_quiet_in_the_unit_tests() -> None:
    tests = RULES.with_name("alerts_test.yml")
    result = promtool("test", "rules", tests.name, cwd=tests.parent)
    assert result.returncode == 0, result.stdout + result.stderr
    text = tests.read_text()
    alerts = {line.split(":", 1)[1].strip() for line in RULES.read_text().splitlines()
              if line.strip().startswith("- alert:")}
    assert len(alerts) == 8
    for alert in alerts:  # each has a case where it fires and one where it does not
        assert f"alertname: {alert}\n    exp_alerts:\n    - exp_labels" in text, alert
        assert f"alertname: {alert}\n    exp_alerts: []" in text, alert


def test_every_dashboard_query_is_valid_promql(tmp_path: Path) -> None:
    exprs = dashboard_exprs()
    assert len(exprs) >= 20
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:query_{i}:check", "expr": expr} for i, expr in enumerate(exprs)]}]}
    path = tmp_path / "dashboard-rules.json"  # YAML is a superset of JSON
    path.write_text(json.dumps(rules))
    result = promtool("check", "rules", str(path))
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_dashboard_has_the_panels_operations_need() -> None:
    titles = " | ".join(p["title"] for p in dashboard_panels()).lower()
    for wanted in ("request rate", "errors by code", "latency", "rounds finished",
                   "actual return", "against theory", "rng self-test", "database",
                   "seamless wallet: unsettled movements"):
        assert wanted in titles, wanted
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] == "fairshoe"
    ids = [p["id"] for p in dashboard_panels()]
    assert len(ids) == len(set(ids))
