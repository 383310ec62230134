"""A new adaptation method is one module (issue 29): here a plugin written by the test into a
temporary package (``REIDCLI_PLUGINS``) declares its own parameter, and `reid methods`,
`reid adapt <name> --help`, `reid adapt <name> …`, the validation and the output store's
provenance pick it up with no edit anywhere else. The common checks every registered
adaptation method passes run on it too."""
from __future__ import annotations

import json
import sys
import textwrap

import h5py
import numpy as np
import pytest

from reidcli import registry
from reidcli.adapt import AdaptConfig, adapt_features, inputs_from_arrays
from reidcli.adapt.config import own_parameters, read_settings
from tests.faults.helpers import (assert_one_line_error_in_process, files,
                                  reid_in_process)

SHRINK = textwrap.dedent('''
    """A toy adaptation: move every query towards its camera's query mean by ``alpha``."""
    from reidcli.params import Interval
    from reidcli.registry import Parameter, register_info


    def shrink(queries, codes, stats, cfg):
        """queries [N, d], codes [N] → q − α (q − M_q[c])."""
        alpha = cfg.params["alpha"]
        return (queries - alpha * (queries - stats.mean_q[codes])).astype(queries.dtype)


    register_info("toy-shrink", stage="adapt", paper="a test",
                  summary="Shrink every query towards its camera mean.",
                  parameters=(Parameter("alpha", 0.5, (Interval(float, 0, 1),),
                                        "Weight of the camera mean."),),
                  extras={"closed_form": shrink, "normalizes_gallery": False,
                          "label": "toy shrink"})
''')


@pytest.fixture
def shrink_plugin(tmp_path, monkeypatch):
    """The plugin module on sys.path and in REIDCLI_PLUGINS; forgotten afterwards."""
    folder = tmp_path / "plugins"
    folder.mkdir()
    (folder / "toy_shrink.py").write_text(SHRINK)
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setenv("REIDCLI_PLUGINS", "toy_shrink")
    yield "toy-shrink"
    from reidcli.cli import adapt as cli_adapt

    registry._METHODS.pop("toy-shrink", None)
    registry._DISCOVERED.discard("toy_shrink")
    sys.modules.pop("toy_shrink", None)
    cli_adapt.app.registered_commands[:] = [c for c in cli_adapt.app.registered_commands
                                            if c.name != "toy-shrink"]
    cli_adapt._BUILT.pop("toy-shrink", None)


def _inputs(seed: int = 0):
    rng = np.random.default_rng(seed)
    q, g = rng.normal(size=(24, 6)) + 1.0, rng.normal(size=(30, 6))
    return inputs_from_arrays(q, np.arange(24) % 3, g, np.arange(30) % 3)


def check_adaptation_method(name: str) -> None:
    """What every registered adaptation method must satisfy: its own parameters' defaults
    pass their constraints and do not shadow a shared setting; its defaults resolve; a
    method that needs no model adapts tiny arrays to finite rows of the same shape, the
    same bits twice."""
    info = registry.get(name, "adapt")
    config = AdaptConfig(name).resolved()
    for p in own_parameters(info):
        assert p.name not in read_settings(info), (name, p.name)
        assert p.help, (name, p.name)                      # the generated --help explains it
        assert p.name in config.params                     # defaults resolved
    if config.uses_model:
        return
    inputs = _inputs()
    first = adapt_features(inputs, AdaptConfig(name, device="cpu"))
    again = adapt_features(inputs, AdaptConfig(name, device="cpu"))
    assert first.queries.shape == inputs.queries.shape and np.isfinite(first.queries).all()
    np.testing.assert_array_equal(first.queries, again.queries)


def test_every_registered_method_passes_the_common_check():
    names = [m.name for m in registry.methods("adapt")]
    assert {"none", "norm", "dart3", "dart3-lite", "tent", "temp"} <= set(names)
    for name in names:
        check_adaptation_method(name)


def test_a_new_adaptation_method_is_one_module(shrink_plugin, biased_stores, tmp_path,
                                               capsys):
    name = shrink_plugin
    code, out, err = reid_in_process("methods", "--stage", "adapt", "--json", capsys=capsys)
    assert code == 0, err
    listed = {m["name"]: m for m in json.loads(out)}
    assert listed[name]["parameters"] == {"alpha": 0.5}
    check_adaptation_method(name)                          # the common checks pick it up

    code, out, err = reid_in_process("adapt", name, "--help", capsys=capsys)
    assert code == 0, err
    assert "--alpha" in out and "Weight of the camera mean" in out
    assert "--tau" not in out and "--lr" not in out        # only what it reads

    store = biased_stores[0]
    code, _, err = reid_in_process("adapt", name, "--store", store, "--out", tmp_path / "a.h5",
                                   "--alpha", "0.25", capsys=capsys)
    assert code == 0, err
    code, _, err = reid_in_process("adapt", name, "--store", store, "--out", tmp_path / "b.h5",
                                   "--param", "alpha=0.5", "--quiet", capsys=capsys)
    assert code == 0, err
    with h5py.File(tmp_path / "a.h5") as f:
        assert json.loads(f["adapt"][name].attrs["params_json"])["alpha"] == 0.25
    from reidcli.adapt.inputs import read_inputs
    from reidcli.store import open_store

    with open_store(tmp_path / "a.h5") as st:
        adapt = st.provenance["adapt"]
        assert (adapt["method"], adapt["alpha"], adapt["label"]) == (name, 0.25, "toy shrink")
    # the numbers: q − α (q − M_q[c]) moves each query linearly in α
    q = read_inputs(store).queries
    a, b = read_inputs(tmp_path / "a.h5").queries, read_inputs(tmp_path / "b.h5").queries
    assert not np.allclose(a, q)
    np.testing.assert_allclose(2 * (a - q), b - q, rtol=1e-4, atol=1e-5)

    # a bad value: one line naming the flag, exit 2, nothing written
    before = files(tmp_path)
    for args, needles in ((["--alpha", "2"], ["--alpha", "2.0", "[0, 1]"]),
                          (["--param", "alpha=abc"], ["--param alpha", "'abc'"]),
                          (["--param", "tau=5"], ["--param tau", "not a setting of"])):
        result = reid_in_process("adapt", name, "--store", store, "--out", tmp_path / "c.h5",
                                 *args, capsys=capsys)
        assert_one_line_error_in_process(result, *needles)
    assert files(tmp_path) == before
