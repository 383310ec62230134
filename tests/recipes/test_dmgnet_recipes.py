"""recipes/dmgnet_*.sh: the synthetic chain (shrunk in the default run, default knobs under
``-m slow``), and the real-data recipes end to end on tiny fake trees (tiny preset, from
scratch, one iteration): Mixed B and Person30K in the default run, Mixed A and the fuller
variants under ``-m slow``."""
from __future__ import annotations

import csv
import json
import re
import subprocess
from pathlib import Path

import pytest

from reidcli.paper.dmgnet_budget import PAIRED_CONTROL, PAPER_BUDGET, PAPER_BUDGET_BOT
from reidcli.paper.dmgnet_compare import (HEADINGS, NULL_RESULT, PROTOCOL_ASSUMED,
                                           SYNTHETIC_CLAIMS)
from tests.data.fake_trees import (cuhk02 as fake_cuhk02, cuhk03 as fake_cuhk03,
                                   cuhk_sysu as fake_cuhk_sysu, grid as fake_grid,
                                   ilids as fake_ilids, msmt17 as fake_msmt17,
                                   prid2011 as fake_prid2011, viper as fake_viper,
                                   write_image)
from tests.recipes.helpers import (FULL_TIMEOUT_S, ONE_THREAD, RECIPES, claim_verdicts,
                                   recipe_env, run_recipe, shrunk_notice)
from tests.recipes.test_dart3_recipes import write_market_tree

#: 4 + 4 persons per domain (~470 images), one epoch of 1 iteration, every row (the Table 6
#: rows and the paired-batch control) at 3 seeds: 15 runs in one process
SHRUNK = dict(DMG_TRAIN_IDS="4", DMG_TEST_IDS="4", DMG_EPOCHS="1", DMG_ITERS="1",
              DMG_SEEDS="0,1,2")
#: reid train options after WORKDIR: no loader processes
SHRUNK_ARGS = ("--workers", "0")
#: the rows of the synthetic recipe, in its order
ROWS = ("bot", "metadisc", "metagen", "dmgnet", "paired")
#: the labels the recipes print (the paired-batch control is not the paper's BoT)
LABELS = {"bot": "BoT", "paired": PAIRED_CONTROL, "dmgnet": "DMG-Net",
          "metagen": "Meta-generalization", "metadisc": "Meta-discrimination"}
#: the fake trees have a handful of ids: batches of 2 ids, one iteration
FAKE_BUDGET = dict(INIT="scratch", DMG_EPOCHS="1", DMG_ITERS="1")
FAKE_TRAIN_ARGS = ("--preset", "tiny", "--device", "cpu", "--ids-per-batch", "2")
#: loader options that let the fake targets hold a trial (fewer test ids than the protocol)
FAKE_TARGET_OPTIONS = ("prid2011.shared_ids=6 prid2011.test_ids=3 grid.expected_train_ids=3 "
                       "viper.test_ids=4 ilids.test_ids=4")
CLAIM = ("DMG-Net > BoT (mAP)", "DMG-Net > BoT (CMC@1)")


def _run(script: str, *args, **env) -> str:
    return run_recipe(script, *args, **ONE_THREAD, **env)


def _row(out: str, label: str) -> str:
    """The first line of the table row of ``label`` (a long label wraps in its cell: its
    longest leading words that fill the first line)."""
    words = label.split(" ")
    for n in range(len(words), 0, -1):
        found = re.search(rf"^│ {re.escape(' '.join(words[:n]))} +│.*$", out, flags=re.M)
        if found:
            return found.group(0)
    raise AssertionError((label, out[-3000:]))


def _budget_lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("budget override (")]


def _config(run: Path) -> dict:
    return json.loads((run / "config.json").read_text())["config"]


def _method(run: Path) -> str:
    return json.loads((run / "config.json").read_text())["method"]


def _check_budget(out: str, work: Path, variants, seed: int | None = None) -> list[str]:
    """One budget line for the DMG-Net variants (one budget) and one for BoT, which trains
    the same epochs and the same images per epoch in P×K batches (twice the iterations);
    returns the lines. ``seed``: the runs are reid paper ablation's ``VARIANT/seedS``."""
    lines = _budget_lines(out)
    dmg = [v for v in variants if v != "bot"]
    at = "" if seed is None else f"/seed{seed}"
    assert len(lines) == bool(dmg) + ("bot" in variants), lines
    for line in lines:
        names = [v for v in variants if f"{v}{at}: {LABELS[v]}" in line]
        assert names == (["bot"] if f"bot{at}: BoT" in line else dmg), (line, variants)
        assert (PAPER_BUDGET_BOT if names == ["bot"] else PAPER_BUDGET) in line
    if "bot" in variants and dmg:
        bot, other = _config(work / "bot" / at[1:]), _config(work / dmg[0] / at[1:])
        assert _method(work / "bot" / at[1:]) == "bot"
        assert _method(work / dmg[0] / at[1:]) == "dmgnet"
        for key in ("epochs", "input_size", "p", "k", "lr_steps", "warmup_epochs", "lr",
                    "backbone"):
            assert bot[key] == other[key], key
        if other["iters_per_epoch"] is not None:            # the same images per epoch
            assert bot["iters_per_epoch"] == 2 * other["iters_per_epoch"]
    return lines


