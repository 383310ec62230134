"""`reid` starts without the heavy libraries: building the command tree, `--help` and a plain
`reid eval` import neither torch, scikit-learn, scipy.sparse nor matplotlib, and running one
stage imports no other stage's CLI module (each check in a fresh interpreter)."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np

#: libraries that only the stages using them may import
HEAVY = ("torch", "torchvision", "sklearn", "scipy.sparse", "matplotlib")

#: the `reid` run by the child: main(argv) for each argv, stdout/stderr captured per call,
#: then one JSON line: each call's exit code and stdout, and the modules loaded at the end
CHILD = """
import contextlib, io, json, sys
from reidcli.cli.main import main
calls = []
for argv in json.loads(sys.argv[1]):
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        try:
            main(argv)
            code = 0
        except SystemExit as done:
            code = done.code or 0
    calls.append({"code": code, "out": out.getvalue()})
print(json.dumps({"calls": calls, "modules": sorted(sys.modules)}))
"""


def _run(*argvs: list[str]) -> tuple[list[dict], set[str]]:
    """Run ``main(argv)`` for each argv in one fresh interpreter: (calls, loaded modules)."""
    proc = subprocess.run([sys.executable, "-c", CHILD, json.dumps([list(map(str, a))
                                                                    for a in argvs])],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    return result["calls"], set(result["modules"])


def _loaded_heavy(modules: set[str]) -> list[str]:
    return [name for name in HEAVY if name in modules]


def test_building_every_command_imports_no_heavy_library():
    code = ("import sys; from typer.main import get_command; "
            "from reidcli.cli.main import _register, app; "
            "_register(); get_command(app); "
            f"print(' '.join(m for m in {HEAVY!r} if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == []


def test_help_imports_no_heavy_library():
    calls, modules = _run(["--help"], ["eval", "--help"], ["store", "--help"],
                          ["plot", "cmc", "--help"])
    assert [c["code"] for c in calls] == [0, 0, 0, 0]
    assert "fit-pooling" in calls[0]["out"] and "--rerank" in calls[1]["out"]
    assert _loaded_heavy(modules) == []


def test_a_stage_imports_only_its_own_cli_module():
    calls, modules = _run(["eval", "--help"])
    assert calls[0]["code"] == 0
    assert "reidcli.cli.eval" in modules
    others = ("store", "train", "train_net", "fit_pooling", "adapt", "plot", "data", "demo",
              "extract", "methods")
    assert [m for m in others if f"reidcli.cli.{m}" in modules] == []


def test_root_help_is_the_same_after_a_stage_was_registered_alone():
    fresh, _ = _run(["--help"])
    calls, _ = _run(["store", "--help"], ["eval", "--help"], ["--help"])
    assert [c["code"] for c in calls] == [0, 0, 0]
    assert calls[-1]["out"] == fresh[0]["out"]
    listed = [line.split()[1] for line in fresh[0]["out"].splitlines()
              if line.startswith("│ ") and len(line.split()) > 2]
    assert listed.index("extract") < listed.index("eval") < listed.index("data") \
        < listed.index("store") < listed.index("plot")


def test_plain_eval_imports_no_heavy_library(tmp_path):
    from reidcli.store.importer import import_store

    rng = np.random.default_rng(0)
    pids = np.concatenate([np.arange(6), rng.integers(0, 6, 30)])
    npz = tmp_path / "emb.npz"
    np.savez(npz, features=rng.standard_normal((36, 4)).astype(np.float32), pid=pids,
             camid=np.concatenate([np.zeros(6, int), np.ones(30, int)]),
             split=np.array(["query"] * 6 + ["gallery"] * 30))
    store = import_store(tmp_path / "s.h5", npz=npz)
    calls, modules = _run(["eval", "--store", store, "--device", "cpu", "--json",
                           tmp_path / "r.json"])
    assert calls[0]["code"] == 0
    assert json.loads((tmp_path / "r.json").read_text())      # the evaluation ran
    assert _loaded_heavy(modules) == []


def test_root_help_lists_every_stage_without_importing_its_module():
    calls, modules = _run(["--help"], ["eval", "--help"], ["--help"])
    assert [c["code"] for c in calls] == [0, 0, 0]
    assert calls[0]["out"] == calls[2]["out"]          # listed, then one stage added
    stage_modules = ("data", "store", "train", "train_net", "fit_pooling", "adapt", "plot",
                     "export", "demo", "extract", "methods", "paper")
    assert [m for m in stage_modules if f"reidcli.cli.{m}" in modules] == []
    # each stage's listed help line is its module's own HELP where it has one
    import importlib

    from reidcli.cli.main import STAGES
    for stage, (module, _, line) in STAGES.items():
        own = getattr(importlib.import_module(f"reidcli.cli.{module}"), "HELP", line)
        assert line == own, stage
        assert " ".join(line.split()[:3]) in " ".join(calls[0]["out"].split()), stage
