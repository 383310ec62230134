"""reidcli.paper: the transcribed tables and the comparison printer."""
from __future__ import annotations

import json

from rich.console import Console

from reidcli.paper.compare import compare, main, paper_table


def _report(path, rank1, pur=0.5):
    cmc = [min(1.0, rank1 + 0.02 * r) for r in range(50)]
    path.write_text(json.dumps({"cmc": cmc, "std": {"cmc": [0.01] * 50}, "pur": pur,
                                "num_trials": 10}))
    return path


def test_table_one_transcription():
    rows = {r["method"]: r for r in paper_table("cdpcf_table1")}
    assert rows["C-DPCF"]["viper"] == "76.3" and rows["DPCF"]["cuhk01"] == "88.1"
    assert rows["DN+C-DPCF"]["grid"] == "42.3" and rows["DN"]["cuhk01"] == ""
    times = {r["method"]: float(r["seconds"]) for r in paper_table("cdpcf_table2")}
    assert times["C-DPCF (w/o R)"] == 1684.4


def test_compare_prints_ours_beside_paper_and_claims(tmp_path):
    console = Console(record=True, width=160)
    results = [("C-DPCF", _report(tmp_path / "c.json", 0.5)),
               ("DPCF", _report(tmp_path / "d.json", 0.4)),
               ("AvgP+XQDA", _report(tmp_path / "a.json", 0.45))]
    verdicts = dict(compare("cdpcf", "viper", results, console))
    text = console.export_text()
    assert "76.3" in text and "50.0 ± 1.0" in text and "n/a (figure only)" in text
    assert verdicts["C-DPCF ≥ DPCF"] is True
    assert verdicts["DPCF > AvgP+XQDA"] is False
    assert verdicts["AvgP+XQDA > PCB (source)"] is None
    assert main(["cdpcf", "--dataset", "viper", "C-DPCF"]) == 2


def test_warca_tables_and_comparison(tmp_path):
    from reidcli.paper.compare import compare_warca
    rows = paper_table("warca_table2")
    viper = {(r["method"], r["metric"]): r for r in rows if r["dataset"] == "VIPeR"}
    assert viper[("WARCA-χ²", "rank1")]["mean"] == "37.47"
    assert viper[("KISSME", "auc")]["std"] == "1.20"
    assert len(rows) == 249                       # 9 datasets × 10 methods × 3 − Market's 21
    t3 = {(r["dataset"], r["method"]): r for r in paper_table("warca_table3")}
    assert t3[("CUHK01", "WARCA")]["r20"] == "95.04"
    console = Console(record=True, width=200)
    path = _report(tmp_path / "w.json", 0.4)
    compare_warca("viper", [("WARCA-χ²", path)], console=console)
    text = console.export_text()
    assert "37.47 ± 1.70" in text and "40.0 ± 1.0" in text and "AUC" in text


def test_dart3_tables_and_claims(tmp_path):
    from reidcli.paper.compare import compare_dart3

    rows = {(r["backbone"], r["method"], r["dataset"]): r for r in paper_table("dart3_table1")}
    assert rows[("CLIP-ReID", "DART3 LITE", "msmt17_5cam")]["mAP"] == "45.9"
    assert rows[("TransReID", "Upper Bound", "market_5cam")]["R1"] == "95.2"
    table2 = {(r["backbone"], r["method"], r["dataset"]): r for r in paper_table("dart3_table2")}
    assert table2[("TransReID", "TENT", "duke_to_msmt17")]["mAP"] == "10.7"

    def report(name, m_ap, r1):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps({"mAP": m_ap, "cmc": [r1] * 50, "std": {}, "num_trials": 1}))
        return path

    console = Console(record=True, width=160)
    results = [("No-adapt", report("n", 0.40, 0.50)), ("Norm", report("m", 0.45, 0.55)),
               ("DART3 LITE", report("l", 0.44, 0.56))]
    verdicts = dict(compare_dart3("msmt17_5cam", results, "1", console))
    text = console.export_text()
    assert "45.0" in text and "42.1 / 50.0" in text                  # ours; CLIP No-adapt
    assert verdicts["Norm ≥ No-adapt"] is True and verdicts["DART3 LITE ≥ Norm"] is False
    assert verdicts["DART3 > No-adapt"] is None                       # not run
    assert main(["dart3", "--table", "3", "--dataset", "x", f"Norm={tmp_path / 'm.json'}"]) == 2


