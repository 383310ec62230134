"""recipes/dgvae_*.sh: the synthetic chain (shrunk in the default run, default knobs under
``-m slow``), and the real-data recipes end to end on the tiny fake SYSU-MM01 and RegDB trees
(tiny preset, from scratch, a few iterations)."""
from __future__ import annotations

import csv
import json
import re
import subprocess
from pathlib import Path

import pytest

from reidcli.paper.dgvae_budget import STAGE1_AMBI_NOTE
from reidcli.paper.dgvae_compare import DGVAE_CLAIMS, VARIANTS
from tests.data.fake_trees import regdb as fake_regdb, sysu_mm01 as fake_sysu
from tests.recipes.helpers import (FULL_TIMEOUT_S, ONE_THREAD, RECIPES, claim_verdicts,
                                   recipe_env, run_recipe, shrunk_notice)

#: 4 + 4 persons (~120 images), every Table 2 row at 3 seeds, every stage 1 epoch of 1
#: iteration: the chain runs and prints every row (one process for the 24 runs)
SHRUNK = dict(DGVAE_TRAIN_IDS="4", DGVAE_TEST_IDS="4", DGVAE_EPOCHS="1,1,1", DGVAE_ITERS="1",
              DGVAE_SEEDS="0,1,2", DGVAE_TOY_SEEDS="none")
#: reid train options after WORKDIR: no loader processes (24 runs of one batch each)
SHRUNK_ARGS = ("--workers", "0")
#: the fake trees have 2–3 training ids: batches of 2 ids, one iteration per stage
FAKE_BUDGET = dict(INIT="scratch", DGVAE_EPOCHS="1,1,1", DGVAE_ITERS="1")
FAKE_TRAIN_ARGS = ("--preset", "tiny", "--device", "cpu", "--ids-per-batch", "2")


def _run(script: str, *args, **env) -> str:
    return run_recipe(script, *args, **ONE_THREAD, **env)


def _claims(*names):
    return [c for c in ((f"{claim} ({m})", b, w) for claim, b, w in DGVAE_CLAIMS
                        for m in ("R-1", "mAP")) if c[0].rsplit(" (", 1)[0] in names]


def _phases(run: Path) -> list[str]:
    with open(run / "metrics.csv") as f:
        return list(dict.fromkeys(row["phase"] for row in csv.DictReader(f)))


def _budget_lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("budget override (")]


def _row(out: str, label: str) -> str:
    found = re.search(rf"^│ {re.escape(label)} +│.*$", out, flags=re.M)
    assert found, (label, out[-3000:])
    return found.group(0)


def _check_synthetic(out: str, work: Path, seeds: list[int]) -> dict[str, str]:
    """Every Table 2 row ran at every seed through every stage of its variant and was
    printed (mean ± std over the seeds' stores) beside the paper's real-data Table 2 rows,
    with every claim's verdict; the notes follow the table."""
    for variant in VARIANTS:
        assert "ours" in _row(out, "DG-VAE" if variant == "dgvae" else variant)
        report = json.loads((work / f"{variant}.json").read_text())
        assert len(report.get("stores") or [None]) == len(seeds)    # one eval over the seeds
        assert 0 <= report["mAP"] <= 1 and report["mINP"] is not None
        for seed in seeds:
            cfg = json.loads((work / variant / f"seed{seed}" / "config.json").read_text())
            assert (cfg["config"]["seed"], cfg["config"]["variant"]) == (seed, variant)
            assert (work / variant / f"seed{seed}.h5").is_file()
    assert f"{len(seeds)} stores" in _row(out, "DG-VAE") if len(seeds) > 1 else True
    assert "paper SYSU-MM01" in out and "paper RegDB" in out and "(real data)" in out
    assert "59.49" in out and "44.45" in out                  # Table 2, rows 12 and 1 (SYSU)
    assert _phases(work / "dgvae" / "seed0") == ["stage1", "stage2", "stage3"]
    assert _phases(work / "baseline" / "seed0") == ["stage1", "stage3"]   # no decoder
    budget = _budget_lines(out)
    assert len(budget) == len(VARIANTS), budget                # one line per row, its seeds
    runs = ", ".join(f"dgvae/seed{s}" for s in seeds)
    assert any(f"({runs}: dgvae)" in line for line in budget), budget
    assert all("preset tiny" in line and "(paper: 100,50,100 epochs" in line for line in budget)
    assert STAGE1_AMBI_NOTE in out
    assert out.index("budget override") > out.index("dgvae > mog_lmc (mAP)")
    assert "not checked" not in out
    summary = json.loads((work / "ablation.json").read_text())
    assert [r["variant"] for r in summary["rows"]] == list(VARIANTS)
    return claim_verdicts(out, _claims(*(c for c, _, _ in DGVAE_CLAIMS)))


