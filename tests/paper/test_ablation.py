"""reidcli/paper/ablation.py (``reid paper ablation``): the in-process runner gives what the CLI
chain gives (recipes/_dgvae_chain.sh: reid train → reid extract → reid eval), and refuses bad
requests before anything trains."""
from __future__ import annotations

import json

import pytest
import torch

from tests.faults.helpers import assert_one_line_error_in_process, reid_in_process

#: the smallest DG-VAE run: toy trunk from scratch, one iteration per stage, no loader workers
TRAIN = ("--init", "scratch", "--preset", "tiny", "--device", "cpu", "--epochs", "1,1,1",
         "--iters-per-epoch", "1", "--workers", "0")


def _data(root) -> tuple[str, ...]:
    return ("--dataset", "synthetic", "--root", str(root), "--option", "name=vi")


def _numbers(path) -> dict:
    """The report's figures (not its timings or provenance)."""
    report = json.loads(path.read_text())
    stores = [{k: v for k, v in s.items() if k != "seconds"} for s in report.get("stores") or []]
    return {**{k: report.get(k) for k in ("cmc", "mAP", "mINP", "std", "num_trials")},
            "stores": stores}


def _weights(run) -> dict:
    return torch.load(run / "model.pt", map_location="cpu", weights_only=True)["model_state"]


def test_ablation_gives_the_cli_chains_numbers(vi_synthetic_root, tmp_path, capsys,
                                               one_torch_thread):
    data = _data(vi_synthetic_root)
    cli = tmp_path / "cli"
    cli.mkdir()
    for args in (("train", "dgvae", *data, "--variant", "baseline", *TRAIN, "--out",
                  cli / "run", "--quiet"),
                 ("extract", "--model", cli / "run", *data, "--out", cli / "s0.h5",
                  "--device", "cpu"),
                 ("eval", "--store", cli / "s0.h5", "--json", cli / "one.json", "--quiet")):
        code, _, err = reid_in_process(*args, capsys=capsys)
        assert code == 0, err[-2000:]
    out = tmp_path / "abl"
    code, stdout, err = reid_in_process("paper", "ablation", "dgvae", *data, *TRAIN,
                                        "--variants", "baseline", "--seeds", "0", "--out",
                                        out, "--quiet", capsys=capsys)
    assert code == 0, err[-2000:]
    # seed 0: the same config, the same weights as reid train --seed 0 (the default) …
    ours = json.loads((out / "baseline" / "seed0" / "config.json").read_text())["config"]
    theirs = json.loads((cli / "run" / "config.json").read_text())["config"]
    assert ours == theirs
    a, b = _weights(out / "baseline" / "seed0"), _weights(cli / "run")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    # … and the same evaluation as reid extract + reid eval
    assert _numbers(out / "baseline.json") == {**_numbers(cli / "one.json"), "stores": []}
    # several seeds' stores: reid eval's mean ± std over stores (the two stores of seed 0 are
    # refused as one store given twice: the same records, features and protocol)
    from reidcli.evaluation.errors import EvaluationError
    from reidcli.paper.ablation_eval import evaluate_seeds
    with pytest.raises(EvaluationError, match="the same records, features and protocol"):
        evaluate_seeds([out / "baseline" / "seed0.h5", cli / "s0.h5"], tmp_path / "x.json",
                       device="cpu", force=False, command=None)
    code, _, err = reid_in_process("extract", "--model", cli / "run", *data, "--out",
                                   cli / "flip.h5", "--device", "cpu", "--flip",
                                   capsys=capsys)
    assert code == 0, err[-2000:]
    stores = [out / "baseline" / "seed0.h5", cli / "flip.h5"]
    evaluate_seeds(stores, tmp_path / "two.json", device="cpu", force=False, command=None)
    code, _, err = reid_in_process("eval", "--store", stores[0], "--store", stores[1],
                                   "--json", cli / "two.json", "--quiet", capsys=capsys)
    assert code == 0, err[-2000:]
    assert _numbers(tmp_path / "two.json") == _numbers(cli / "two.json")
    assert len(_numbers(cli / "two.json")["stores"]) == 2
    # provenance in every output; the table row and the claims' summary
    assert "paper ablation dgvae" in json.loads((out / "baseline.json").read_text())[
        "provenance"]["command"]
    summary = json.loads((out / "ablation.json").read_text())
    assert summary["seeds"] == [0] and summary["rows"][0]["variant"] == "baseline"
    assert "provenance" in summary and summary["claims"][0]["verdict"] is None
    assert "baseline" in stdout and "ours" in stdout
    # outputs exist: refused without --force, before anything trains
    result = reid_in_process("paper", "ablation", "dgvae", *data, *TRAIN, "--variants",
                             "baseline", "--seeds", "0", "--out", out, capsys=capsys)
    assert_one_line_error_in_process(result, "already holds", "--force")