def _check_synthetic(out: str, work: Path, variants, seeds) -> None:
    """Every variant trained on d0–d2 under one budget at every seed, was evaluated on d3
    (mean ± std over the seeds' stores) and printed; the claims, the null-result note and the
    budget lines follow the table."""
    for variant in variants:
        assert "ours" in _row(out, LABELS[variant])
        for seed in seeds:
            run = work / variant / f"seed{seed}"
            cfg = _config(run)
            assert cfg["domains"] == ["synthetic/d0", "synthetic/d1", "synthetic/d2"]
            assert cfg["seed"] == seed
            if variant == "bot":                   # the paper's BoT: reid train bot --sources
                assert _method(run) == "bot" and "no_meta" not in cfg
                with open(run / "train_records.csv") as f:
                    domains = {r["domain"] for r in csv.DictReader(f)}
                assert domains == {"synthetic/d0", "synthetic/d1", "synthetic/d2"}
            else:
                assert (cfg["no_meta"], cfg["md_weight"] == 0) == {
                    "paired": (True, True), "dmgnet": (False, False),
                    "metagen": (False, True), "metadisc": (True, False)}[variant]
            from reidcli.store.reader import open_store
            with open_store(work / variant / f"seed{seed}.h5") as st:   # the held-out domain
                assert set(st.records["domain"]) == {"synthetic/d3"}
        report = json.loads((work / f"{variant}.json").read_text())
        assert 0 <= report["mAP"] <= 1
        assert len(report.get("stores") or [None]) == len(seeds)      # one eval, every seed
    assert "the paper has no synthetic numbers" in out
    assert " ".join(NULL_RESULT.split())[:60] in " ".join(out.split())
    _check_budget(out, work, variants, seeds[0])
    assert out.index("budget override") > out.index("PASS" if "PASS" in out else "FAIL")
    claim_verdicts(out, [(f"{c} ({HEADINGS[m]})",) for c, _, _, ms in SYNTHETIC_CLAIMS
                         for m in ms])
    assert "not checked" not in out


def test_dmgnet_synthetic_recipe_shrunk(tmp_path):
    out = _run("dmgnet_synthetic.sh", tmp_path, *SHRUNK_ARGS, **SHRUNK)
    _check_synthetic(out, tmp_path, ROWS, [0, 1, 2])
    assert all("epochs 1" in line for line in _budget_lines(out))
    assert "3 stores" in _row(out, "DMG-Net")
    # the claims are checked against the BoT row, never the paired-batch control
    bot_map = float(_row(out, "BoT").split("│")[5].split("±")[0])
    assert re.search(rf"^(PASS|FAIL)  DMG-Net > BoT \(mAP\)[^:]*: [0-9.]+ vs {bot_map:.2f}$",
                     out, flags=re.M), out[-2000:]
    notice = shrunk_notice(out)
    assert all(f"{knob}={value}" in notice for knob, value in SHRUNK.items()), notice
    meta = json.loads((tmp_path / "data" / "synthetic" / "dg" / "meta.json").read_text())
    assert (meta["params"]["num_train_ids"], meta["params"]["num_test_ids"]) == (4, 4)
    assert meta["params"]["num_domains"] == 4
    cfg = _config(tmp_path / "dmgnet" / "seed1")
    assert (cfg["epochs"], cfg["iters_per_epoch"], cfg["init"]) == (1, 1, "scratch")
    assert _config(tmp_path / "bot" / "seed1")["iters_per_epoch"] == 2    # one budget


@pytest.mark.slow
def test_dmgnet_synthetic_recipe_full(tmp_path):
    out = _run("dmgnet_synthetic.sh", tmp_path, timeout=FULL_TIMEOUT_S)
    _check_synthetic(out, tmp_path, ROWS, [0, 1, 2])
    assert "SHRUNK run" not in out
    meta = json.loads((tmp_path / "data" / "synthetic" / "dg" / "meta.json").read_text())
    assert meta["params"]["num_train_ids"] == 150


def _targets(root: Path) -> None:
    for fake in (fake_prid2011, fake_grid, fake_viper, fake_ilids):
        fake.build(root)