def _vi_report(path, rank1, m_ap, *, stores=0, std=0.02, num_trials=1):
    """A ``reid eval --json`` report of a visible-infrared run (across ``stores`` stores when
    given); rank-k = rank-1 + 0.01·(k−1)."""
    report = {"protocol": "regdb", "cmc": [min(1.0, rank1 + 0.01 * k) for k in range(30)],
              "mAP": m_ap, "mINP": m_ap / 2, "num_trials": num_trials,
              "std": {"cmc": [std] * 30, "mAP": std, "mINP": std / 2}}
    if stores:
        report["stores"] = [f"trial_{k}.h5" for k in range(stores)]
    path.write_text(json.dumps(report))
    return path


def test_dgvae_tables_transcription():
    t1 = {r["method"]: r for r in paper_table("dgvae_table1")}
    assert len(t1) == 14
    assert (t1["DG-VAE"]["regdb_r1"], t1["DG-VAE"]["sysu_r10"], t1["DG-VAE"]["sysu_map"]) == \
        ("72.97", "93.77", "58.46")
    assert t1["D2RL"]["regdb_r1"] == "43.4" and t1["JSIA"]["regdb_r10"] == ""
    assert t1["cmGAN"]["regdb_map"] == "" and t1["cmGAN"]["sysu_r1"] == "26.97"
    assert t1["DFE"]["sysu_map"] == "48.59" and t1["MAC"]["sysu_map"] == "44.95"
    t2 = paper_table("dgvae_table2")
    from reidcli.paper.dgvae_compare import VARIANTS
    assert tuple(r["variant"] for r in t2) == VARIANTS              # row order of Table 2
    rows = {r["variant"]: r for r in t2}
    assert rows["baseline"]["sysu_r1"] == "44.45" and rows["vae2_tsr"]["regdb_map"] == "69.75"
    assert rows["dgvae_nolmc"]["row"] == "11" and rows["ae_tsr_idc_cyc"]["sysu_r1"] == "49.01"
    # Table 2's last row is Table 1's DG-VAE row
    assert [rows["dgvae"][k] for k in ("sysu_r1", "sysu_map", "regdb_r1", "regdb_map")] == \
        [t1["DG-VAE"][k] for k in ("sysu_r1", "sysu_map", "regdb_r1", "regdb_map")]
    # the paper's stated gaps (§4.3–4.4) follow from the transcribed cells
    assert round(float(t1["DG-VAE"]["sysu_r1"]) - float(t1["DFE"]["sysu_r1"]), 2) == 10.78
    assert round(float(t1["DG-VAE"]["regdb_map"]) - float(t1["AlignGAN"]["regdb_map"]), 2) == \
        18.38
    assert round(float(rows["dgvae"]["sysu_map"]) - float(rows["mog_lmc"]["sysu_map"]), 2) == \
        13.05
    t3 = paper_table("dgvae_table3")
    assert [(r["strategy"], r["discriminator"], r["params_m"]) for r in t3][3] == \
        ("Original Images", "yes", "47.10")


def test_dgvae_claims_hold_on_the_papers_own_numbers():
    """Every ordering claim holds on the paper's Table 2, both datasets, both metrics."""
    from reidcli.paper.dgvae_compare import DGVAE_CLAIMS, check_dgvae_claims

    rows = {r["variant"]: r for r in paper_table("dgvae_table2")}
    for dataset in ("sysu", "regdb"):
        ours = {v: {"r1": float(r[f"{dataset}_r1"]), "map": float(r[f"{dataset}_map"])}
                for v, r in rows.items()}
        verdicts = check_dgvae_claims(ours, Console(record=True))
        assert len(verdicts) == 2 * len(DGVAE_CLAIMS)
        assert all(ok is True for _, ok in verdicts), verdicts


