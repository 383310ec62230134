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
