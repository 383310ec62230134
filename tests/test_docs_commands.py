"""Every command block of README.md and docs/**/*.md runs as documented (issue 33).

The rule for fenced blocks:

* ```bash, ```sh, ```shell and ```console blocks are commands a user types, and ```python
  blocks code a user runs: each is one case of ``test_documented_block_runs`` (id
  ``file:line``), run in a fresh folder with real small inputs (a tiny synthetic dataset,
  stores, trained runs, generated foreign checkpoints) or skipped with the reason in
  ``CASES``. A block that is neither in ``CASES`` nor skipped there FAILS, so a new block
  cannot go untested.
* Unmarked blocks and ```text blocks are not run: they hold usage grammar
  (``reid eval --store S.h5 [--model FITTED]``), file layouts or printed output. An unmarked
  block that starts like a command fails ``test_command_blocks_are_marked``: mark it ```bash
  (an example to run) or ```text (grammar).

The documents stay what a user types; only this test rewrites a block, through the ``subs``
of its case (`(old, new)` string replacements, each of which must still match), to shrink it:
the tiny synthetic dataset stands in for ``data/synthetic/default``, fewer epochs and smaller
batches for the presets. ``reid`` and ``python`` are this interpreter (``sys.executable -m
reidcli.cli.main``) through shims put first on PATH.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
COMMAND_LANGS = {"bash", "sh", "shell", "console"}
RUN_LANGS = COMMAND_LANGS | {"python"}
LOOKS_LIKE_COMMAND = re.compile(r"^(\$ |reid |python3? |bash |torchrun |pip |source |"
                                r"[A-Z_]+=\S* +(bash|reid|python))")
FENCE = re.compile(r"^```(\S*)\s*$")


@dataclass(frozen=True)
class Block:
    file: str          # relative to the repository root
    line: int          # line of the opening fence
    lang: str
    text: str

    @property
    def key(self) -> str:
        """``file: first line`` — the case table's key (a changed first line needs a new
        entry, so the table cannot silently describe an old block)."""
        first = next((ln for ln in self.text.splitlines() if ln.strip()), "")
        return f"{self.file}: {first.strip()}"


def parse_blocks(path: Path) -> list[Block]:
    """Every fenced block of one Markdown file (fences at the start of a line)."""
    blocks, lang, start, body = [], None, 0, []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        m = FENCE.match(line)
        if m and lang is None:
            lang, start, body = m.group(1), n, []
        elif line.startswith("```") and lang is not None:
            blocks.append(Block(str(path.relative_to(ROOT)), start, lang, "\n".join(body) + "\n"))
            lang = None
        elif lang is not None:
            body.append(line)
    return blocks


ALL_BLOCKS = [b for doc in DOCUMENTS for b in parse_blocks(doc)]
RUN_BLOCKS = [b for b in ALL_BLOCKS if b.lang in RUN_LANGS]


# ---------------------------------------------------------------------------------------------
# Inputs a block can ask for. Each is a bash snippet run in the block's folder before it
# (``reid``/``python`` are the shims), or a Python function of (that folder, pytest's
# ``request``, for the session's fixtures).

EMB_NPZ = ("python -c \"import numpy as np; r = np.random.default_rng(0); n = 600; "
           "pid = np.repeat(np.arange(1, 101), 6); np.savez('emb.npz', features=r.normal("
           "size=(n, 64)).astype('float32') + pid[:, None] % 7, pid=pid, camid=np.tile("
           "np.arange(6), 100), split=np.where(np.arange(n) % 6 == 0, 'query', 'gallery'))\"\n")
TRAIN_SHRINK = "--preset tiny --batch-size 8 --epochs 1"     # 24 training images, 6 ids


def _data(work: Path, request) -> None:
    """``data/synthetic/<name>`` for the names the documents use → the tiny dataset."""
    tiny_root = request.getfixturevalue("tiny_synthetic_root")
    (work / "data" / "synthetic").mkdir(parents=True)
    for name in ("default", "tiny"):
        (work / "data" / "synthetic" / name).symlink_to(tiny_root / "synthetic" / "tiny")


def _foreign_checkpoints(work: Path, request) -> None:
    """A fast-reid BoT R50-ibn and a torchreid OSNet x1.0 state dict (random weights, the
    toolkits' key names: tests/models/test_foreign.py), and two folders of person crops."""
    import shutil

    import torch

    from tests.models.test_foreign import fastreid_state, randomise, shapes, torchreid_state
    tiny_root = request.getfixturevalue("tiny_synthetic_root")
    trunks = {name: randomise(shapes(name), i)
              for i, name in enumerate(("resnet50_ibn_a", "osnet_x1_0"))}
    torch.save(fastreid_state(trunks, ibn=True), work / "fastreid_bot_r50_ibn.pth")
    torch.save(torchreid_state(trunks, trunk="osnet_x1_0", fc=512), work / "osnet_x1_0_market.pth")
    for folder, split, n in (("camera_crops", "bounding_box_test", 6), ("wanted", "query", 2)):
        (work / folder).mkdir()
        images = sorted((tiny_root / "synthetic" / "tiny" / "d0" / split).glob("*"))[:n]
        for i, image in enumerate(images):
            shutil.copy(image, work / folder / f"{folder}_{i}{image.suffix}")


def _store_arrays(work: Path, request) -> None:
    """``s0.npz`` … ``s3.npz``: 30 identities × 6 cameras, 16-d, different seeds; ids 21–30
    train, the others one query and five gallery rows each."""
    import numpy as np

    pid = np.repeat(np.arange(1, 31), 6)
    split = np.where(np.arange(pid.size) % 6 == 0, "query", "gallery")
    split[pid > 20] = "train"
    for seed in range(4):
        r = np.random.default_rng(seed)
        np.savez(work / f"s{seed}.npz", pid=pid, camid=np.tile(np.arange(6), 30), split=split,
                 features=(r.normal(size=(pid.size, 16)) + pid[:, None] % 5).astype("float32"))


def _tiny_bot(work: Path, request) -> None:
    """``runs/bot/model.pt``: the tests' tiny BoT (conftest ``tiny_model_store``)."""
    model, _, _ = request.getfixturevalue("tiny_model_store")
    (work / "runs" / "bot").mkdir(parents=True)
    (work / "runs" / "bot" / "model.pt").symlink_to(model)


SETUPS = {
    "data": _data,
    "emb": EMB_NPZ + "reid store import --out emb.h5 --npz emb.npz --distance cosine\n",
    "pcb_toy": ("reid train pcb --quiet --dataset synthetic --root data "
                f"{TRAIN_SHRINK} --out runs/pcb_toy\n"),
    "foreign": _foreign_checkpoints,
    "tiny_bot": _tiny_bot,
    # its embeddings of the tiny synthetic dataset (2 cameras), as a DART3 block reads them
    "feats": "reid extract --model runs/bot --dataset synthetic --root data --out feats.h5\n",
    # conv maps of the tiny PCB (needs "pcb_toy"), then what the figures are drawn from
    "maps": ("reid extract --model runs/pcb_toy --dataset synthetic --root data "
             "--maps conv2_x,conv3_x,conv4_x,conv5_x --out maps.h5\n"),
    "figure_inputs": ("reid fit-pooling cdpcf --store maps.h5 --out cdpcf.h5\n"
                      "reid fit-pooling avgp --store maps.h5 --out avgp.h5 --metric none\n"
                      "reid eval --store maps.h5 --model cdpcf.h5 --json cdpcf.json\n"
                      "reid eval --store maps.h5 --model avgp.h5 --json avgp.json\n"
                      "reid train xqda --store maps.h5 --out xqda.h5\n"
                      "reid adapt norm --store maps.h5 --out adapted.h5\n"),
    # four different stores of one protocol (two "RegDB trials", a.h5, b.h5) and an XQDA
    "stores_npz": _store_arrays,
    "stores": ("mkdir -p runs/regdb_t1 runs/regdb_t2\n"
               "reid store import --out runs/regdb_t1/store.h5 --npz s0.npz\n"
               "reid store import --out runs/regdb_t2/store.h5 --npz s1.npz\n"
               "reid store import --out a.h5 --npz s2.npz\n"
               "reid store import --out b.h5 --npz s3.npz\n"
               "reid train xqda --store a.h5 --out xqda.h5\n"),
    "adapted": "reid adapt norm --store a.h5 --out adapted.h5\n",
}


@dataclass(frozen=True)
class Case:
    skip: str = ""                       # why the block is not run here
    slow: str = ""                       # why it runs only under ``pytest -m slow``
    setup: tuple[str, ...] = ()          # SETUPS prepared first, in order
    subs: tuple[tuple[str, str], ...] = ()
    outputs: tuple[str, ...] = ()        # files the block must have written


REAL = "needs the real {} (reidcli never downloads a dataset)"
INSTALLS = "installs packages: run by .ci/run / recipes/quickstart.sh itself"
SHRINK_DATA = ("--root /data", "--root data")

CASES: dict[str, Case] = {
    # --- README.md -------------------------------------------------------------------------
    "README.md: bash recipes/quickstart.sh     # install, then run the demo on synthetic "
    "data": Case(skip=INSTALLS),
    "README.md: source .venv/bin/activate": Case(
        setup=("data",), subs=(("source .venv/bin/activate", "true  # the shims stand for the activated environment"),),
        outputs=("tour.h5", "xqda.h5", "xqda.json", "cmc.png")),
    "README.md: reid train bot --dataset synthetic --root data --preset tiny --out runs/toy":
        Case(setup=("data",), subs=(("--preset tiny", TRAIN_SHRINK),),
             outputs=("runs/toy/model.pt", "bot.h5")),
    f"README.md: {EMB_NPZ.strip()}": Case(outputs=("emb.h5", "results.json", "cmc.csv")),
    "README.md: reid eval --store emb.h5 --protocol market --rerank            # k-reciprocal "
    "re-ranking": Case(setup=("emb",), outputs=("top5.csv",)),
    "README.md: reid train pcb --dataset synthetic --root data --preset tiny --out runs/pcb_toy"
    "    # CPU, about 20 s": Case(
        setup=("data",),
        subs=(("--preset tiny --out runs/pcb_toy", f"{TRAIN_SHRINK} --out runs/pcb_toy"),
              ("--dataset market1501 --root /data --init imagenet --out runs/pcb",
               f"--dataset synthetic --root data {TRAIN_SHRINK} --init scratch --out runs/pcb"),
              ("--dataset market1501 --root /data", "--dataset synthetic --root data")),
        outputs=("runs/pcb_toy/model.pt", "runs/pcb/model.pt", "market.h5")),
    "README.md: reid extract --model fastreid_bot_r50_ibn.pth --images /data/Market-1501 "
    "--pattern market --out market.h5": Case(
        slow="runs a ResNet-50-ibn and an OSNet x1.0 on the CPU (about 30 s)",
        setup=("data", "foreign", "pcb_toy"),
        subs=(("/data/Market-1501", "data/synthetic/tiny/d0"),
              ("/data/camera_crops", "camera_crops"), ("/data/wanted", "wanted")),
        outputs=("market.h5", "crops.h5", "top10.csv", "pcb.onnx", "pcb.onnx.json")),
    "docs/cli.md: reid data synth --out data --preset vi": Case(
        skip="reid paper ablation at full size trains 12 variants × 3 seeds: run shrunk by "
             "tests/recipes/test_dgvae_recipes.py (recipes/dgvae_synthetic.sh) and "
             "tests/paper/test_ablation.py"),
    "README.md: bash recipes/warca_synthetic.sh": Case(
        skip="a recipe: run shrunk by tests/recipes/test_warca_recipes.py, full size under "
             "`pytest -m slow`"),
    "README.md: import numpy as np": Case(),
    "README.md: reid data list": Case(subs=(("--preset dart3", "--preset tiny"),
                                            ("name=dart3", "name=tiny")),
                                      outputs=("data/synthetic/tiny/meta.json",)),
    # --- docs/ -------------------------------------------------------------------------------
    "docs/cli.md: reid eval --store 'runs/regdb_t*/store.h5' --json regdb.json --csv "
    "regdb.csv": Case(setup=("stores_npz", "stores"), outputs=("regdb.json", "regdb.csv")),
    "docs/evaluation.md: reid eval --store emb.h5                         # protocol picked "
    "from the store (auto)": Case(
        setup=("stores_npz", "stores", "adapted"),
        subs=(("emb.h5", "a.h5"), ("fitted.h5", "xqda.h5"),
              ("--train-cams 0,1,2,3,4", "--train-cams 1,2,3,4,5")),   # a.h5's queries: camera 0
        outputs=("results.json", "cmc.csv", "regdb.json")),
    "docs/figures.md: reid plot cmc cdpcf.json avgp.json --out cmc.png            # legend "
    "\"method — R1 …, mAP …\", ±std band": Case(
        slow="trains a tiny PCB, fits C-DPCF and draws six figures (about 25 s)",
        setup=("data", "pcb_toy", "maps", "figure_inputs"),
        subs=(("store.h5", "maps.h5"), ("--images-root /data", "--images-root data"),
              ("runs/pcb ", "runs/pcb_toy ")),
        outputs=("cmc.png", "tsne.png", "maps.pdf", "ranks.png", "curves.svg", "dist.png")),
    "docs/formats.md: torchrun --nproc_per_node 4 -m reidcli.cli.main extract --model "
    "runs/pcb --dataset market1501 --out m.h5": Case(
        skip="torchrun with 4 GPUs and two nodes on the real Market-1501/MSMT17; a two-rank "
             "CPU torchrun extraction is a slow test of tests/features/"),
    "docs/methods.md: # mypkg/whiten.py — ZCA whitening of the training rows, evaluated by "
    "Euclidean distance": Case(),
    "docs/papers.md: reid fit-pooling cdpcf --store maps.h5 --out cdpcf.h5          # K=10 "
    "maps, E=64, 6 stripes": Case(
        slow="trains a tiny PCB and fits C-DPCF, DPCF and AvgP on its conv maps (about 15 s)",
        setup=("data", "pcb_toy", "maps"),
        subs=(("--train-ids 30", "--train-ids 4"), ("--store emb.h5", "--store maps.h5")),
        outputs=("cdpcf.h5", "dpcf.h5", "avgp.h5", "few.h5", "cdpcf.json", "xqda.h5")),
    "docs/papers.md: reid extract --dataset viper --option protocol=warca --features hist-lbp "
    "--out viper.h5": Case(skip=REAL.format("VIPeR")),
    "docs/papers.md: reid train dgvae --dataset sysu_mm01 --root /data --init r50.pth --out "
    "runs/dgvae  # paper schedule": Case(
        skip=REAL.format("SYSU-MM01 and RegDB") + " and a GPU; the synthetic line runs in "
             "recipes/dgvae_synthetic.sh (tests/recipes/test_dgvae_recipes.py)"),
    "docs/papers.md: reid train dmgnet --sources mixed_b --root /data --init r50.pth "
    "--color-jitter on \\": Case(
        skip=REAL.format("Mixed B sources") + " and a GPU; the synthetic line runs in "
             "recipes/dmgnet_synthetic.sh (tests/recipes/test_dmgnet_recipes.py)"),
    "docs/papers.md: reid adapt dart3-lite --store feats.h5 --out lite.h5          # black "
    "box: stored embeddings only": Case(
        slow="an extraction and seven adaptations, each a process importing torch (about 25 s)",
        setup=("data", "tiny_bot", "feats"),
        subs=(("--query-cams 0,6", "--query-cams 0,1"), ("--train-cams 0,1,2,3,4", "--train-cams 0")),
        outputs=("lite.h5", "full.h5", "norm.h5", "tent.h5", "temp.h5", "a.h5")),
    "docs/performance.md: TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu bash "
    "recipes/quickstart.sh": Case(skip=INSTALLS),
    "docs/training.md: reid data synth --preset default --out data                          "
    "             # → data/synthetic/default/": Case(
        slow="trains a PCB and a BoT (about 20 s shrunk)",
        subs=(("--preset default --out data", "--preset tiny --out data && "
               "ln -s tiny data/synthetic/default"), ("--preset tiny --out runs", f"{TRAIN_SHRINK} --out runs")),
        outputs=("runs/pcb_toy/model.pt", "runs/bot_toy/model.pt", "pcb_toy.h5", "curves.svg")),
    "docs/training.md: reid train pcb --dataset market1501 --root /data --init imagenet --out "
    "runs/pcb   # pcb.md §2": Case(
        skip=REAL.format("Market-1501, MSMT17 and VIPeR") + ", a GPU and torchrun with 4 "
             "GPUs; its synthetic form is the block above"),
    "docs/methods/bot.md: reid train bot --dataset msmt17 --root /data --init imagenet --out "
    "runs/bot": Case(skip=REAL.format("MSMT17 and Market-1501") + " and a GPU"),
    "docs/methods/bow.md: reid extract --dataset market1501 --features bow --out "
    "market_bow.h5": Case(skip=REAL.format("Market-1501") + " and the w2c.mat colour names"),
    "docs/methods/cdpcf.md: reid extract --model runs/pcb_msmt17 --dataset viper --maps "
    "conv2_x,conv3_x,conv4_x,conv5_x \\": Case(skip=REAL.format("VIPeR") + " and a PCB "
                                                "trained on MSMT17"),
    "docs/methods/cdpcf.md: reid data synth --preset default --out data": Case(
        slow="ten reid processes: two extractions, four fits, four evaluations",
        setup=("data",),
        subs=(("reid data synth --preset default --out data",
               "true  # the tiny synthetic dataset stands in (setup)"),),
        outputs=("all_cdpcf.json", "all_dpcf.json", "d0_cdpcf.json", "d0_dpcf.json")),
    "docs/methods/pcb.md: reid train pcb --dataset market1501 --root /data --init imagenet "
    "--out runs/pcb [--rpp]": Case(skip=REAL.format("Market-1501") + " and a GPU"),
}


def _shims(folder: Path) -> dict[str, str]:
    """``reid``, ``python``, ``python3`` → this interpreter; the environment for a block."""
    folder.mkdir()
    for name, line in (("reid", f'exec "{sys.executable}" -m reidcli.cli.main "$@"'),
                       ("python", f'exec "{sys.executable}" "$@"'),
                       ("python3", f'exec "{sys.executable}" "$@"')):
        (folder / name).write_text(f"#!/bin/sh\n{line}\n")
        (folder / name).chmod(0o755)
    env = dict(os.environ, PATH=f"{folder}{os.pathsep}{os.environ.get('PATH', '')}",
               MPLBACKEND="Agg", PYTHONPATH=str(ROOT), COLUMNS="200")
    env.pop("REIDCLI_DATA", None)
    return env


def _bash(script: str, work: Path, env: dict, what: str) -> None:
    proc = subprocess.run(["bash", "-c", "set -euo pipefail\n" + script], cwd=work, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, (f"{what} failed (exit {proc.returncode}):\n{script}\n"
                                  f"--- stdout\n{proc.stdout[-3000:]}\n--- stderr\n"
                                  f"{proc.stderr[-3000:]}")


def _case_params():
    for block in RUN_BLOCKS:
        case = CASES.get(block.key)
        marks = []
        if case is not None and case.slow:
            marks.append(pytest.mark.slow)
        yield pytest.param(block, id=f"{block.file}:{block.line}", marks=marks)


@pytest.mark.parametrize("block", list(_case_params()))
def test_documented_block_runs(block, tmp_path, request):
    case = CASES.get(block.key)
    assert case is not None, (
        f"{block.file}:{block.line}: no entry in tests/test_docs_commands.py CASES for the "
        f"block starting {block.key!r}: add how to run it (or why it is skipped)")
    if case.skip:
        pytest.skip(case.skip)
    work = tmp_path / "work"
    work.mkdir()
    env = _shims(tmp_path / "bin")
    for name in case.setup:
        step = SETUPS[name]
        if callable(step):
            step(work, request)
        else:
            _bash(step, work, env, f"setup {name!r}")
    text = block.text
    for old, new in case.subs:
        assert old in text, f"{block.file}:{block.line}: substitution {old!r} no longer matches"
        text = text.replace(old, new)
    if block.lang == "python":
        script = work / "block.py"
        script.write_text(text)
        _bash(f'python "{script}"', work, env, f"{block.file}:{block.line}")
    else:
        _bash(text, work, env, f"{block.file}:{block.line}")
    missing = [out for out in case.outputs if not (work / out).exists()]
    assert not missing, f"{block.file}:{block.line} did not write {missing}"


def test_every_case_names_a_block():
    """No stale entry: every key of CASES is the first line of a documented block."""
    keys = {b.key for b in RUN_BLOCKS}
    assert len(keys) == len(RUN_BLOCKS), "two blocks of one file start with the same line"
    assert sorted(set(CASES) - keys) == []


def test_command_blocks_are_marked():
    """An unmarked block that starts like a command must say what it is (```bash / ```text)."""
    unmarked = [f"{b.file}:{b.line}" for b in ALL_BLOCKS
                if not b.lang and LOOKS_LIKE_COMMAND.match(b.text.lstrip())]
    assert unmarked == []