def test_dgvae_compare_prints_ours_beside_the_paper(tmp_path):
    from reidcli.paper.dgvae_compare import compare_dgvae

    console = Console(record=True, width=200)
    results = [("DG-VAE", _vi_report(tmp_path / "d.json", 0.70, 0.68, stores=10)),
               ("baseline", _vi_report(tmp_path / "b.json", 0.60, 0.69, stores=10)),
               ("mystery", _vi_report(tmp_path / "m.json", 0.10, 0.10))]
    verdicts = dict(compare_dgvae("regdb", results, "2", console=console))
    text = console.export_text()
    assert "RegDB visible→thermal" in text and "paper Table 2" in text
    assert "70.00 ± 2.00" in text and "79.00 ± 2.00" in text             # R-1; R-10
    assert "34.00 ± 1.00" in text and "10 stores" in text                # mINP
    assert "72.97" in text and "58.74" in text and "59.80" in text       # the paper's cells
    assert "10.00 ±" not in text and "1 trial" in text                   # one run: no std
    assert verdicts["dgvae > baseline (R-1)"] is True
    assert verdicts["dgvae > baseline (mAP)"] is False
    assert verdicts["dgvae > dgvae_nolmc (mAP)"] is None
    assert "not checked (variants not run)" in text
    assert text.count("FAIL  dgvae > baseline (mAP): 68.00 vs 69.00") == 1


def test_dgvae_compare_protocols_and_real_data_labels(tmp_path):
    from reidcli.paper.dgvae_compare import compare_dgvae, paper_rows

    path = _vi_report(tmp_path / "d.json", 0.5, 0.4)
    console = Console(record=True, width=220)
    compare_dgvae("synthetic", [("dgvae", path)], "1", console=console)
    text = console.export_text()
    assert "paper SYSU-MM01 (real data)" in text and "paper RegDB (real data)" in text
    assert "93.77" in text and "86.89" in text                   # Table 1 R-10 of both
    indoor, = paper_rows("dgvae", "sysu", "indoor", "2")         # not in the paper: all "-"
    assert indoor.cells == {} and "not reported" in indoor.source
    allsearch, = paper_rows("DG-VAE", "sysu", "all", "1")
    assert allsearch.cells == {"r1": "59.49", "r10": "93.77", "map": "58.46"}
    unknown, = paper_rows("ours-v2", "regdb", "v2t", "2")
    assert unknown.cells == {} and "no variant" in unknown.source
    assert main(["dgvae", "--dataset", "sysu", "--protocol", "v2t", f"dgvae={path}"]) == 2
    assert main(["dgvae", "--dataset", "market", f"dgvae={path}"]) == 2
    assert main(["dgvae", "--dataset", "regdb", "--table", "3", f"dgvae={path}"]) == 2
    assert main(["cdpcf", "--dataset", "viper", "--protocol", "v2t", f"C-DPCF={path}"]) == 2
    assert main(["dgvae", "--dataset", "regdb", "--protocol", "t2v", f"dgvae={path}"]) == 0


def test_dgvae_budget_lines(tmp_path, capsys):
    from reidcli.paper import dgvae_budget

    def run(name, variant="dgvae", **cfg):
        folder = tmp_path / name
        folder.mkdir()
        config = {"variant": variant, "stage_epochs": [100, 50, 100], "iters_per_epoch": None,
                  "max_iters": None, "preset": None, "p": 4, "k": 4, **cfg}
        (folder / "config.json").write_text(json.dumps({"config": config}))
        (folder / "metrics.csv").write_text("epoch,iteration,phase\n0,5,stage1\n2,9,stage3\n")
        return folder

    paper = run("paper")
    assert dgvae_budget.budget_departures(paper) == []
    short = [run(f"trial_{k}", stage_epochs=[2, 1, 2], iters_per_epoch=3) for k in (0, 1)]
    tiny = run("base", variant="baseline", preset="tiny", k=2)
    lines = dgvae_budget.budget_lines([paper, *short, tiny])
    assert len(lines) == 2
    assert lines[0].startswith("budget override (trial_0, trial_1: dgvae): epochs 2,1,2, "
                               "3 iterations/epoch; 9 iterations in all each (paper: 100,50,100")
    assert lines[1].startswith("budget override (base: baseline): preset tiny, P=4, K=2; 9 ")
    assert dgvae_budget.main([str(paper)]) == 0
    assert capsys.readouterr().out.strip() == dgvae_budget.STAGE1_AMBI_NOTE
    assert dgvae_budget.main([str(tmp_path / "missing")]) == 2


