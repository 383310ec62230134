"""Plugins work for every kind the registries hold (reidcli.registry.Registry): a dataset
loader and a pooling method, each one module of a plugin package named by REIDCLI_PLUGINS,
are listed, get their commands and run, with no edit anywhere else."""
from __future__ import annotations

import json
import sys
import textwrap

import numpy as np
import pytest

from tests.faults.helpers import reid_in_process

DATASET_MODULE = textwrap.dedent('''
    """A plugin dataset: images <pid>_c<cam>_<n>.jpg under ROOT/toyplug/{train,query,gallery}."""
    import pandas as pd

    from reidcli.data.records import DatasetSplit, normalize_frame
    from reidcli.data.registry import DatasetInfo, register, resolve_dataset_dir


    def load_toyplug(root=None, trial=0):
        folder = resolve_dataset_dir("toyplug", root)
        parts = {}
        for split in ("train", "query", "gallery"):
            rows = []
            for path in sorted((folder / split).glob("*.jpg")):
                pid, cam, _ = path.stem.split("_")
                rows.append({"path": str(path), "pid": int(pid), "camid": int(cam[1:]) - 1,
                             "split": split, "dataset": "toyplug"})
            parts[split] = normalize_frame(pd.DataFrame(rows))
        return DatasetSplit(name="toyplug", **parts)


    register(DatasetInfo(name="toyplug", title="A plugin's dataset", aliases=("ToyAlias",),
                         candidates=("toyplug",)), load_toyplug)
''')

POOLING_MODULE = textwrap.dedent('''
    """A plugin pooling method: channel means of one conv-map layer, scaled by the inverse
    training spread, compared by Euclidean distance."""
    import numpy as np

    from reidcli.estimator import Estimator, store_params
    from reidcli.fitted import TrialModel
    from reidcli.params import TEXT, Interval
    from reidcli.registry import register


    class MeanPooled(TrialModel):
        reads = "convmaps"
        metric = "euclidean"

        def __init__(self, scale, layer):
            self.scale, self.layer = np.asarray(scale, dtype=np.float64), str(layer)

        def read_inputs(self, store, rows):
            maps = store.convmaps(self.layer, rows).astype(np.float64)   # [n, C, H, W]
            return maps.mean(axis=(2, 3)) * self.scale

        def transform(self, features):
            return np.asarray(features, dtype=np.float64)


    @register("toy-meanpool", stage="fit-pooling", paper="a test",
              summary="Channel means scaled by the inverse spread.")
    class ToyMeanPool(Estimator):
        reads = "convmaps"
        _parameter_constraints = {"layer": [TEXT], "power": [Interval(float, 0, 2)]}
        _parameter_help = {"layer": "Conv-map layer.", "power": "Exponent of the spread."}

        def __init__(self, layer: str = "conv5_x", power: float = 1.0):
            store_params(self, locals())

        def layer_list(self):
            return [self.layer]

        def fit(self, maps, pids, camids=None):
            p = self._validated_params()
            x = np.asarray(maps[p["layer"]], dtype=np.float64).mean(axis=(2, 3))
            self.scale_ = np.maximum(x.std(0), 1e-6) ** -p["power"]
            return self

        def fitted_arrays(self):
            self._check_fitted("scale_")
            return {"scale": self.scale_}

        @classmethod
        def model_from_arrays(cls, arrays, hyperparameters):
            return MeanPooled(arrays["scale"], hyperparameters["layer"])
''')


