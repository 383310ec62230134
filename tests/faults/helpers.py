"""Shared helpers of the fault suite: run `reid` as a real process and check that a failure is
one clear line (exit 2, ``error: … — …``, no traceback) that left nothing behind."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _env(extra: dict | None) -> dict:
    """The environment of a child ``reid``: unbuffered, importing this working tree."""
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONUNBUFFERED": "1",
            "PYTHONPATH": str(REPO) + (os.pathsep + path if path else ""), **(extra or {})}


def reid(*args, env: dict | None = None, timeout: float = 300, cwd=None,
         input: str | None = None) -> subprocess.CompletedProcess:
    """Run ``reid ARGS`` in a fresh interpreter; returns the completed process (text)."""
    full_env = _env(env)
    return subprocess.run([sys.executable, "-m", "reidcli.cli.main", *map(str, args)],
                          capture_output=True, text=True, env=full_env, timeout=timeout,
                          cwd=cwd, input=input)


def reid_in_process(*args, capsys) -> tuple[int, str, str]:
    """Run ``reid ARGS`` in this interpreter (no torch import cost per case); returns
    ``(exit code, stdout, stderr)``. Use for faults that need no fresh process (no signals,
    no environment variables read at import)."""
    from reidcli.cli.main import main

    capsys.readouterr()
    try:
        code = main([str(a) for a in args])
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error_in_process(result: tuple[int, str, str], *needles: str,
                                     code: int = 2) -> str:
    """Like :func:`assert_one_line_error` for a :func:`reid_in_process` result."""
    got, out, err = result
    assert got == code, (got, out[-2000:], err[-2000:])
    return one_error_line(err, *needles)


def default_sigint() -> None:
    """In a child before exec: SIGINT back to its default disposition. A shell running the
    suite in the background (``cmd &``) ignores SIGINT, and children inherit that; `reid`
    rightly keeps an inherited SIG_IGN, so interrupt tests would see no interrupt."""
    import signal
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_reid(*args, env: dict | None = None, cwd=None) -> subprocess.Popen:
    """Start ``reid ARGS`` in its own process group (for interrupt tests), SIGINT enabled."""
    full_env = _env(env)
    return subprocess.Popen([sys.executable, "-m", "reidcli.cli.main", *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=full_env, cwd=cwd, start_new_session=True,
                            preexec_fn=default_sigint)


def assert_one_line_error(proc: subprocess.CompletedProcess, *needles: str,
                          code: int = 2) -> str:
    """The process failed with ``code`` and one ``error: …`` line naming every needle."""
    assert proc.returncode == code, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    return one_error_line(proc.stderr, *needles)


def one_error_line(stderr: str, *needles: str) -> str:
    """The single ``error: …`` line of ``stderr`` (no traceback), naming every needle."""
    err = stderr.strip()
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def assert_nothing_written(folder: Path, before: set[str] | None = None) -> None:
    """No new file (and no ``.partial`` leftover) appeared in ``folder``."""
    now = {p.name for p in Path(folder).iterdir()}
    assert not [n for n in now if ".partial" in n], now
    if before is not None:
        assert now <= before, now - before


def files(folder: Path) -> set[str]:
    return {p.name for p in Path(folder).iterdir()}


requires_posix_signals = pytest.mark.skipif(os.name != "posix", reason="POSIX signals")


def children_of(pid: int) -> set[int]:
    """Live processes whose parent is ``pid`` (from /proc; zombies excluded)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        if fields.get("PPid", "").strip() == str(pid) and \
                not fields.get("State", "").strip().startswith("Z"):
            found.add(int(entry.name))
    return found


def alive(pids) -> set[int]:
    """The pids of ``pids`` that still run (zombies count as gone)."""
    out = set()
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        if "\nState:\tZ" not in state:
            out.add(pid)
    return out
