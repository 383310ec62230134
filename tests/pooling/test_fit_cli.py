"""`reid fit-pooling` → fitted file → `reid eval --model` on a conv-map store."""
from __future__ import annotations

import json

import h5py
import numpy as np
import pytest

from reidcli import fitted
from reidcli.errors import UsageError
from reidcli.pooling.cdpcf import CDPCF, DPCF, AvgP
from reidcli.pooling.fit import fit_pooling_store
from reidcli.synthetic.conv_maps import write_toy_store
from tests.cli.helpers import run_cli


@pytest.fixture(scope="module")
def toy_store(tmp_path_factory):
    return write_toy_store(tmp_path_factory.mktemp("toy") / "maps.h5", seed=0, persons=120,
                           trials=3)


def _eval(capsys, store, model, tmp_path, name, *extra):
    out = tmp_path / f"{name}.json"
    code, _, err = run_cli(capsys, "eval", "--store", store, "--model", model, "--json", out,
                           "--quiet", *extra)
    assert code == 0, err
    return json.loads(out.read_text())


def test_fit_then_eval_every_method(capsys, tmp_path, toy_store):
    rank1 = {}
    for method in ("cdpcf", "dpcf", "avgp", "avgp-pad"):
        model = tmp_path / f"{method}.h5"
        code, _, err = run_cli(capsys, "fit-pooling", method, "--store", toy_store, "--out",
                               model, "--K", "2", "--E", "16", "--G", "3",
                               "--layers", "conv5_x")
        assert code == 0, err
        report = _eval(capsys, toy_store, model, tmp_path, method)
        assert report["num_trials"] == 3 and report["pur"] is not None
        rank1[method] = report["cmc"][0]
    assert rank1["cdpcf"] > rank1["dpcf"] > rank1["avgp"]
    with h5py.File(tmp_path / "cdpcf.h5") as h5:
        hp = json.loads(h5.attrs["hyperparameters"])
        assert hp["K"] == 2 and hp["E"] == 16 and hp["G"] == 3 and hp["camids"] == [0, 1]
        assert h5["trial_2/conv5_x/weight_maps"].shape == (2 * 48, 2)
        assert h5["trial_0/conv5_x/map_1/proj"].dtype == np.float32
        assert "command" in json.loads(h5.attrs["provenance"])


def test_avgp_without_metric_equals_pcb_source_cosine(capsys, tmp_path, toy_store):
    model = tmp_path / "cos.h5"
    fit_pooling_store(toy_store, model, AvgP(G=3, metric="none"),
                      layers=["conv4_x"], progress=False)
    pooled = _eval(capsys, toy_store, model, tmp_path, "pooled")
    code, _, err = run_cli(capsys, "eval", "--store", toy_store, "--feature", "pcb_g",
                           "--feat-norm", "global", "--json", tmp_path / "pcb.json", "--quiet")
    assert code == 0, err
    pcb = json.loads((tmp_path / "pcb.json").read_text())
    np.testing.assert_allclose(pooled["cmc"], pcb["cmc"], atol=1e-9)
    assert pooled["mAP"] == pytest.approx(pcb["mAP"], abs=1e-6)


def test_trial_subsets_and_reduced_training_ids(capsys, tmp_path, toy_store):
    sub = tmp_path / "sub.h5"
    fit_pooling_store(toy_store, sub, DPCF(K=2, E=16, G=3),
                      layers=["conv5_x"], trials="1,2", progress=False)
    assert fitted.load(sub).trial_ids == [1, 2]
    report = _eval(capsys, toy_store, sub, tmp_path, "sub", "--trials", "1,2")
    assert [t["trial"] for t in report["trials"]] == [1, 2]
    code, _, err = run_cli(capsys, "eval", "--store", toy_store, "--model", sub, "--quiet")
    assert code == 2 and "no fit for trial(s) 0" in err
    few = tmp_path / "few.h5"
    code, _, err = run_cli(capsys, "fit-pooling", "cdpcf", "--store", toy_store, "--out", few,
                           "--K", "2", "--E", "16", "--G", "3", "--layers", "conv5_x",
                           "--trials", "0", "--train-ids", "10", "--repeats", "2")
    assert code == 0, err
    model = fitted.load(few)
    assert model.num_repeats == 2
    with h5py.File(few) as h5:
        assert set(h5["trial_0"]) == {"repeat_0", "repeat_1"}
    report = _eval(capsys, toy_store, few, tmp_path, "few", "--trials", "0")
    assert [(t["trial"], t["repeat"]) for t in report["trials"]] == [(0, 0), (0, 1)]


def test_user_errors(capsys, tmp_path, toy_store):
    code, _, err = run_cli(capsys, "fit-pooling", "cdpcf", "--store", toy_store, "--out",
                           tmp_path / "x.h5", "--layers", "conv9_x")
    assert code == 2 and "no conv maps of layer 'conv9_x'" in err
    with pytest.raises(UsageError, match="train_ids=100 exceeds the 60 training ids"):
        fit_pooling_store(toy_store, tmp_path / "y.h5", CDPCF(K=2, E=16, G=3),
                          train_ids_limit=100, repeats=1, progress=False)
    code, _, err = run_cli(capsys, "fit-pooling", "cdpcf", "--store", toy_store, "--out",
                           tmp_path / "z.h5", "--grid", "6by1")
    assert code == 2 and "--grid" in err and "Traceback" not in err


def test_average_images_per_camera(tmp_path):
    """Fig. 5 data: the mean training image of each camera is kept in the fitted file."""
    from reidcli.data.synthetic import generate
    from reidcli.features.extract import extract_handcrafted_store, read_image_batch
    from reidcli.features.layout import dataset_layout
    root = tmp_path / "data"
    generate(root, "tiny", progress=False)
    layout = dataset_layout("synthetic", root, name="tiny", progress=False)
    store = extract_handcrafted_store(layout, tmp_path / "s.h5", [], maps=["color-grid"],
                                      progress=False)
    out = fit_pooling_store(store, tmp_path / "m.h5", CDPCF(K=2, E=16),
                            progress=False).path
    with h5py.File(out) as h5:
        images = h5["trial_0/average_images"][()]
        cams = h5["trial_0/average_image_camids"][()]
    train = layout.records[layout.records["split"] == "train"]
    train = train[train["pid"] > 0]
    assert images.shape == (len(cams), 128, 64, 3) and images.dtype == np.uint8
    first = train[train["camid"] == cams[0]]["path"].tolist()
    want = read_image_batch(first, (128, 64)).mean(0)
    np.testing.assert_allclose(images[0], want, atol=0.51)
    model = fitted.load(out).for_trial(0)          # extra arrays do not disturb the model
    assert model.layers == ["color-grid"]
