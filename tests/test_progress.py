"""reidcli.progress: nested levels in one live display, sparse pipe lines with ETA, the long
loops that report per iteration, and library warnings that say what to do."""
from __future__ import annotations

import io
import itertools
import warnings

import numpy as np
import pytest
from rich.console import Console

from reidcli import naming, progress


@pytest.fixture(autouse=True)
def _fresh_progress(monkeypatch):
    """Progress on, drawn on stderr, real clock; nothing left open afterwards."""
    monkeypatch.setattr(progress, "ENABLED", True)
    yield
    progress.set_console(None)
    assert progress._stack == [] and progress._live is None


def _fake_clock(monkeypatch, seconds_per_call: float) -> None:
    ticks = itertools.count()
    monkeypatch.setattr(progress, "_clock", lambda: next(ticks) * seconds_per_call)


def _pipe_console() -> io.StringIO:
    out = io.StringIO()
    progress.set_console(Console(file=out, force_terminal=False))
    return out


# -- the live display ----------------------------------------------------------------------------
def test_nested_tracks_share_one_live_display_on_a_tty():
    out = io.StringIO()
    progress.set_console(Console(file=out, force_terminal=True, width=100))
    seen = []
    for _ in progress.track(range(3), description="outer trials", unit="trial"):
        for _ in progress.track(range(20), description="inner iterations"):
            seen.append((id(progress._live), len(progress._live.tasks)))
        progress._live.refresh()                           # draw now, not on the timer
        with progress.StepBar(5, "inner bar") as bar:
            bar.update(1, loss=0.5)
            assert bar.on and len(progress._live.tasks) == 2
            progress._live.refresh()
    assert len({live for live, _ in seen}) == 1          # one Progress, never a second Live
    assert {rows for _, rows in seen} == {2}              # the outer row plus the inner one
    text = out.getvalue()
    assert "outer trials" in text and "inner iterations" in text and "loss 0.5" in text


def test_warnings_print_one_line_above_the_live_display():
    from reidcli.cli.warning_lines import one_line_warnings

    out = io.StringIO()
    progress.set_console(Console(file=out, force_terminal=True, width=200))
    with one_line_warnings():
        for _ in progress.track(range(2), description="outer"):
            warnings.warn("x is odd — do y", UserWarning)
    assert "warning: x is odd — do y" in out.getvalue()
    assert "test_progress.py" not in out.getvalue()


# -- log lines on a pipe ---------------------------------------------------------------------------
def test_pipe_lines_are_sparse_and_carry_done_total_elapsed_and_eta(monkeypatch):
    out = _pipe_console()
    _fake_clock(monkeypatch, 1.0)                          # 1 s per iteration: 10 % = 100 s
    for _ in progress.track(range(1000), description="slow loop"):
        pass
    lines = out.getvalue().splitlines()
    assert 9 <= len(lines) <= 12
    assert all("/1000 it" in line and "elapsed" in line for line in lines)
    assert all("ETA" in line for line in lines[:-1])
    assert lines[-1].startswith("slow loop: 1000/1000 it")


def test_fast_loops_log_no_more_than_once_per_interval(monkeypatch):
    out = _pipe_console()
    _fake_clock(monkeypatch, progress.LOG_INTERVAL_S / 1e5)   # 1000 steps in 1 % of the interval
    for _ in progress.track(range(1000), description="fast loop"):
        pass
    assert out.getvalue().splitlines() == ["fast loop: 1000/1000 it, 0 s elapsed"]


def test_nested_pipe_lines_name_the_outer_level(monkeypatch):
    out = _pipe_console()
    _fake_clock(monkeypatch, 1.0)
    for _ in progress.track(range(2), description="train warca", unit="trial"):
        for _ in progress.track(range(200), description="warca iterations"):
            pass
    lines = out.getvalue().splitlines()
    assert any(line.startswith("train warca 1/2 › warca iterations: ") and "ETA" in line
               for line in lines)
    assert any(line.startswith("train warca 2/2 › warca iterations: ") for line in lines)
    assert lines[-1].startswith("train warca: 2/2 trial")


def test_disabled_outer_level_silences_the_levels_inside(monkeypatch, capsys):
    _fake_clock(monkeypatch, 1.0)
    for _ in progress.track(range(2), description="outer", enabled=False):
        for _ in progress.track(range(100), description="inner"):
            pass
    monkeypatch.setattr(progress, "ENABLED", False)
    for _ in progress.track(range(100), description="alone"):
        pass
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""


def test_progress_goes_to_stderr_only(monkeypatch, capsys):
    _fake_clock(monkeypatch, 1.0)
    with progress.activity("t-SNE"):
        pass
    for _ in progress.track(range(50), description="loop"):
        pass
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "t-SNE: " in captured.err and "loop: 50/50 it" in captured.err


