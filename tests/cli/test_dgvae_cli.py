"""`reid train dgvae` → `reid extract --model` → `reid eval` on the synthetic ``vi`` preset
(infrared queries, visible gallery; docs/methods/dgvae.md, T11), reproducibility of the
store, and the one-line errors of the command."""
from __future__ import annotations

import json

import h5py
import numpy as np
import pytest

from tests.cli.helpers import run_cli

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture
def vi_data(vi_synthetic_root):
    return ["--dataset", "synthetic", "--root", str(vi_synthetic_root), "--option", "name=vi"]


def _train(capsys, data, run, *extra):
    return run_cli(capsys, "train", "dgvae", *data, "--preset", "tiny", "--epochs", "1,1,1",
                   "--iters-per-epoch", "3", "--out", run, "--quiet", *extra)


def test_train_extract_eval_chain_and_same_seed_same_store(capsys, vi_data, tmp_path):
    stores = []
    for name in ("a", "b"):
        run = tmp_path / f"run_{name}"
        code, _, err = _train(capsys, vi_data, run)
        assert code == 0, err
        store = tmp_path / f"{name}.h5"
        code, _, err = run_cli(capsys, "extract", "--model", run, *vi_data,
                               "--features", "dgvae_idi,dgvae_iai", "--out", store)
        assert code == 0, err
        stores.append(store)
    from reidcli.data.synthetic_params import make_params

    ir_cams = set(make_params("vi").ir_cameras)
    with h5py.File(stores[0], "r") as a, h5py.File(stores[1], "r") as b:
        idi = a["features/dgvae_idi"]
        assert idi.shape[1] == 16 and a["features/dgvae_iai"].shape[1] == 8
        assert idi.attrs["metric"] == "cosine"
        assert np.array_equal(idi[()], b["features/dgvae_idi"][()])     # same seed, same store
        modality = a["records/modality"][()].astype(str)
        camid = a["records/camid"][()]
        assert set(modality) == {"visible", "infrared"}
        assert all((m == "infrared") == (int(c) + 1 in ir_cams) for m, c in zip(modality, camid))
    report = tmp_path / "r.json"
    code, _, err = run_cli(capsys, "eval", "--store", stores[0], "--protocol", "auto",
                           "--json", report, "--quiet")
    assert code == 0, err
    result = json.loads(report.read_text())
    assert result["feature"] == "dgvae_idi" and 0.0 <= result["mAP"] <= 1.0


def test_baseline_variant_runs_stages_1_and_3(capsys, vi_data, tmp_path):
    run = tmp_path / "base"
    code, _, err = _train(capsys, vi_data, run, "--variant", "baseline")
    assert code == 0, err
    phases = [line.split(",")[-1] for line in (run / "metrics.csv").read_text().splitlines()[1:]]
    assert set(phases) == {"stage1", "stage3"}


@pytest.mark.parametrize("extra,words", [
    (["--variant", "bogus"], "--variant"),
    (["--epochs", "1,x"], "--epochs"),
    (["--epochs", "1,1"], "--epochs"),
    (["--set", "nonsense=1"], "--set"),
    (["--variant", "mog", "--stages", "2"], "--stages"),
    (["--init", "imagenet"], "--init"),
])
def test_bad_options_give_one_line_errors(capsys, vi_data, tmp_path, extra, words):
    code, _, err = _train(capsys, vi_data, tmp_path / "bad", *extra)
    assert code == 2, err
    lines = [line for line in err.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and words in lines[0], err


def test_a_dataset_without_infrared_images_is_refused(capsys, tiny_synthetic_root, tmp_path):
    code, _, err = run_cli(capsys, "train", "dgvae", "--dataset", "synthetic", "--root",
                           tiny_synthetic_root, "--option", "name=tiny", "--preset", "tiny",
                           "--out", tmp_path / "r", "--quiet")
    assert code == 2 and "modality" in err, err
