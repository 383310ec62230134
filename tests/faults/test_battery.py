"""The fault battery of issue 28 (tests/faults/battery.py, a script): the full battery on this
working tree (slow), and a three-case run so that the script cannot rot (fast)."""
from __future__ import annotations

import sys

import pytest

from tests.faults import battery
from tests.faults.battery import FATAL, REPO, Case, Result, classify

#: cheap cases: no fixture, no torch import
CHEAP = ("top.unknown-command", "top.version", "info.zero-byte")


def test_three_cheap_cases_run_and_are_handled(tmp_path):
    chosen = battery.select(battery.cases(), ",".join(CHEAP))
    assert sorted(c.name for c in chosen) == sorted(CHEAP)
    assert not any(c.needs_fixtures() for c in chosen)
    summary = battery.run_battery(REPO, sys.executable, only=",".join(CHEAP), workers=2,
                                  log=lambda *a: None, base=tmp_path)
    assert summary["num_cases"] == 3
    classes = {r["name"]: (r["class"], r["detail"], r["stderr_tail"])
               for r in summary["cases"]}
    assert all(c == "handled" for c, _, _ in classes.values()), classes
    assert "| store info | 1 |" in battery.table(summary)


def test_classification_rules():
    """One class per outcome, as the battery's docstring defines them."""
    err = Case("x", ["eval"], "error", needles=("--max-rank",))
    one = "error: --max-rank 0 is not ≥ 1 — give a positive rank\n"

    def res(rc, stderr="", timed_out=False):
        return Result(rc, "", stderr, 0.1, timed_out)

    assert classify(err, res(2, one), None)[0] == "handled"
    assert classify(err, res(2, "error: bad value\n"), None)[0] == "unclear message"
    assert classify(err, res(2, one + one), None)[0] == "unclear message"
    assert classify(err, res(1, one), None)[0] == "wrong exit code"
    assert classify(err, res(0, ""), None)[0] == "accepted silently"
    assert classify(err, res(1, "Traceback (most recent call last):\n"), None)[0] == \
        "traceback"
    assert classify(err, res(None, "", timed_out=True), None)[0] == "hang"
    assert classify(err, res(2, one), ("data lost", "gone"))[0] == "data lost"
    warn = Case("w", ["store"], "warn", needles=("pid",))
    assert classify(warn, res(0, "warning: pid 0 in the queries — …\n"), None)[0] == "handled"
    assert classify(warn, res(0, ""), None)[0] == "accepted silently"
    ok = Case("o", ["eval"], "ok")
    assert classify(ok, res(0), ("silent wrong result", "x"))[0] == "silent wrong result"
    assert classify(ok, res(2, one), None)[0] == "wrong exit code"


@pytest.mark.slow
def test_battery_on_the_working_tree(tmp_path):
    """No case of the core battery (about 200, a quarter of an hour on 2 cores) crashes,
    hangs, loses data or gives a silently wrong result."""
    summary = battery.run_battery(REPO, sys.executable, workers=2, log=lambda *a: None,
                                  base=tmp_path)
    bad = [(r["name"], r["class"], r["detail"], r["stderr_tail"][-300:])
           for r in summary["cases"] if r["class"] in FATAL + ("setup error",)]
    assert not bad, "\n".join(map(str, bad))