@pytest.mark.parametrize("args,needles", [
    (("--variants", "bogus"), ("--variants", "bogus", "baseline")),
    (("--seeds", "0,x"), ("--seeds", "'x'", "not an integer")),
    (("--seeds", "1,1"), ("--seeds", "repeats")),
    (("--seeds", "-1"), ("--seeds",)),
    (("--epochs", "1,1"), ("--epochs",)),
])
def test_ablation_refuses_bad_requests(vi_synthetic_root, tmp_path, capsys, args, needles):
    result = reid_in_process("paper", "ablation", "dgvae", *_data(vi_synthetic_root), *TRAIN,
                             "--out", tmp_path / "abl", *args, capsys=capsys)
    assert_one_line_error_in_process(result, *needles)
    assert not (tmp_path / "abl").exists()


@pytest.mark.parametrize("paper,args,needles", [
    ("dgvae", ("--dataset", "market1501"), ("--dataset", "synthetic")),
    ("dgvae", (), ("--dataset", "required")),
    ("dgvae", ("--dataset", "synthetic"), ("--out",)),
    ("dmgnet", ("--sources", "synthetic", "--targets", "synthetic/d1,synthetic/d2"),
     ("--targets", "synthetic/d3")),
    ("dmgnet", ("--sources", "market1501", "--targets", "grid"), ("--sources", "synthetic")),
])
def test_ablation_refuses_other_data(tmp_path, capsys, paper, args, needles):
    out = () if "--out" in needles else ("--out", tmp_path / "abl")
    result = reid_in_process("paper", "ablation", paper, *args, *out, capsys=capsys)
    assert_one_line_error_in_process(result, *needles)


def test_rows_and_bot_budget():
    """The rows of both ablations and the BoT row's one-budget options (DMG-Net's tiny
    sizes, twice the iterations; DMG-Net-only settings left to the DMG-Net rows)."""
    from reidcli.paper.ablation_rows import ablation, bot_options, row_config, select_rows
    from reidcli.paper.dgvae_compare import VARIANTS

    assert [r.name for r in select_rows(ablation("dgvae"), None)] == list(VARIANTS)
    dmg = ablation("dmgnet")
    assert [r.label for r in select_rows(dmg, None)][:4] == [
        "BoT", "Meta-discrimination", "Meta-generalization", "DMG-Net"]
    options, dropped = bot_options({"preset": "tiny", "iters_per_epoch": 3, "epochs": 2,
                                    "md_weight": 0.5, "device": "cpu", "p": None})
    assert options == {"preset": "dmgnet_tiny", "iters_per_epoch": 6, "epochs": 2,
                       "device": "cpu"}
    assert dropped == ["md_weight"]
    given = {"sources": ["synthetic"], "targets": ["synthetic/d3"], "preset": "tiny",
             "iters_per_epoch": 1, "md_weight": 0.5}
    bot, gen, disc = (row_config(dmg, dmg.rows[n], given, 2)
                      for n in ("bot", "metagen", "metadisc"))
    assert (bot.method, bot.preset, bot.iters_per_epoch, bot.seed) == ("bot", "dmgnet_tiny",
                                                                        2, 2)
    assert (gen.params["md_weight"], gen.params["no_meta"]) == (0.0, False)
    assert (disc.params["md_weight"], disc.params["no_meta"]) == (0.5, True)