def test_dgvae_synthetic_recipe_shrunk(tmp_path):
    out = _run("dgvae_synthetic.sh", tmp_path, *SHRUNK_ARGS, **SHRUNK)
    verdicts = _check_synthetic(out, tmp_path, [0, 1, 2])
    assert set(verdicts.values()) <= {"PASS", "FAIL"} and len(verdicts) == 2 * len(DGVAE_CLAIMS)
    assert "two-modality toy" not in out                        # DGVAE_TOY_SEEDS=none
    assert all("epochs 1,1,1, 1 iterations/epoch" in line for line in _budget_lines(out))
    notice = shrunk_notice(out)
    assert all(f"{knob}={value}" in notice for knob, value in SHRUNK.items()), notice
    meta = json.loads((tmp_path / "data" / "synthetic" / "vi" / "meta.json").read_text())
    assert (meta["params"]["num_train_ids"], meta["params"]["num_test_ids"]) == (4, 4)
    cfg = json.loads((tmp_path / "dgvae" / "seed1" / "config.json").read_text())["config"]
    assert (cfg["stage_epochs"], cfg["iters_per_epoch"], cfg["init"]) == ([1, 1, 1], 1,
                                                                          "scratch")


@pytest.mark.slow
def test_dgvae_synthetic_recipe_full(tmp_path):
    out = _run("dgvae_synthetic.sh", tmp_path, timeout=FULL_TIMEOUT_S)
    _check_synthetic(out, tmp_path, [0, 1, 2])
    assert "two-modality toy" in out
    assert "SHRUNK run" not in out
    meta = json.loads((tmp_path / "data" / "synthetic" / "vi" / "meta.json").read_text())
    assert meta["params"]["num_train_ids"] == 200


@pytest.mark.parametrize("modes", [
    "indoor", pytest.param("all indoor", marks=pytest.mark.slow)])
def test_sysu_recipe_on_a_fake_tree(tmp_path, modes):
    fake_sysu.build(tmp_path / "data")
    work = tmp_path / "work"
    out = _run("dgvae_sysu.sh", work, *FAKE_TRAIN_ARGS, SYSU_ROOT=str(tmp_path / "data"),
               SYSU_MODES=modes, **FAKE_BUDGET)
    assert "SYSU-MM01 indoor-search" in out
    assert "paper: not reported for this protocol" in out       # indoor-search
    if "all" in modes:
        assert "SYSU-MM01 all-search single-shot" in out
        assert "59.49" in out and "93.77" in out                # Table 1, DG-VAE on SYSU
    assert "gallery draws: seeded" in out
    cams = {"all": {0, 1, 3, 4}, "indoor": {0, 1}}
    for mode, gallery_cams in ((m, cams[m]) for m in modes.split()):
        report = json.loads((work / f"{mode}.json").read_text())
        assert report["num_trials"] == 10                       # the 10 gallery draws
        assert report["protocol"] == "sysu"
        from reidcli.store.reader import open_store
        with open_store(work / f"{mode}.h5") as st:
            _, _, g_rows = st.query_gallery_trials()[0]
            assert set(st.records["camid"].to_numpy()[g_rows]) <= gallery_cams
    assert _phases(work / "dgvae") == ["stage1", "stage2", "stage3"]
    budget, = _budget_lines(out)
    assert budget.startswith("budget override (dgvae: dgvae): epochs 1,1,1, 1 iterations/epoch")
    assert STAGE1_AMBI_NOTE in out
    assert shrunk_notice(out).startswith("SHRUNK run (DGVAE_EPOCHS=1,1,1 DGVAE_ITERS=1")


