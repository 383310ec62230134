"""Start-up time of the ``reid`` command: `reid --help`, `reid eval --help` and `reid eval` on
a tiny store, each in a fresh interpreter (median of ``--repeats`` runs, interleaved).

The CLI imports a stage's module only when that stage runs, and the modules behind `--help`
and a plain `reid eval` import neither torch, scikit-learn, scipy.sparse nor matplotlib. Each
workload is timed three ways in the same run:

* ``new``: the command as it is;
* ``previous``: the same command with what the previous release loaded before running it —
  every stage's CLI module (:func:`reidcli.cli.main._register`) and numpy, pandas, h5py and
  scipy.sparse, which those modules and the re-ranking module imported at their top level;
* ``heavy``: the same command with torch, scikit-learn, scipy.sparse, pandas and matplotlib
  imported first (what start-up costs where a module on the path imports them).

The ratios are previous / new and heavy / new. The figures include the interpreter's own
start (``python -c pass``, printed first), as a user's `reid` does.

    python benchmarks/startup_speed.py [--repeats 7] [--rows 1200] [--dim 128]
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: what the previous release imported on every `reid` start (all stage modules, and through
#: them and the re-ranking module these libraries)
PREVIOUS_PRELUDE = ("import numpy, pandas, h5py, scipy.sparse\n"
                    "from reidcli.cli.main import _register\n"
                    "_register()\n")
#: the heavy libraries a module on the start-up path could pull in
HEAVY_PRELUDE = ("import torch, sklearn, scipy.sparse, pandas, matplotlib\n"
                 "from reidcli.cli.main import _register\n"
                 "_register()\n")
#: the command itself: main(ARGV) with its output discarded
COMMAND = """
import contextlib, io, sys
from reidcli.cli.main import main
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    try:
        main({argv!r})
    except SystemExit as done:
        if done.code:
            raise SystemExit(f"exit {{done.code}}")
"""


def make_store(folder: Path, rows: int, dim: int) -> Path:
    """A feature store of ``rows`` random embeddings [rows, dim] (1 query in 6, 50 ids, 2
    cameras), written through `reid store import`'s library call."""
    import numpy as np

    from reidcli.store.importer import import_store

    rng = np.random.default_rng(0)
    pids = rng.integers(0, 50, rows)
    npz = folder / "embeddings.npz"
    np.savez(npz, features=rng.standard_normal((rows, dim)).astype(np.float32), pid=pids,
             camid=np.arange(rows) % 2,
             split=np.where(np.arange(rows) % 6 == 0, "query", "gallery"))
    return import_store(folder / "store.h5", npz=npz)


def time_child(code: str) -> float:
    """Seconds of one fresh interpreter running ``code`` (start-up included)."""
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"child failed:\n{code}\n{proc.stderr}")
    return elapsed


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7, help="runs per workload and variant")
    parser.add_argument("--rows", type=int, default=1200, help="rows of the tiny store")
    parser.add_argument("--dim", type=int, default=128, help="its feature dimension")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as tmp:
        store = make_store(Path(tmp), args.rows, args.dim)
        workloads = {
            "reid --help": ["--help"],
            "reid eval --help": ["eval", "--help"],
            f"reid eval --store (tiny: {args.rows}x{args.dim})":
                ["eval", "--store", str(store), "--device", "cpu", "--quiet"],
        }
        variants = {"new": "", "previous": PREVIOUS_PRELUDE, "heavy": HEAVY_PRELUDE}
        bare = statistics.median(time_child("pass") for _ in range(args.repeats))
        print(f"python -c pass: {bare:.3f} s (interpreter start, included below)")
        print(f"{'workload':<40} {'new s':>7} {'previous s':>11} {'heavy s':>8} "
              f"{'prev/new':>9} {'heavy/new':>10}")
        for label, command_args in workloads.items():
            command = COMMAND.format(argv=command_args)
            times: dict[str, list[float]] = {name: [] for name in variants}
            for _ in range(args.repeats):              # interleaved: load drifts hit all
                for name, prelude in variants.items():
                    times[name].append(time_child(prelude + command))
            median = {name: statistics.median(values) for name, values in times.items()}
            print(f"{label:<40} {median['new']:7.3f} {median['previous']:11.3f} "
                  f"{median['heavy']:8.3f} {median['previous'] / median['new']:9.2f} "
                  f"{median['heavy'] / median['new']:10.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