@pytest.fixture
def plugins(tmp_path, monkeypatch):
    """Both plugin modules on sys.path and in REIDCLI_PLUGINS; forgotten afterwards."""
    from reidcli import registry
    from reidcli.cli import fit_pooling
    from reidcli.data import registry as data_registry

    package = tmp_path / "pkg"
    package.mkdir()
    (package / "h29_toy_dataset.py").write_text(DATASET_MODULE)
    (package / "h29_toy_pooling.py").write_text(POOLING_MODULE)
    monkeypatch.syspath_prepend(str(package))
    monkeypatch.setenv("REIDCLI_PLUGINS", "h29_toy_dataset, h29_toy_pooling")
    yield tmp_path
    for module in ("h29_toy_dataset", "h29_toy_pooling"):
        sys.modules.pop(module, None)
        registry._DISCOVERED.discard(module)
    registry.METHODS.entries.pop("toy-meanpool", None)
    data_registry.DATASETS.entries.pop("toyplug", None)
    for key in ("toyplug", "toyalias"):
        data_registry.DATASETS.aliases.pop(key, None)
    fit_pooling.app.registered_commands[:] = [c for c in fit_pooling.app.registered_commands
                                              if c.name != "toy-meanpool"]


def test_a_plugin_dataset_is_listed_and_loads(plugins, capsys):
    root = plugins / "data"
    for split, names in {"train": ["0001_c1_0", "0001_c2_1", "0002_c1_0", "0002_c2_1"],
                         "query": ["0003_c1_0"], "gallery": ["0003_c2_0", "0004_c2_0"]}.items():
        (root / "toyplug" / split).mkdir(parents=True)
        for name in names:
            (root / "toyplug" / split / f"{name}.jpg").write_bytes(b"")
    code, out, err = reid_in_process("data", "list", capsys=capsys)
    assert code == 0, err
    assert any(line.split()[:2] == ["toyplug", "ToyAlias"] for line in out.splitlines()), out
    code, out, err = reid_in_process("data", "check", "toyalias", "--root", root,
                                     capsys=capsys)          # an alias, any case
    assert code == 0, err
    cells = [[c.strip() for c in line.split("│")[1:-1]] for line in out.splitlines()]
    counts = {c[0]: c[1:4] for c in cells if c[:1] in (["train"], ["query"], ["gallery"])}
    assert counts == {"train": ["4", "2", "2"], "query": ["1", "1", "1"],
                      "gallery": ["2", "2", "1"]}, out


def test_a_plugin_pooling_method_is_listed_fits_and_evaluates(plugins, capsys):
    from reidcli.evaluation.arrays import evaluate_arrays
    from reidcli.store import open_store
    from reidcli.synthetic.conv_maps import write_toy_store

    store = write_toy_store(plugins / "s.h5", persons=40, trials=1)
    code, out, err = reid_in_process("methods", "--stage", "fit-pooling", "--json",
                                     capsys=capsys)
    assert code == 0, err
    toy = [m for m in json.loads(out) if m["name"] == "toy-meanpool"]
    assert toy and toy[0]["parameters"] == {"layer": "conv5_x", "power": 1.0}
    code, out, err = reid_in_process("fit-pooling", "toy-meanpool", "--help", capsys=capsys)
    assert code == 0, err
    assert "--power" in out and "--K " not in out and "--xqda-lambda" not in out
    code, _, err = reid_in_process("fit-pooling", "toy-meanpool", "--store", store, "--out",
                                   plugins / "m.h5", "--power", "0.5", "--quiet",
                                   capsys=capsys)
    assert code == 0, err
    code, _, err = reid_in_process("eval", "--store", store, "--model", plugins / "m.h5",
                                   "--json", plugins / "r.json", "--quiet", capsys=capsys)
    assert code == 0, err
    got = json.loads((plugins / "r.json").read_text())["mAP"]
    # the same number by hand: channel means × training spread^-0.5, Euclidean ranking
    with open_store(store) as st:
        t = st.protocol.trials[0]
        x = st.convmaps("conv5_x").astype(np.float64).mean(axis=(2, 3))
        pid, cam = st.records["pid"].to_numpy(), st.records["camid"].to_numpy()
    scale = np.maximum(x[np.sort(t["train_idx"])].std(0), 1e-6) ** -0.5
    q, g = t["query_idx"], t["gallery_idx"]
    want = evaluate_arrays(pid[q], cam[q], pid[g], cam[g], query_features=x[q] * scale,
                           gallery_features=x[g] * scale, metric="euclidean")
    assert np.isclose(got, want.mAP, atol=1e-6)