def _check_mixed(out: str, work: Path, setting: str, targets, trials, variants) -> None:
    """One multi-store eval per (variant, target) over every trial, printed beside Table 5."""
    paper = {"mixed_a": {"prid2011": "68.38", "grid": "56.62", "viper": "60.38",
                         "ilids": "83.94"},
             "mixed_b": {"prid2011": "69.73", "grid": "47.18", "viper": "70.93",
                         "ilids": "88.20"}}[setting]                 # Table 5, DMG-Net mAP
    name = {"mixed_a": "Mixed A", "mixed_b": "Mixed B"}[setting]
    for target in targets:
        assert f"{name} → " in out and paper[target] in out
        for variant in variants:
            report = json.loads((work / f"{variant}_{target}.json").read_text())
            assert len(report["stores"]) == len(trials)          # ONE eval over the trials
            assert all((work / f"{variant}_{target}_t{k}.h5").is_file() for k in trials)
    for variant in variants:
        cfg = _config(work / variant)
        assert cfg["sources"] == [setting] and cfg["color_jitter"] is True
        assert sorted(cfg["targets"]) == sorted(targets)
    for budget in _check_budget(out, work, variants):
        assert budget.split("): ", 1)[1].startswith("epochs 1, ")
    assert all(_config(work / v)["iters_per_epoch"] == (2 if v == "bot" else 1)
               for v in variants)


def test_dmgnet_mixB_recipe_on_fake_trees(tmp_path):
    root = tmp_path / "data"
    _targets(root)
    fake_msmt17.build(root)
    fake_cuhk03.build(root)
    write_market_tree(root / "Market-1501-v15.09.15", train_ids=4, test_ids=2, cams=3)
    write_market_tree(root / "DukeMTMC-reID", train_ids=4, test_ids=2, cams=3,
                      duke_names=True, seed=1)
    work = tmp_path / "work"
    out = _run("dmgnet_mixB.sh", work, *FAKE_TRAIN_ARGS, ROOT=str(root), TRIALS="0 3",
               TARGETS="grid", DMG_VARIANTS="dmgnet", TARGET_OPTIONS=FAKE_TARGET_OPTIONS,
               **FAKE_BUDGET)
    _check_mixed(out, work, "mixed_b", ["grid"], ["0", "3"], ["dmgnet"])
    assert "2 stores" in _row(out, "DMG-Net")                    # trials 0 and 3
    assert "not checked (methods not run): DMG-Net > BoT" in out
    from reidcli.store.reader import open_store
    with open_store(work / "dmgnet_grid_t3.h5") as st:           # trial 3's own test ids
        q_pids = set(st.records["pid"][st.records["split"] == "query"])
    test_ids = set(range(1, 7)) - set(fake_grid.partitions(6, 3)[3].tolist())
    assert q_pids == test_ids
    notice = shrunk_notice(out)
    assert "TRIALS=0 3" in notice and "TARGETS=grid" in notice


@pytest.mark.slow
def test_dmgnet_mixA_recipe_on_fake_trees(tmp_path):
    root = tmp_path / "data"
    _targets(root)
    fake_cuhk02.build(root)
    fake_cuhk03.build(root)
    fake_cuhk_sysu.build(root)
    write_market_tree(root / "Market-1501-v15.09.15", train_ids=4, test_ids=2, cams=3)
    write_market_tree(root / "DukeMTMC-reID", train_ids=4, test_ids=2, cams=3,
                      duke_names=True, seed=1)
    work = tmp_path / "work"
    targets = ["prid2011", "grid", "viper", "ilids"]
    out = _run("dmgnet_mixA.sh", work, *FAKE_TRAIN_ARGS, ROOT=str(root), TRIALS="0 1",
               TARGET_OPTIONS=FAKE_TARGET_OPTIONS, **FAKE_BUDGET)
    _check_mixed(out, work, "mixed_a", targets, ["0", "1"], ["dmgnet", "bot"])
    verdicts = claim_verdicts(out, [(c,) for c in CLAIM])        # printed once per target
    assert set(verdicts.values()) <= {"PASS", "FAIL"}
    assert sum(line.startswith(("PASS  DMG-Net > BoT", "FAIL  DMG-Net > BoT"))
               for line in out.splitlines()) == 2 * len(targets)
    with open(work / "dmgnet" / "train_records.csv") as f:       # every source trained
        assert {r["dataset"] for r in csv.DictReader(f)} == {
            "cuhk02", "cuhk03", "market1501", "dukemtmc", "cuhksysu"}