def _dg_report(path, m_ap, rank1, *, stores=10, std=0.02):
    """A ``reid eval --json`` aggregate over ``stores`` stores: mAP, CMC@k = rank1 + 0.01(k−1)."""
    report = {"mAP": m_ap, "cmc": [min(1.0, rank1 + 0.01 * k) for k in range(30)],
              "num_trials": 1, "std": {"mAP": std, "cmc": [std] * 30},
              "stores": [{"store": f"t{k}.h5"} for k in range(stores)]}
    path.write_text(json.dumps(report))
    return path


def test_dmgnet_tables_transcription():
    t5 = {(r["setting"], r["method"], r["target"]): r for r in paper_table("dmgnet_table5")}
    assert t5[("mixed_a", "DMG-Net", "prid2011")]["mAP"] == "68.38"
    assert t5[("mixed_b", "SNR", "ilids")]["R1"] == "87.00"
    assert t5[("mixed_b", "SNR", "ilids")]["bold"] == "yes"
    assert t5[("mixed_b", "DMG-Net", "ilids")]["bold"] == "no"       # SNR is bold there
    assert t5[("mixed_a", "CrossGrad", "grid")]["R1"] == "8.96"
    assert len(t5) == 14 * 4                                           # 11 + 3 rows, 4 targets
    t3 = {(r["source"], r["target"]): r for r in paper_table("dmgnet_table3")}
    assert t3[("dukemtmc", "person30k")]["R1"] == "15.95"
    assert t3[("person30k", "msmt17")]["mAP"] == "32.9" and len(t3) == 12
    t2 = {(r["quantity"], r["set"]): r["value"] for r in paper_table("dmgnet_table2")}
    assert t2[("cameras", "Test-C")] == "1017" and t2[("images", "Train")] == "568977"
    # the paper's own arithmetic: 12,000 + 3 × 6,000 identities = 30,000 (Table 1)
    t1 = {(r["quantity"], r["dataset"]): r for r in paper_table("dmgnet_table1")}
    assert sum(int(t2[("identities", s)]) for s in ("Train", "Test-A", "Test-B", "Test-C")) \
        == int(t1[("identities", "Person30K")]["value"])
    assert t1[("cameras", "Person30K")]["times_msmt17"] == "433"
    assert t1[("scene", "MSMT17")]["value"] == "outdoor, indoor"
    t4 = {(r["method"], r["subset"]): r for r in paper_table("dmgnet_table4")}
    t6 = {(r["method"], r["subset"]): r for r in paper_table("dmgnet_table6")}
    assert t4[("Center Loss", "C")]["R5"] == "96.93" and t4[("AGW", "B")]["R1"] == "82.12"
    for method in ("BoT", "Center Loss", "Circle Loss", "DMG-Net"):  # Table 6 = Table 4's mAP
        for subset in "ABC":
            assert t6[(method, subset)]["mAP"] == t4[(method, subset)]["mAP"]
    assert t6[("BoT", "A")]["paper_label"] == "baseline (Bag-of-Tricks)"
    # §5.2: "beats the DIMN by a remarkable margin of 16.43% mAP on PRID"
    assert round(float(t5[("mixed_a", "DMG-Net", "prid2011")]["mAP"])
                 - float(t5[("mixed_a", "DIMN", "prid2011")]["mAP"]), 2) == 16.43


