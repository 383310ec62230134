"""CI step: the lowest declared typer / rich / h5py / numpy really run the ``reid`` command.

Usage (``.ci/run`` calls it after the test suite, with the CI environment's Python)::

    python .ci/floors.py [--cache DIR]

It builds (once; cached under ``DIR/floors-<hash>``) a virtual environment that holds exactly
the :data:`FLOORS` versions (plus the :data:`COMPANIONS` those old versions need), layered
over the running environment for everything else (torch, scipy, …), then runs a smoke of the
CLI: ``--help``, ``store import`` of a small ``.npz``, ``store info``, ``eval``, and error
cases that must stay one line. Exit status 1 when any step fails.

:data:`FLOORS` must equal pyproject's ``>=`` lower bounds: ``tests/faults/test_floors.py``
checks it, so a raised floor is tested here and a lowered one cannot go untested.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
from pathlib import Path

#: the lowest versions pyproject declares (``name>=version``), installed as they are
FLOORS = {
    "typer": "0.16.0",
    "rich": "12.0.0",
    "h5py": "3.8.0",
    "numpy": "1.23.2",
    "pandas": "1.5.1",
    "scipy": "1.9.2",
    "filelock": "3.21.0",
}

#: what those versions need that the CI environment does not hold at a version they accept:
#: typer < 0.26 runs on the ``click`` package; rich 12 renders Markdown with ``commonmark``
COMPANIONS = {
    "click": "8.5.1",
    "commonmark": "0.9.1",
    "pytz": "2022.6",
}

REPO = Path(__file__).resolve().parents[1]


def env_dir(cache: Path) -> Path:
    """The cached environment for these pins, this Python and this base environment."""
    key = json.dumps([FLOORS, COMPANIONS, sys.version, sys.prefix], sort_keys=True)
    return cache / f"floors-{hashlib.sha256(key.encode()).hexdigest()[:16]}"


def build(venv: Path) -> Path:
    """Create ``venv`` (if not complete) and return its Python."""
    py = venv / "bin" / "python"
    if (venv / ".complete").is_file():
        print(f"floors: reusing {venv}", flush=True)
        return py
    print(f"floors: creating {venv}", flush=True)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
    purelib = subprocess.run([str(py), "-c", "import sysconfig; "
                              "print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()
    # everything not pinned here comes from the running (CI) environment, after the pins
    base = sysconfig.get_paths()["purelib"]
    Path(purelib, "zz_base_environment.pth").write_text(
        f"import site; site.addsitedir({base!r})\n")
    pins = [f"{n}=={v}" for n, v in {**FLOORS, **COMPANIONS}.items()]
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                    "--no-deps", "--only-binary", ":all:", *pins], check=True)
    (venv / ".complete").touch()
    return py


SMOKE = textwrap.dedent("""
    import json, os, subprocess, sys
    from importlib.metadata import version
    want = json.loads(sys.argv[1])
    got = {name: version(name) for name in want}
    assert got == want, f"the floor environment holds {got}, not {want}"
    import numpy as np
    rng = np.random.default_rng(0)
    n = 80                              # 40 training rows (ids 1-10), 20 query/gallery pairs
    pid = np.concatenate([np.arange(40) % 10 + 1, np.arange(40) // 2 + 11])
    np.savez("in.npz", features=rng.random((n, 8), dtype=np.float32) + 0.2 * pid[:, None] % 1,
             pid=pid, camid=np.where(np.arange(n) < 40, np.arange(n) // 10, np.arange(n)) % 2,
             split=np.array(["train"] * 40 + ["gallery", "query"] * 20))

    def reid(*args, code=0, one_line=False):
        res = subprocess.run([sys.executable, "-m", "reidcli.cli.main", *args],
                             capture_output=True, text=True, timeout=300)
        shown = " ".join(args)
        assert res.returncode == code or code is None, (shown, res.returncode, res.stdout[-3000:],
                                        res.stderr[-3000:])
        assert "Traceback" not in res.stderr, (shown, res.stderr[-3000:])
        if one_line:
            lines = res.stderr.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("error: "), (shown, res.stderr)
        print(f"floors: ok  reid {shown}", flush=True)
        return res

    assert "Usage" in reid("--help").stdout
    reid("--version")
    assert "--store" in reid("eval", "--help").stdout
    assert "--out" in reid("store", "import", "--help").stdout
    reid("store", "import", "--out", "s.h5", "--npz", "in.npz")
    assert "80" in reid("store", "info", "--store", "s.h5").stdout
    reid("eval", "--store", "s.h5", "--json", "r.json")
    assert "mAP" in open("r.json").read()
    reid("train", "xqda", "--store", "s.h5", "--out", "m.h5")      # scipy.linalg
    reid("eval", "--store", "s.h5", "--model", "m.h5")
    reid("store", "import", "--out", "s.h5", "--npz", "in.npz", code=2, one_line=True)
    reid("eval", "--store", "s.h5", "--no-such-flag", code=2, one_line=True)
    reid("eval", "--store", "missing.h5", code=2, one_line=True)
    from reidcli.errors import OutputError
    from reidcli.io import lock_output
    with lock_output("o.h5"):           # one writer per output (filelock)
        try:
            lock_output("o.h5")
            raise AssertionError("a second lock on o.h5 was granted")
        except OutputError:
            pass
    assert not os.path.exists("o.h5.lock")
    print("floors: ok  a second writer is refused", flush=True)
    bare = reid("store", code=None)   # a bare group prints its help (exit 2 from click 8.2 on)
    assert "Usage" in bare.stdout + bare.stderr
""")


def smoke(py: Path) -> int:
    env = {**os.environ, "PYTHONPATH": str(REPO), "MPLBACKEND": "Agg",
           "PYTHONUNBUFFERED": "1"}
    with tempfile.TemporaryDirectory(prefix="reid-floors-") as work:
        return subprocess.run([str(py), "-c", SMOKE, json.dumps(FLOORS)], cwd=work,
                              env=env).returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=Path(os.environ.get(
        "REIDCLI_CI_CACHE", Path.home() / ".cache" / "reidcli-ci")))
    args = parser.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    py = build(env_dir(args.cache))
    code = smoke(py)
    print("floors: " + ("passed" if code == 0 else "FAILED") + " with "
          + ", ".join(f"{n} {v}" for n, v in FLOORS.items()), flush=True)
    return 0 if code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