def _regdb(tmp_path, trials: str) -> tuple[str, Path]:
    fake_regdb.build(tmp_path / "data")
    work = tmp_path / "work"
    out = _run("dgvae_regdb.sh", work, *FAKE_TRAIN_ARGS, REGDB_ROOT=str(tmp_path / "data"),
               TRIALS=trials, **FAKE_BUDGET)
    assert "RegDB visible→thermal" in out and "RegDB thermal→visible" in out
    assert "72.97" in out and "86.89" in out                    # Table 1, DG-VAE on RegDB
    for direction in ("v2t", "t2v"):
        report = json.loads((work / f"{direction}.json").read_text())
        assert len(report.get("stores") or [None]) == len(trials.split())   # one eval, all
        assert report["protocol"] == "regdb"
    for k in trials.split():
        train_ids = fake_regdb.TRIALS[int(k) + 1][0]            # idx file k+1
        with open(work / f"trial_{k}" / "train_records.csv") as f:
            assert {int(r["pid"]) for r in csv.DictReader(f)} == set(train_ids)
    budget, = _budget_lines(out)                                # the trials share one line
    assert budget.startswith(f"budget override ({', '.join(f'trial_{k}' for k in trials.split())}"
                             ": dgvae): epochs 1,1,1")
    assert STAGE1_AMBI_NOTE in out
    return out, work


def test_regdb_recipe_on_a_fake_tree_one_trial(tmp_path):
    out, work = _regdb(tmp_path, "1")                           # trial 1 = idx files _2
    from reidcli.store.reader import open_store
    with open_store(work / "trial_1_v2t.h5") as st:             # its own trial's test ids
        _, q_rows, g_rows = st.query_gallery_trials()[0]
        assert set(st.records["pid"].to_numpy()[q_rows]) == set(fake_regdb.TRIALS[2][1])
        assert set(st.records["modality"].to_numpy()[q_rows]) == {"visible"}
        assert set(st.records["modality"].to_numpy()[g_rows]) == {"infrared"}


@pytest.mark.slow
def test_regdb_recipe_on_a_fake_tree_two_trials(tmp_path):
    out, _ = _regdb(tmp_path, "0 1")
    assert "2 stores" in out                                    # mean ± std over the trials


@pytest.mark.slow
def test_ablation_recipe_one_variant_on_a_fake_sysu_tree(tmp_path):
    fake_sysu.build(tmp_path / "data")
    work = tmp_path / "work"
    out = _run("dgvae_ablation.sh", work, *FAKE_TRAIN_ARGS, DATASET="sysu",
               SYSU_ROOT=str(tmp_path / "data"), VARIANTS="mog", **FAKE_BUDGET)
    assert "paper Table 2" in out and "42.12" in out                     # row 2
    assert _phases(work / "mog") == ["stage1", "stage3"]
    assert len(_budget_lines(out)) == 1
    assert "SHRUNK run (VARIANTS=mog" in shrunk_notice(out)


@pytest.mark.slow
def test_ablation_recipe_on_a_fake_sysu_tree(tmp_path):
    fake_sysu.build(tmp_path / "data")
    work = tmp_path / "work"
    out = _run("dgvae_ablation.sh", work, *FAKE_TRAIN_ARGS, DATASET="sysu",
               SYSU_ROOT=str(tmp_path / "data"), VARIANTS="baseline mog", **FAKE_BUDGET)
    assert "paper Table 2" in out and "42.12" in out and "44.45" in out   # rows 2 and 1
    claim_verdicts(out, _claims("baseline > mog"))
    assert "not checked (variants not run)" in out
    assert _phases(work / "mog") == ["stage1", "stage3"]
    assert len(_budget_lines(out)) == 2                         # one per variant
    assert "SHRUNK run (VARIANTS=baseline mog" in shrunk_notice(out)


@pytest.mark.parametrize("script,env,needle", [
    ("dgvae_sysu.sh", {}, "SYSU_ROOT"), ("dgvae_regdb.sh", {}, "REGDB_ROOT"),
    ("dgvae_ablation.sh", {}, "DATASET"),
    ("dgvae_ablation.sh", {"DATASET": "regdb"}, "REGDB_ROOT"),
    ("dgvae_ablation.sh", {"DATASET": "market"}, "use regdb or sysu")])
def test_real_recipes_need_their_data(tmp_path, script, env, needle):
    base = recipe_env(**env)
    for var in ("SYSU_ROOT", "REGDB_ROOT", *(() if "DATASET" in env else ("DATASET",))):
        base.pop(var, None)
    proc = subprocess.run(["bash", str(RECIPES / script), str(tmp_path)], capture_output=True,
                          text=True, env=base, timeout=300)
    assert proc.returncode != 0 and needle in proc.stderr
