"""``reid train bot --sources …`` (the DMG-Net paper's BoT baseline, docs/methods/dmgnet.md):
several labelled sources merged with identities kept apart per source, BoT's own P×K sampler
and schedule; the options that name one dataset are refused with sources."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from reidcli.errors import ParameterError
from reidcli.training.config import make_config
from tests.cli.helpers import run_cli
from tests.data.fake_trees import cuhk02 as cuhk02_tree

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _root(tmp_path: Path, dg: tuple[Path, str]) -> Path:
    """A data root with the shared synthetic ``dg`` set and a fake CUHK02 tree."""
    root = tmp_path / "data"
    root.mkdir()
    (root / "synthetic").symlink_to(dg[0] / "synthetic", target_is_directory=True)
    cuhk02_tree.build(root)
    return root


def test_two_source_bot_trains_with_disjoint_labels(capsys, dg_synthetic, tmp_path):
    root = _root(tmp_path, dg_synthetic)
    run = tmp_path / "run"
    code, _, err = run_cli(
        capsys, "train", "bot", "--sources", "synthetic,cuhk02", "--root", root,
        "--source-option", f"synthetic.name={dg_synthetic[1]}",
        "--source-option", "cuhk02.protocol=all_train",
        "--domains", "synthetic/d0,synthetic/d1,cuhk02", "--targets", "synthetic/d3",
        "--preset", "tiny", "--ids-per-batch", "4", "--images-per-id", "2",
        "--iters-per-epoch", "2", "--epochs", "1", "--out", run, "--quiet")
    assert code == 0, err
    with open(run / "train_records.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    labels = {}
    for row in rows:
        labels.setdefault(row["dataset"], set()).add(int(row["label"]))
    assert set(labels) == {"synthetic", "cuhk02"}
    assert not labels["synthetic"] & labels["cuhk02"]           # never collide
    assert set().union(*labels.values()) == set(range(sum(map(len, labels.values()))))
    assert len(labels["cuhk02"]) == sum(cuhk02_tree.IDS_PER_PAIR)   # pids restart per pair
    whole = json.loads((run / "config.json").read_text())
    cfg = whole["config"]
    assert whole["method"] == "bot" and cfg["sources"] == ["synthetic", "cuhk02"]
    assert cfg["iters_per_epoch"] == 2 and cfg["train_split"] is None
    with open(run / "metrics.csv", newline="") as f:
        assert [int(r["iteration"]) for r in csv.DictReader(f)][-1] == 2


@pytest.mark.parametrize("extra,needle", [
    (("--dataset", "market1501"), "--dataset and --sources contradict"),
    (("--option", "protocol=all_train"), "--source-option"),
    (("--train-cams", "0,1"), "--train-cams"),
    (("--eval-every", "1"), "--eval-dataset"),
])
def test_single_dataset_options_refused_with_sources(capsys, tmp_path, extra, needle):
    code, _, err = run_cli(capsys, "train", "bot", "--sources", "synthetic,cuhk02", *extra,
                           "--out", tmp_path / "r")
    lines = [line for line in err.strip().splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and needle in lines[0], err
    assert not (tmp_path / "r").exists()


def test_source_settings_need_sources():
    with pytest.raises(ParameterError, match="needs source datasets"):
        make_config("bot", dataset="market1501", domains=["d0"])
    with pytest.raises(ParameterError, match="needs source datasets"):
        make_config("bot", dataset="market1501", source_options={"viper": {"trial": 1}})
    cfg = make_config("bot", preset="dmgnet_tiny", dataset="synthetic")
    dmg = make_config("dmgnet", preset="tiny", dataset="synthetic", sources=["synthetic"])
    for key in ("input_size", "p", "k", "epochs", "lr_steps", "warmup_epochs", "backbone"):
        assert getattr(cfg, key) == getattr(dmg, key), key
