"""WARCA's iteration loop after the speed work (docs/methods/warca.md, "Cost per iteration"):
the current step samples and updates exactly as the previous loop (kept in
benchmarks/warca_speed.py as the timing reference), projecting all rows or only the touched
ones gives the same result, a seed fixes every number, and the per-iteration progress row
carries the running objective and hinge. CPU, float64, no timings."""
from __future__ import annotations

import io
import itertools
import warnings

import numpy as np
import pytest
import torch
from rich.console import Console

from benchmarks.warca_speed import _reference_trainer_class
from reidcli import progress
from reidcli.metric import warca_trainer
from reidcli.metric.warca import WARCA


@pytest.fixture(autouse=True)
def _one_thread_quiet_warnings(monkeypatch):
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    monkeypatch.setattr(progress, "ENABLED", True)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="warca: median pairwise")
        yield
    progress.set_console(None)
    torch.set_num_threads(before)
    assert progress._stack == [] and progress._live is None


def _problem(ids=40, per_id=3, dim=20, seed=0):
    rng = np.random.default_rng(seed)
    pids = np.repeat(np.arange(ids), per_id)
    x = rng.standard_normal((ids, dim))[pids] + 0.7 * rng.standard_normal((ids * per_id, dim))
    return x, pids


def _spy_negatives(trainer):
    """Record every sample_negatives result of ``trainer`` (found, n, k, zk)."""
    seen = []
    sample = trainer.sample_negatives

    def spy(*args, **kwargs):
        out = sample(*args, **kwargs)
        seen.append(out)
        return out

    trainer.sample_negatives = spy
    return seen


@pytest.mark.parametrize("anchor", ["both", "first"])
def test_current_step_equals_the_previous_loop(anchor):
    x, pids = _problem()
    estimator = WARCA(dim=5, batch_size=64, max_draws=32, margin=0.2, anchor=anchor,
                      lam=0.05, lr=0.02, dtype="float64")
    current = estimator.trainer(x, pids, None)
    previous = _reference_trainer_class()(x, pids, None, estimator._validated_params())
    assert torch.equal(current.params, previous.params)
    seen_current, seen_previous = _spy_negatives(current), _spy_negatives(previous)
    for _ in range(4):
        stats_current, stats_previous = current.step(), previous.step()
        for key in stats_current:
            assert float(stats_current[key]) == pytest.approx(float(stats_previous[key]),
                                                              rel=1e-10, abs=1e-12)
        found, n, k, _ = seen_current[-1]
        found_p, n_p, k_p, _ = seen_previous[-1]
        assert torch.equal(found, found_p) and torch.equal(n, n_p)
        assert torch.equal(k[found], k_p[found_p])      # k of a pair without violator: unused
        np.testing.assert_allclose(current.params.numpy(), previous.params.numpy(),
                                   rtol=0, atol=1e-11)
    assert 0 < float(stats_current["violation_rate"]) < 1    # both kinds of pairs were seen


@pytest.mark.parametrize("kind", ["log", "harmonic"])
def test_projecting_all_rows_or_touched_rows_gives_the_same_steps(monkeypatch, kind):
    x, pids = _problem()
    estimator = WARCA(dim=5, batch_size=32, max_draws=16, margin=0.2, rank_weight=kind,
                      lam=0.05, lr=0.02, dtype="float64")
    runs = {}
    for project_all in (True, False):
        monkeypatch.setattr(warca_trainer.WARCATrainer, "_projects_all_rows",
                            lambda self, value=project_all: value)
        tr = estimator.trainer(x, pids, None)
        seen = _spy_negatives(tr)
        log = tr.run(5)["log"]
        runs[project_all] = tr.params.clone(), seen, log
    (p_all, seen_all, log_all), (p_touched, seen_touched, log_touched) = runs[True], runs[False]
    for (f_a, n_a, k_a, _), (f_t, n_t, k_t, _) in zip(seen_all, seen_touched):
        assert torch.equal(f_a, f_t) and torch.equal(n_a, n_t) and torch.equal(k_a, k_t)
    np.testing.assert_allclose(p_all.numpy(), p_touched.numpy(), rtol=0, atol=1e-12)
    np.testing.assert_allclose(log_all["objective"], log_touched["objective"], rtol=1e-12)