# -- loops that report per iteration ------------------------------------------------------------
@pytest.fixture
def levels(monkeypatch):
    """Every progress level opened, as (description, total, units done at its end; None
    for a silent level), drawn on a pipe console."""
    opened = []
    real = progress.task

    def spy(description, total=None, *args, **kwargs):
        cm = real(description, total, *args, **kwargs)

        class Recorder:
            def __enter__(self):
                self.level = cm.__enter__()
                return self.level

            def __exit__(self, *exc):
                opened.append((description, total, self.level.done if self.level.on else None))
                return cm.__exit__(*exc)

        return Recorder()

    monkeypatch.setattr(progress, "task", spy)
    _pipe_console()
    return opened


def _toy(seed=0, ids=30, dim=12):
    rng = np.random.default_rng(seed)
    pids = np.repeat(np.arange(ids), 4)
    camids = np.tile([0, 0, 1, 1], ids)
    x = rng.standard_normal((ids, dim))[pids] + 0.3 * rng.standard_normal((4 * ids, dim))
    return x, pids, camids


def test_warca_trainer_reports_every_iteration(levels):
    from reidcli.metric.warca import WARCA

    x, pids, camids = _toy()
    estimator = WARCA(dim=4, iterations=7, batch_size=8, normalize="l2", dtype="float64")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        estimator.fit(x, pids, camids)                    # a bare library call: silent
        with progress.task("a command", enabled=True):
            estimator.fit(x, pids, camids)
    assert levels[0] == ("warca iterations", 7, None)
    assert ("warca iterations", 7, 7) in levels[1:]


def test_rpcca_reports_every_iteration(levels):
    from reidcli.metric.rpcca import RPCCA

    x, pids, camids = _toy()
    for optimizer in ("adam", "adaptive"):
        with progress.task("a command", enabled=True):
            RPCCA(dim=4, kernel="rbf", optimizer=optimizer, max_iter=6, tol=0.0,
                  batch_size=16).fit(np.abs(x), pids, camids)
    rows = [level for level in levels if level[0] == "rpcca iterations"]
    assert rows == [("rpcca iterations", 6, 6)] * 2      # tol=0: no early stop


def test_metric_training_nests_iterations_inside_trials(levels, tmp_path):
    from reidcli.metric.fit import fit_feature_metric_store
    from reidcli.metric.warca import WARCA
    from reidcli.store.importer import import_store

    x, pids, camids = _toy()
    np.savez(tmp_path / "in.npz", features=x.astype(np.float32), pid=pids + 1, camid=camids,
             split=np.array(["train"] * len(pids)))
    store = import_store(tmp_path / "s.h5", npz=tmp_path / "in.npz", camid_base=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit_feature_metric_store(store, tmp_path / "m.h5", WARCA(dim=4, iterations=5,
                                 batch_size=8, normalize="l2"), progress=True)
    assert ("warca iterations", 5, 5) in levels and levels[-1][0] == "train warca"


# -- warnings say what to do -----------------------------------------------------------------------
def _messages(fn) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn()
    return [str(w.message) for w in caught]


def _warca_warnings():
    from reidcli.metric.warca import WARCA

    x, pids, camids = _toy(dim=6)
    return _messages(lambda: WARCA(dim=8, iterations=1, batch_size=4).trainer(
        1000 * x, pids, camids))


def test_warca_warnings_name_what_to_do():
    texts = _warca_warnings()
    assert len(texts) == 2 and all(" — " in t and "\n" not in t for t in texts)
    assert any("use at most dim=6" in t for t in texts)
    assert any("use normalize=l2" in t for t in texts)
    assert not any("consider" in t for t in texts)


def test_warca_warning_names_the_command_line_flag():
    naming.set_flag_namer(lambda name: f"--param {name}")
    try:
        texts = _warca_warnings()
    finally:
        naming.set_flag_namer(None)
    assert any("use --param normalize=l2" in t for t in texts)


def test_other_library_warnings_name_what_to_do():
    from reidcli.data.samplers import CameraSplitSampler
    from reidcli.metric.xqda import XQDA
    from reidcli.pooling.weight_maps import PairScatter, top_eigenvectors

    rng = np.random.default_rng(0)
    x = rng.standard_normal((40, 5))
    pids = np.repeat(np.arange(20), 2)
    camids = np.tile([0, 1], 20)
    anti = np.repeat(x[::2], 2, axis=0) * np.where(camids == 0, 1.0, -1.0)[:, None]
    texts = _messages(lambda: XQDA(normalize="none").fit(anti, pids, camids))
    scatter = PairScatter(sigma_same=np.eye(4), sigma_diff=np.diag([2.0, 0.5, 0.5, 0.5]),
                          n_same=1, n_diff=1)
    texts += _messages(lambda: top_eigenvectors(scatter, 3, context="layer l"))
    labels = np.repeat(np.arange(12), 4)
    texts += _messages(lambda: CameraSplitSampler(labels, np.zeros(48, np.int64),
                                                  np.array(["a"] * 48), p=2, k=1))
    assert len(texts) == 3 and all(" — " in t and "\n" not in t for t in texts)
    assert "lower lam=0.001" in texts[0] and "use K=1" in texts[1]
    assert "train_cams" in texts[2]
