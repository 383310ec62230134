"""SIGINT/SIGTERM: one line, exit 130/143, no temporary file, no surviving worker process."""
from __future__ import annotations

import signal
import sys
import time

import pytest

from tests.faults.helpers import (_env, alive, assert_one_line_error, children_of,
                                  default_sigint, requires_posix_signals, start_reid)

pytestmark = requires_posix_signals


def _wait_for(predicate, timeout=60.0, step=0.05):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    raise AssertionError("timed out waiting")


class _Done:
    def __init__(self, proc, out, err):
        self.returncode, self.stdout, self.stderr = proc.returncode, out, err


@pytest.mark.parametrize("signum,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_during_synth_removes_tree_and_stops_workers(tmp_path, signum, code):
    proc = start_reid("data", "synth", "--out", tmp_path, "--preset", "default",
                      env={"OMP_NUM_THREADS": "1"})
    partial = tmp_path / "synthetic" / "default.partial"
    try:
        _wait_for(lambda: partial.exists() and len(children_of(proc.pid)) >= 2, timeout=60)
        time.sleep(0.5)                       # the pool is rendering
        workers = children_of(proc.pid)
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert_one_line_error(_Done(proc, out, err), "interrupted", code=code)
    assert not partial.exists()
    assert not (tmp_path / "synthetic" / "default").exists()
    assert not list(tmp_path.rglob("*.lock"))
    _wait_for(lambda: not alive(workers), timeout=120)


def test_sigint_during_start_up_imports(tmp_path):
    """Ctrl-C while the CLI's modules load (made slow here) is one line too."""
    script = (
        "import sys, time, importlib.abc\n"
        "class Slow(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        if name == 'typer':\n"
        "            sys.stderr.write('importing\\n'); sys.stderr.flush(); time.sleep(30)\n"
        "        return None\n"
        "sys.meta_path.insert(0, Slow())\n"
        "sys.argv = ['reid', 'methods']\n"
        "import runpy; runpy.run_module('reidcli.cli.main', run_name='__main__')\n")
    import subprocess
    proc = subprocess.Popen([sys.executable, "-c", script], stderr=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=_env(None),
                            start_new_session=True, preexec_fn=default_sigint)
    try:
        assert proc.stderr.readline().strip() == "importing"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert_one_line_error(_Done(proc, out, "importing\n" + err), "interrupted", code=130)


def test_sigterm_during_store_import_leaves_no_temp(tmp_path):
    """SIGTERM while a store is being written: temp + lock removed, exit 143."""
    import numpy as np

    n = 400_000
    npz = tmp_path / "in.npz"
    np.savez(npz, features=np.ones((n, 64), np.float32), pid=np.arange(n) % 50,
             camid=np.arange(n) % 4, split=np.array(["gallery", "query"] * (n // 2)))
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    proc = start_reid("store", "import", "--out", out_dir / "s.h5", "--npz", npz)
    try:
        _wait_for(lambda: (out_dir / "s.h5.partial").exists(), timeout=60, step=0.005)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    if proc.returncode == 0:
        pytest.skip("the import finished before the signal arrived")
    assert_one_line_error(_Done(proc, out, err), "interrupted", code=143)
    assert sorted(p.name for p in out_dir.iterdir()) == []


@pytest.mark.parametrize("swallowed", [False, True])
def test_sigint_during_adapt_copy_exits_130_and_leaves_nothing(tmp_path, monkeypatch, capsys,
                                                               biased_stores, swallowed):
    """Ctrl-C while `reid adapt` copies the input store: exit 130 and one line, no output
    and no temp file — also when h5py swallowed the KeyboardInterrupt (it used to exit 0)."""
    import h5py

    from reidcli.cli import main as cli_main
    from tests.cli.helpers import run_cli

    real_copy = h5py.Group.copy

    def copy_then_interrupt(self, *args, **kwargs):
        result = real_copy(self, *args, **kwargs)
        if swallowed:                      # the handler ran, its exception got lost in h5py
            cli_main._note(signal.SIGINT)
            return result
        cli_main._note(signal.SIGINT)
        raise KeyboardInterrupt()

    handlers = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    monkeypatch.setattr(h5py.Group, "copy", copy_then_interrupt)
    try:
        code, _, err = run_cli(capsys, "adapt", "norm", "--store", biased_stores[0], "--out",
                               tmp_path / "adapted.h5", "--quiet")
    finally:
        signal.signal(signal.SIGINT, handlers[0])
        signal.signal(signal.SIGTERM, handlers[1])
    assert code == 130, err
    lines = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1 and "interrupted" in lines[0] and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []


def test_an_interrupt_lost_in_a_callback_prints_no_traceback(monkeypatch):
    """A SIGTERM whose exception lands in a weakref callback is "Exception ignored …" to
    Python; the command notes the signal and stops with its one line, so the hook stays quiet
    for it — and passes every other unraisable error on."""
    import types

    from reidcli.cli import main as cli_main

    passed_on = []
    monkeypatch.setattr(cli_main, "_PREVIOUS_UNRAISABLE_HOOK", [passed_on.append])
    monkeypatch.setattr(cli_main, "RECEIVED", [signal.SIGTERM])
    lost = types.SimpleNamespace(exc_value=cli_main.Terminated())
    other = types.SimpleNamespace(exc_value=OSError("disk"))
    cli_main._quiet_lost_interrupt(lost)
    cli_main._quiet_lost_interrupt(other)
    assert passed_on == [other]
    monkeypatch.setattr(cli_main, "RECEIVED", [])
    cli_main._quiet_lost_interrupt(lost)          # no signal noted: not ours to hide
    assert passed_on == [other, lost]