def test_projection_choice_follows_the_touched_row_count():
    """All rows are projected while N ≤ B·(3 + drawn candidates per pair), touched rows
    beyond; the drawn-per-pair estimate follows what the sampler drew."""
    x, pids = _problem(ids=100, per_id=4)                 # N = 400
    small = WARCA(dim=4, batch_size=128, max_draws=8, dtype="float64").trainer(x, pids, None)
    large = WARCA(dim=4, batch_size=16, max_draws=8, dtype="float64").trainer(x, pids, None)
    for tr in (small, large):
        tr.run(3)
        assert tr._drawn_estimate >= 1.0
    assert small._projects_all_rows()                     # 400 ≤ 128·(3 + drawn)
    assert 16 * (3 + large._drawn_estimate) < 400 and not large._projects_all_rows()


def test_a_seed_fixes_every_number():
    x, pids = _problem()
    runs = []
    for _ in range(2):
        tr = WARCA(dim=5, batch_size=48, max_draws=16, seed=7).trainer(x, pids, None)
        log = tr.run(6)["log"]
        runs.append((tr.params.clone(), log))
    assert torch.equal(runs[0][0], runs[1][0])
    for key in runs[0][1]:
        if key != "wall_s":
            np.testing.assert_array_equal(runs[0][1][key], runs[1][1][key])
    other = WARCA(dim=5, batch_size=48, max_draws=16, seed=8).trainer(x, pids, None)
    other.run(6)
    assert not torch.equal(other.params, runs[0][0])


# -- per-iteration progress --------------------------------------------------------------------
@pytest.fixture
def advances(monkeypatch):
    """Every Task.advance call as (description, n, fields)."""
    calls = []
    real = progress.Task.advance

    def spy(self, n=1, description=None, **fields):
        calls.append((self.description, n, fields))
        return real(self, n, description, **fields)

    monkeypatch.setattr(progress.Task, "advance", spy)
    return calls


def test_progress_row_shows_the_running_objective_and_hinge(advances):
    x, pids = _problem()
    out = io.StringIO()
    progress.set_console(Console(file=out, force_terminal=True, width=160))
    tr = WARCA(dim=5, batch_size=32, max_draws=16, log_every=1).trainer(x, pids, None)
    with progress.task("train warca", 1, unit="trial", enabled=True) as outer:
        log = tr.run(30)["log"]
        outer.advance()
    rows = [(n, fields) for name, n, fields in advances if name == "warca iterations"]
    assert len(rows) == 30 and all(n == 1 for n, _ in rows)
    window = warca_trainer.PROGRESS_WINDOW
    for t in (0, 4, 29):                                   # after iteration t + 1
        fields = rows[t][1]
        first = max(0, t + 1 - window)
        assert fields["objective"] == pytest.approx(log["objective"][first:t + 1].mean())
        assert fields["hinge"] == pytest.approx(log["hinge_mean"][first:t + 1].mean())


def test_pipe_lines_name_the_trial_and_give_an_eta(monkeypatch):
    out = io.StringIO()
    progress.set_console(Console(file=out, force_terminal=False))
    ticks = itertools.count()
    monkeypatch.setattr(progress, "_clock", lambda: next(ticks) * 5.0)   # 5 s per reading
    x, pids = _problem()
    tr = WARCA(dim=4, batch_size=16, max_draws=8).trainer(x, pids, None)
    with progress.task("train warca", 1, unit="trial", enabled=True):
        tr.run(40)
    lines = [line for line in out.getvalue().splitlines() if "warca iterations" in line]
    assert lines and all(line.startswith("train warca 1/1 › warca iterations: ")
                         for line in lines)
    assert any("/40 it" in line and "ETA" in line for line in lines)


def test_quiet_and_bare_runs_report_nothing(advances, capsys):
    x, pids = _problem()
    tr = WARCA(dim=4, batch_size=16, max_draws=8).trainer(x, pids, None)
    tr.run(5)                                            # a bare library call
    with progress.task("train warca", 1, unit="trial", enabled=False):   # --quiet
        tr.run(5)
    assert not any(name == "warca iterations" for name, _, _ in advances)
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""
