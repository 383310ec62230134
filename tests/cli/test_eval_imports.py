"""`reid eval` imports only what it uses (each run in a fresh interpreter): scoring a store
loads no plotting, network, clustering or metric-learning module, and scoring it through a
fitted XQDA model loads XQDA's module but no other method's; the array engine
(``evaluate_arrays``) loads no pandas."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np

#: modules `reid eval --store S [--model xqda.h5]` must not load
NOT_FOR_EVAL = ("torch", "torchvision", "matplotlib", "sklearn", "scipy.sparse",
                "reidcli.metric.kissme", "reidcli.metric.lfda", "reidcli.metric.warca",
                "reidcli.metric.rpcca", "reidcli.metric.pca", "reidcli.pooling.cdpcf",
                "reidcli.training", "reidcli.evaluation.rerank", "reidcli.plotting")

CHILD = """
import contextlib, io, json, sys
from reidcli.cli.main import main
err = io.StringIO()
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
    try:
        main(json.loads(sys.argv[1]))
        code = 0
    except SystemExit as done:
        code = done.code or 0
print(json.dumps({"code": code, "err": err.getvalue(), "modules": sorted(sys.modules)}))
"""


def _modules_of(argv: list) -> set[str]:
    proc = subprocess.run([sys.executable, "-c", CHILD, json.dumps([str(a) for a in argv])],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["code"] == 0, result["err"]
    return set(result["modules"])


def test_eval_of_a_store_and_of_a_fitted_xqda_imports_only_what_it_uses(tmp_path):
    from reidcli.metric.xqda import XQDA
    from reidcli.store.importer import import_store

    rng = np.random.default_rng(0)
    pids = 1 + np.concatenate([np.arange(6), np.repeat(np.arange(6), 5)])
    camids = np.concatenate([np.zeros(6, int), np.ones(30, int)])
    feats = (rng.standard_normal((36, 8)) + pids[:, None]).astype(np.float32)
    npz = tmp_path / "emb.npz"
    np.savez(npz, features=feats, pid=pids, camid=camids,
             split=np.array(["query"] * 6 + ["gallery"] * 30))
    store = import_store(tmp_path / "s.h5", npz=npz)
    model = XQDA().fit(feats, pids, camids).save(tmp_path / "xqda.h5")

    plain = _modules_of(["eval", "--store", store, "--device", "cpu", "--quiet",
                         "--json", tmp_path / "r.json"])
    assert json.loads((tmp_path / "r.json").read_text())["mAP"] is not None
    through = _modules_of(["eval", "--store", store, "--model", model, "--device", "cpu",
                           "--quiet", "--json", tmp_path / "m.json"])
    assert json.loads((tmp_path / "m.json").read_text())["model"]["method"] == "xqda"
    assert [m for m in NOT_FOR_EVAL if m in plain] == []
    assert [m for m in NOT_FOR_EVAL if m in through] == []
    assert "reidcli.metric.xqda" in through and "reidcli.metric.xqda" not in plain


def _loaded_after(imports: str, names: tuple) -> list[str]:
    """Which of ``names`` (module name prefixes) a fresh interpreter holds after ``imports``."""
    code = (f"import sys; {imports}; "
            f"print(' '.join(n for n in {names!r} if any(m == n or m.startswith(n + '.') "
            "for m in sys.modules)))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()


def test_the_array_engine_imports_no_pandas_and_fitted_models_no_evaluation():
    assert _loaded_after("import reidcli.evaluation.arrays, reidcli.evaluation.engine",
                         ("pandas", "torch", "h5py", "matplotlib")) == []
    # the fitted-model layer sits below the evaluation package (reidcli.pairwise)
    assert _loaded_after("import reidcli.fitted, reidcli.metric.xqda",
                         ("reidcli.evaluation",)) == []