def test_dmgnet_claims_hold_on_the_papers_own_numbers():
    from reidcli.paper.dmgnet_compare import (MIXED_CLAIMS, PERSON30K_CLAIMS, SUBSET_CLAIMS,
                                              check_dmgnet_claims)

    t5 = paper_table("dmgnet_table5")
    for setting in ("mixed_a", "mixed_b"):
        for target in ("prid2011", "grid", "viper", "ilids"):
            ours = {r["method"]: {"map": float(r["mAP"]), "r1": float(r["R1"])} for r in t5
                    if (r["setting"], r["target"]) == (setting, target)}
            verdicts = check_dmgnet_claims(MIXED_CLAIMS, ours, Console(record=True))
            assert [ok for _, ok in verdicts] == [True, True], (setting, target)
    t4 = {(r["method"], r["subset"]): r for r in paper_table("dmgnet_table4")}
    for subset in "ABC":
        ours = {r["method"]: {"map": float(r["mAP"])} for r in paper_table("dmgnet_table6")
                if r["subset"] == subset}
        for method in ("DMG-Net", "BoT"):
            ours[method]["r1"] = float(t4[(method, subset)]["R1"])
        verdicts = check_dmgnet_claims((*PERSON30K_CLAIMS, SUBSET_CLAIMS[subset]), ours,
                                       Console(record=True))
        assert len(verdicts) == 5 and all(ok is True for _, ok in verdicts), (subset, verdicts)
    # the subset claims are not vacuous: Test-A's ordering is the reverse of Test-B's
    on_b, on_a = (check_dmgnet_claims((SUBSET_CLAIMS["A"],), {
        r["method"]: {"map": float(r["mAP"])} for r in paper_table("dmgnet_table6")
        if r["subset"] == s}, Console(record=True)) for s in "BA")
    assert on_b[0][1] is False and on_a[0][1] is True


def test_dmgnet_compare_table5_prints_ours_beside_the_paper(tmp_path):
    from reidcli.paper.dmgnet_compare import compare_dmgnet

    console = Console(record=True, width=220)
    results = [("DMG-Net", _dg_report(tmp_path / "d.json", 0.70, 0.60)),
               ("BoT", _dg_report(tmp_path / "b.json", 0.65, 0.62)),
               ("mystery", _dg_report(tmp_path / "m.json", 0.10, 0.10, stores=0))]
    verdicts = dict(compare_dmgnet(results, "5", "prid2011", "mixed_b", console=console))
    text = console.export_text()
    assert "Mixed B → PRID" in text and "10 stores" in text and "1 trial" in text
    assert "69.73" in text and "59.70" in text and "59.12" in text    # Mixed B DMG-Net, BoT
    assert "68.38" not in text                                         # not Mixed A's row
    assert "70.00 ± 2.00" in text and "64.00 ± 2.00" in text           # mAP; CMC@5 = .60+.04
    assert "10.00 ±" not in text and "no row 'mystery'" in text
    assert verdicts["DMG-Net > BoT (mAP)"] is True
    assert verdicts["DMG-Net > BoT (CMC@1)"] is False
    assert text.count("FAIL  DMG-Net > BoT (CMC@1): 60.00 vs 62.00") == 1


