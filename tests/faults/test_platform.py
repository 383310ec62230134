"""Platform policy (docs/cli.md "Supported systems"): outputs are locked through the portable
``filelock`` package, not ``fcntl``; the command runs on the click of any supported typer.

Issue 28 cases: "every write imports fcntl, so nothing can be written on Windows" and
"typer>=0.9 is declared but cli/main.py imports typer._click"."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from reidcli.errors import OutputError
from reidcli.io import atomic_output, lock_output, lock_path
from tests.faults.helpers import REPO, _env


def _python(code: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, env=_env(None), timeout=timeout)


def test_no_reidcli_module_imports_fcntl():
    """Case "every write imports fcntl": no module of the package imports it (POSIX-only)."""
    offenders = [str(p.relative_to(REPO)) for p in (REPO / "reidcli").rglob("*.py")
                 if re.search(r"^\s*(import fcntl|from fcntl )", p.read_text(), re.M)]
    assert offenders == []


def test_atomic_write_and_lock_work_without_fcntl(tmp_path):
    """Case "nothing can be written on Windows": with ``fcntl`` unavailable (as on Windows)
    a file output is still written, locked against a second writer and leaves no lock
    file behind."""
    out = tmp_path / "x.json"
    proc = _python(f"""
        import sys, warnings
        sys.modules["fcntl"] = None                    # no fcntl, as on Windows
        warnings.simplefilter("ignore")                # filelock notes its fallback
        from reidcli.errors import OutputError
        from reidcli.io import lock_output, write_json_atomic
        with lock_output({str(out)!r}):
            try:
                lock_output({str(out)!r})
            except OutputError as exc:
                print("refused:", exc.message)
        write_json_atomic({str(out)!r}, {{"ok": 1}})
        print("fcntl used:", sys.modules.get("fcntl") is not None)
        """)
    assert proc.returncode == 0, proc.stderr
    assert "refused:" in proc.stdout and "being written by another process" in proc.stdout
    assert "fcntl used: False" in proc.stdout
    assert out.read_text().strip().startswith("{")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.json"]


def test_second_writer_is_refused_at_once(tmp_path):
    """The lock is exclusive and non-blocking (also within one process); releasing it removes
    the lock file and lets the next writer in."""
    out = tmp_path / "s.h5"
    with lock_output(out, "--out s.h5") as held:
        assert held.file == lock_path(out) and held.file.exists()
        with pytest.raises(OutputError, match="--out s.h5 is being written by another"):
            lock_output(out, "--out s.h5")
        with pytest.raises(OutputError, match="being written by another process"):
            with atomic_output(out):
                pass
    assert not lock_path(out).exists()
    with lock_output(out) as again:                      # free again
        assert again.held
    assert not again.held and not lock_path(out).exists()


def test_stale_lock_file_does_not_block(tmp_path):
    """A ``<out>.lock`` left behind (no process holds it) is taken over and removed."""
    out = tmp_path / "s.json"
    lock_path(out).write_text("")
    with atomic_output(out, force=True) as tmp:
        tmp.write_text("{}")
    assert out.read_text() == "{}"
    assert not lock_path(out).exists()


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_lock_of_a_killed_writer_is_released(tmp_path):
    """A writer killed while holding the lock (its lock file stays) blocks nobody: the
    operating system drops the lock of a dead process."""
    out = tmp_path / "s.json"
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        from reidcli.io import lock_output
        held = lock_output({str(out)!r})
        print("held", flush=True)
        time.sleep(60)
        """)], stdout=subprocess.PIPE, text=True, env=_env(None))
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(OutputError, match="being written by another process"):
            lock_output(out)
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=60)
    finally:
        if holder.poll() is None:
            holder.kill()
    assert lock_path(out).exists()                       # left behind by the kill
    with atomic_output(out, force=True) as tmp:
        tmp.write_text("{}")
    assert out.read_text() == "{}" and not lock_path(out).exists()


def test_click_names_come_from_the_installed_typer():
    """Case "typer._click imported unconditionally": the CLI takes click's names from
    whichever click typer runs on (vendored ``typer._click`` or the ``click`` package)."""
    from reidcli.cli import click_compat

    try:
        from typer._click import exceptions
    except ImportError:
        from click import exceptions
    assert click_compat.ClickException is exceptions.ClickException
    sources = [p for p in (REPO / "reidcli").rglob("*.py") if p.name != "click_compat.py"]
    offenders = [str(p.relative_to(REPO)) for p in sources
                 if re.search(r"^\s*(from|import) (typer\._click|click)\b", p.read_text(), re.M)]
    assert offenders == []


def test_platform_policy_is_documented():
    """The supported systems are stated where users read about the command."""
    text = (REPO / "docs" / "cli.md").read_text()
    section = text.split("## Supported systems", 1)[1].split("\n## ", 1)[0]
    for word in ("Linux", "macOS", "Windows", "filelock", "SIGTERM"):
        assert word in section, word
