"""Fault cases of `reid eval` over several stores (issue 28): one store counted twice (hard
link, symlink, copy) and skipped queries with no reason in the several-store table."""
from __future__ import annotations

import json
import os
import shutil

import pytest

from reidcli.evaluation.errors import EvaluationError
from reidcli.evaluation.multi import evaluate_stores
from tests.evaluation.test_multi_store import known_block, request, write_store
from tests.faults.helpers import assert_one_line_error_in_process, reid_in_process


def _stores(tmp_path):
    a = write_store(tmp_path / "a.h5", known_block((True, False)))
    b = write_store(tmp_path / "b.h5", known_block((True, True)))
    return a, b


@pytest.mark.parametrize("how", ["hardlink", "symlink", "copy"])
def test_one_store_given_twice_is_refused(capsys, tmp_path, how):
    # case: evaluating the same store twice (hard link) reported two stores and a std
    a, b = _stores(tmp_path)
    twin = tmp_path / "twin.h5"
    {"hardlink": os.link, "symlink": os.symlink, "copy": shutil.copyfile}[how](a, twin)
    result = reid_in_process("eval", "--store", a, "--store", b, "--store", twin,
                             capsys=capsys)
    assert_one_line_error_in_process(result, "twin.h5", "a.h5", "once")
    with pytest.raises(EvaluationError, match="twin.h5"):     # library route too
        evaluate_stores([request(a), request(twin)])


def test_several_store_table_states_skip_reasons(capsys, tmp_path):
    # case: the several-store table showed only "valid queries" with no reason for skips
    rows = known_block((True, False))
    rows[3] = (0, 0, "query", 100.0)                  # a pid-0 (distractor) query
    a = write_store(tmp_path / "a.h5", rows)
    b = write_store(tmp_path / "b.h5", known_block((True, True)))
    code, out, err = reid_in_process("eval", "--store", a, "--store", b, "--json",
                                     tmp_path / "r.json", capsys=capsys)
    assert code == 0, err
    assert "skipped queries" in out and "pid 0/-1: 1" in out
    total = [line for line in out.splitlines() if line.startswith("skipped queries in all")]
    assert len(total) == 1 and "1 (pid 0/-1: 1)" in total[0] and "distractor" in total[0]
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["skipped_total"] == {"junk_or_distractor_query": 1, "no_match": 0}
    assert [t["skipped"]["junk_or_distractor_query"] for t in report["trials"]] == [1, 0]