def test_dmgnet_compare_person30k_tables_and_cli(tmp_path):
    from reidcli.paper.dmgnet_compare import PROTOCOL_ASSUMED, compare_dmgnet, method_of

    assert method_of("baseline") == method_of("bot") == "BoT"
    assert method_of("meta_generalisation") == "Meta-generalization"
    assert method_of("DMG-Net (ours)") == "DMG-Net" and method_of("ours-v2") is None
    d = _dg_report(tmp_path / "d.json", 0.5, 0.6)
    g = _dg_report(tmp_path / "g.json", 0.45, 0.6)
    console = Console(record=True, width=240)
    verdicts = dict(compare_dmgnet([("dmgnet", d), ("Meta-generalization", g)], "6",
                                   subset="c", console=console))
    text = console.export_text()
    assert "Test-C" in text and "protocol assumed" in text and "64.39" in text and "63.97" in text
    assert "86.08" in text and "96.78" in text                       # DMG-Net's Table 4 row
    assert "paper Table 4" in text and "paper Table 6" in text       # Meta-gen.: Table 6 only
    assert verdicts["DMG-Net > Meta-generalization (mAP)"] is True
    assert verdicts["DMG-Net > BoT (mAP)"] is None and "not checked" in text
    console = Console(record=True, width=240)
    compare_dmgnet([("BoT", d)], "4", subset="A", console=console)
    text = console.export_text()
    assert "80.55" in text and "90.32" in text and PROTOCOL_ASSUMED[:40] in text   # BoT A R1, R5
    console = Console(record=True, width=240)
    compare_dmgnet([("A", d), ("B", g)], "3", "person30k", source="dukemtmc", console=console)
    text = console.export_text()
    assert text.count("15.95") == 2 and "does not say which Person30K test subset" in text
    assert main(["dmgnet", "--table", "5", "--setting", "mixed_a", "--dataset", "prid2011",
                 f"DMG-Net={d}"]) == 0
    assert main(["dmgnet", "--table", "5", "--dataset", "prid2011", f"DMG-Net={d}"]) == 2
    assert main(["dmgnet", "--table", "5", "--setting", "mixed_c", "--dataset", "grid",
                 f"DMG-Net={d}"]) == 2
    assert main(["dmgnet", "--table", "4", "--subset", "D", f"DMG-Net={d}"]) == 2
    assert main(["dmgnet", "--table", "3", "--source", "msmt17", "--dataset", "msmt17",
                 f"DMG-Net={d}"]) == 2
    assert main(["dmgnet", "--table", "7", f"DMG-Net={d}"]) == 2
    assert main(["dmgnet", "--dataset", "synthetic", f"DMG-Net={d}", f"BoT={g}"]) == 0


def test_dmgnet_budget_lines(tmp_path):
    from reidcli.paper import dmgnet_budget

    def run(name, *, top=None, **cfg):
        folder = tmp_path / name
        folder.mkdir()
        config = {"epochs": 120, "iters_per_epoch": None, "p": 16, "k": 4,
                  "sources": ["msmt17"], "no_meta": False, "md_weight": 1.0, "meta_order": 2,
                  **cfg}
        (folder / "config.json").write_text(json.dumps({"config": config, **(top or {})}))
        return folder

    paper = run("paper")
    assert dmgnet_budget.budget_departures(paper) == []
    exact = run("exact", top={"num_images": 1280}, iters_per_epoch=1280 // 128)
    assert dmgnet_budget.budget_departures(exact) == []                 # ⌊N/(2PK)⌋ given
    short = [run(f"dmg_{k}", top={"num_images": 1280}, epochs=2, iters_per_epoch=3)
             for k in (0, 1)]
    bot = run("bot", epochs=2, no_meta=True, md_weight=0, p=4, k=2)
    order1 = run("fo", meta_order=1, md_weight=0)
    same = run("same_bot", top={"num_images": 1280}, epochs=2, iters_per_epoch=3,
               no_meta=True, md_weight=0)
    lines = dmgnet_budget.budget_lines([paper, exact, *short, bot, order1, same])
    assert lines[0] == ("budget override (dmg_0: DMG-Net, dmg_1: DMG-Net, "
                        f"same_bot: {dmgnet_budget.PAIRED_CONTROL}): "
                        "epochs 2, 3 iterations/epoch (paper's ⌊N/(2PK)⌋ = 10) "
                        f"({dmgnet_budget.PAPER_BUDGET})")
    assert lines[1].startswith(f"budget override (bot: {dmgnet_budget.PAIRED_CONTROL}): "
                               "epochs 2, P=4, K=2 (paper: 120")
    assert lines[2].startswith("budget override (fo: Meta-generalization): first-order")
    assert len(lines) == 3
    assert dmgnet_budget.variant_name({"no_meta": True}) == "Meta-discrimination"
    assert dmgnet_budget.variant_name({}, "bot") == "BoT"              # reid train bot
    (tmp_path / "odd").mkdir()
    (tmp_path / "odd" / "config.json").write_text("[]")
    assert dmgnet_budget.main([str(tmp_path / "odd")]) == 2
    assert dmgnet_budget.main([str(tmp_path / "missing")]) == 2
    assert dmgnet_budget.main([str(paper)]) == 0