#: a Person30K copy in the manifest contract (docs/datasets.md) big enough for one batch of 2
#: ids: 4 train ids × 2 sites × 2 cameras; each test subset 3 ids × 2 cameras × 2 images
def _person30k(root: Path) -> Path:
    folder = root / "person30k"
    lines = ["path,pid,camid,site,scenario,subset"]
    rows = [("train", f"s{pid % 2}", "supermarket", pid, cam, k)
            for pid in range(1, 5) for cam in (0, 1) for k in range(2)]
    for subset, base, site, scenario in (("test_a", 10, "s0", "supermarket"),
                                         ("test_b", 20, "s7", "supermarket"),
                                         ("test_c", 30, "m1", "mall")):
        rows += [(subset, site, scenario, pid, cam, k)
                 for pid in range(base, base + 3) for cam in (0, 1) for k in range(2)]
    for subset, site, scenario, pid, cam, k in rows:
        rel = f"images/{subset}/{pid:05d}_c{cam}_{k}.jpg"
        write_image(folder / rel, color=(37 * pid + 11 * cam) % 256)
        lines.append(f"{rel},{pid},{cam},{site},{scenario},{subset}")
    (folder / "manifest.csv").write_text("\n".join(lines) + "\n")
    return folder


@pytest.mark.parametrize("variants,subsets", [
    ("metadisc", "C"),
    pytest.param("dmgnet bot metagen metadisc", "A B C", marks=pytest.mark.slow)])
def test_dmgnet_person30k_recipe_on_a_fake_manifest(tmp_path, variants, subsets):
    _person30k(tmp_path / "data")
    work = tmp_path / "work"
    out = _run("dmgnet_person30k.sh", work, *FAKE_TRAIN_ARGS, ROOT=str(tmp_path / "data"),
               DMG_VARIANTS=variants, SUBSETS=subsets, **FAKE_BUDGET)
    paper = {"A": "71.01", "B": "62.49", "C": "62.47"}           # Table 6, Meta-discrimination
    for subset in subsets.split():
        assert f"Person30K Test-{subset}" in out and paper[subset] in out
        for variant in variants.split():
            report = json.loads((work / f"{variant}_{subset}.json").read_text())
            assert 0 <= report["mAP"] <= 1
    assert out.count(" ".join(PROTOCOL_ASSUMED.split())[:50]) == len(subsets.split())
    cfg = _config(work / variants.split()[0])
    assert cfg["sources"] == ["person30k"] and cfg["color_jitter"] is False
    from reidcli.store.reader import open_store
    with open_store(work / f"{variants.split()[0]}_{subsets.split()[-1]}.h5") as st:
        tested = st.records[st.records["split"].isin(["query", "gallery"])]
        assert set(tested["x_subset"]) == {f"test_{subsets.split()[-1].lower()}"}
    _check_budget(out, work, variants.split())
    assert "SUBSETS=" in shrunk_notice(out)
    if "bot" in variants:
        claim_verdicts(out, [(c,) for c in CLAIM] + [
            ("Meta-discrimination > Meta-generalization (Test-A: L_MD helps most) (mAP)",),
            ("DMG-Net > Meta-discrimination (mAP)",)])


@pytest.mark.parametrize("script", ["dmgnet_mixA.sh", "dmgnet_mixB.sh", "dmgnet_person30k.sh"])
def test_real_recipes_need_their_data_root(tmp_path, script):
    env = recipe_env()
    env.pop("ROOT", None)
    proc = subprocess.run(["bash", str(RECIPES / script), str(tmp_path)], capture_output=True,
                          text=True, env=env, timeout=120)
    assert proc.returncode != 0 and "ROOT" in proc.stderr


def test_unknown_variant_is_refused(tmp_path):
    proc = subprocess.run(["bash", str(RECIPES / "dmgnet_synthetic.sh"), str(tmp_path)],
                          capture_output=True, text=True, timeout=300,
                          env=recipe_env(DMG_VARIANTS="bogus", DMG_TRAIN_IDS="4",
                                         DMG_TEST_IDS="4", **ONE_THREAD))
    assert proc.returncode != 0 and "unknown DMG-Net variant 'bogus'" in proc.stderr


def test_variant_labels_and_bot_options():
    """The chain's names (bash only, no reid): the paired-batch control is not labelled BoT;
    BoT's row trains at DMG-Net's tiny sizes (--preset tiny → dmgnet_tiny)."""
    script = (f"source {RECIPES / '_dmgnet_chain.sh'}; for v in bot paired dmgnet metagen "
              "metadisc; do dmgnet_label $v; dmgnet_variant_flags $v; done; "
              "dmgnet_bot_options --preset tiny --device cpu --ids-per-batch 2")
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[:10] == ["BoT", "", PAIRED_CONTROL, "--no-meta --md-weight 0", "DMG-Net", "",
                          "Meta-generalization", "--md-weight 0", "Meta-discrimination",
                          "--no-meta"]
    assert lines[10:] == ["--preset", "dmgnet_tiny", "--device", "cpu", "--ids-per-batch", "2"]
