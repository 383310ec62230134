"""Self-registration: a new metric learner is one module (here a plugin written by the test),
and `reid train` / `reid eval` / `reid methods` pick it up with no edit anywhere else."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from reidcli import registry

TOY_MODULE = textwrap.dedent('''
    """A toy metric learner: scale every dimension by its inverse training spread."""
    import numpy as np

    from reidcli.estimator import Estimator, store_params
    from reidcli.fitted import TrialModel
    from reidcli.params import Interval
    from reidcli.registry import register


    class ScaledFeatures(TrialModel):
        metric = "euclidean"

        def __init__(self, scale):
            self.scale = np.asarray(scale, dtype=np.float64)
            self.input_dim = len(self.scale)

        def transform(self, features):
            return self.check_input(features, np.float64) * self.scale


    @register("toy-scale", stage="train", paper="a test", summary="Inverse-spread scaling.")
    class ToyScale(Estimator):
        _parameter_constraints = {"power": [Interval(float, 0, 2)]}
        _parameter_help = {"power": "Exponent of the inverse spread."}

        def __init__(self, power: float = 1.0):
            store_params(self, locals())

        def fit(self, X, pids, camids=None):
            p = self._validated_params()
            spread = np.maximum(np.asarray(X, dtype=np.float64).std(0), 1e-6)
            self.scale_ = spread ** -p["power"]
            return self

        def fitted_arrays(self):
            self._check_fitted("scale_")
            return {"scale": self.scale_}

        @classmethod
        def model_from_arrays(cls, arrays, hyperparameters):
            return ScaledFeatures(arrays["scale"])
''')


def _reid(tmp_path, *args, plugins="toy_metric"):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.getcwd(),
                                                         os.environ.get("PYTHONPATH", "")]),
           "REIDCLI_PLUGINS": plugins}
    return subprocess.run([sys.executable, "-m", "reidcli.cli.main", *map(str, args)],
                          capture_output=True, text=True, env=env, timeout=300)


@pytest.fixture(scope="module")
def plugin_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("plugin")
    (folder / "toy_metric.py").write_text(TOY_MODULE)
    (folder / "broken_metric.py").write_text("raise ImportError('needs a package we lack')\n")
    return folder


def test_a_new_metric_learner_is_one_module(plugin_dir, tmp_path):
    from reidcli.evaluation.arrays import evaluate_arrays
    from reidcli.synthetic.conv_maps import write_toy_store
    from reidcli.store import open_store

    store = write_toy_store(tmp_path / "s.h5", persons=40, trials=1)
    listed = _reid(plugin_dir, "methods", "--json")
    assert listed.returncode == 0, listed.stderr
    toy = [m for m in json.loads(listed.stdout) if m["name"] == "toy-scale"]
    assert toy and toy[0]["stage"] == "train" and toy[0]["parameters"] == {"power": 1.0}
    helped = _reid(plugin_dir, "train", "toy-scale", "--help")
    assert "--power" in helped.stdout and "--kernel" not in helped.stdout
    trained = _reid(plugin_dir, "train", "toy-scale", "--store", store, "--out",
                    tmp_path / "m.h5", "--power", "0.5", "--quiet")
    assert trained.returncode == 0, trained.stderr
    evaluated = _reid(plugin_dir, "eval", "--store", store, "--model", tmp_path / "m.h5",
                      "--json", tmp_path / "r.json", "--quiet")
    assert evaluated.returncode == 0, evaluated.stderr
    result = json.loads((tmp_path / "r.json").read_text())
    # the same numbers by hand: scale by the training spread^-0.5, rank by Euclidean distance
    with open_store(store) as st:
        t = st.protocol.trials[0]
        x = st.features("pcb_g").astype(np.float64)
        pid, cam = st.records["pid"].to_numpy(), st.records["camid"].to_numpy()
    scale = np.maximum(x[np.sort(t["train_idx"])].std(0), 1e-6) ** -0.5
    q, g = t["query_idx"], t["gallery_idx"]
    want = evaluate_arrays(pid[q], cam[q], pid[g], cam[g], query_features=x[q] * scale,
                           gallery_features=x[g] * scale, metric="euclidean")
    assert np.isclose(result["mAP"], want.mAP, atol=1e-6)
    # a bad value is a one-line error naming the flag the user typed
    bad = _reid(plugin_dir, "train", "toy-scale", "--store", store, "--out",
                tmp_path / "n.h5", "--power", "5")
    assert bad.returncode == 2 and bad.stderr.startswith("error: --power 5.0 must be")
    assert "Traceback" not in bad.stderr and not (tmp_path / "n.h5").exists()


def test_a_broken_method_module_fails_loudly_with_its_own_error(plugin_dir):
    out = _reid(plugin_dir, "methods", plugins="broken_metric")
    assert out.returncode == 2
    assert "method module broken_metric failed to import" in out.stderr
    assert "needs a package we lack" in out.stderr and "Traceback" not in out.stderr


def test_reid_methods_lists_every_stage(capsys):
    from tests.cli.helpers import run_cli

    code, out, err = run_cli(capsys, "methods", "--json")
    assert code == 0, err
    listed = {m["name"]: m for m in json.loads(out)}
    assert listed["xqda"]["parameters"]["lam"] == 0.001
    assert listed["xqda"]["flags"]["lam"] == "--reg"
    assert listed["cdpcf"]["stage"] == "fit-pooling" and listed["cdpcf"]["parameters"]["K"] == 10
    assert listed["linear-projection"]["stage"] == "fitted"
    code, out, _ = run_cli(capsys, "methods")
    assert code == 0 and "warca" in out and "Jose" in out


def test_unknown_and_duplicate_names():
    with pytest.raises(Exception, match="unknown method 'nope'"):
        registry.get("nope")
    with pytest.raises(Exception, match="registered by both"):
        registry.register_loader("xqda", lambda a, h: None, paper="-", summary="-",
                                 module="somewhere.else")


# -- the Registry class and its indexes -------------------------------------------------------
def test_registry_class_lazy_lookup_aliases_and_conflicts(tmp_path, monkeypatch):
    """One class for every kind: a known name imports its indexed module only; an unknown
    one the plugins, then every module; aliases fold case; two modules may not share a name."""
    package = tmp_path / "h29pkg"
    package.mkdir()
    (package / "__init__.py").write_text('THINGS = {"one": "h29pkg.first:ONE", '
                                         '"uno": "h29pkg.first:ONE"}\n')
    (package / "first.py").write_text("from h29reg import REG\nONE = 1\n"
                                      "REG.add('one', ONE, group='g', module=__name__, "
                                      "aliases=('Uno',))\n")
    (package / "second.py").write_text("from h29reg import REG\n"
                                       "REG.add('two', 2, group='g', module=__name__)\n")
    (tmp_path / "h29reg.py").write_text(
        "from reidcli.registry import Registry\n"
        "REG = Registry('thing', {'g': ('h29pkg',)}, index_attr='THINGS', fold_case=True)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        from h29reg import REG

        assert REG.find("UNO") == 1 and "h29pkg.second" not in sys.modules   # index only
        assert REG.find("two") == 2 and "h29pkg.second" in sys.modules       # discovery
        assert REG.find("three") is None and REG.names() == ["one", "two"]
        assert REG.find("one", ["other"]) is None and REG.group_of("one") == "g"
        with pytest.raises(Exception, match="thing 'two' is registered by both"):
            REG.add("two", 3, group="g", module="elsewhere")
    finally:
        for name in ("h29reg", "h29pkg", "h29pkg.first", "h29pkg.second"):
            sys.modules.pop(name, None)


@pytest.mark.parametrize("stage", ["train", "fit-pooling", "adapt", "train-net", "fitted"])
def test_stage_index_names_exactly_the_built_in_methods(stage):
    """Each stage package's ``METHODS`` index: every entry's module registers that name and
    has the attribute; every built-in method of the stage is indexed."""
    import importlib

    index = registry.METHODS.index([stage])
    built_in = {m.name: m for m in registry.methods(stage)
                if m.module.startswith("reidcli.")}
    assert sorted(index) == sorted(built_in)
    for name, target in index.items():
        module, _, attr = target.partition(":")
        assert built_in[name].module == module, name
        assert not attr or hasattr(importlib.import_module(module), attr), target


def test_a_lookup_imports_only_the_module_it_needs():
    code = ("import sys; from reidcli import registry; from reidcli.data import registry as d; "
            "registry.get('klfda', 'train'); registry.get('avgp-pad', 'fit-pooling'); "
            "d.canonical_name('Market'); "
            "print(' '.join(m for m in sys.modules if m.startswith(('reidcli.metric.', "
            "'reidcli.pooling.', 'reidcli.data.datasets.'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    loaded = {m.rsplit(".", 1)[1] for m in out.stdout.split()}
    # lfda (klfda), cdpcf (avgp-pad, which uses XQDA) and the Market loader
    assert {"lfda", "cdpcf", "xqda", "market1501"} <= loaded
    assert not loaded & {"kissme", "pca", "rpcca", "warca", "fit", "viper", "grid", "cuhk03"}


def test_architecture_index_matches_what_the_trainers_declare():
    """Model architectures live in the one registry class: the index of reidcli.training
    names each built-in kind's module, and loading a kind imports only that module."""
    import subprocess
    import sys

    from reidcli import training
    from reidcli.models import checkpoint

    checkpoint.ARCHITECTURES.discover()
    declared = {kind for kind, arch in checkpoint.ARCHITECTURES.entries.items()
                if arch.module.startswith("reidcli.training.")}
    assert declared == set(training.ARCHITECTURES)
    for kind, target in training.ARCHITECTURES.items():
        assert checkpoint.ARCHITECTURES.entries[kind].module == target.partition(":")[0]
    code = ("import sys; from reidcli.models.checkpoint import architecture; "
            "architecture('bot'); "
            "print(sorted(m for m in sys.modules if m.startswith('reidcli.training.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert "reidcli.training.bot_trainer" in out and "dgvae_trainer" not in out
