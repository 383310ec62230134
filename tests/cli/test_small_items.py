"""Issue 33 (8): small CLI costs and inconsistencies — `reid adapt norm` imports no torch,
`eval --json -` writes JSON to stdout, `reid data list` is one line per dataset, `reid
methods` shows what each method is."""
from __future__ import annotations

import json

from tests.faults.helpers import reid_in_process


def test_adapt_norm_imports_no_torch(biased_stores, tmp_path):
    # case: `reid adapt norm` took 5–9 s and 722 MB for a z-score (torch import)
    probe = ("import sys; from reidcli.cli.main import main\n"
             "try: code = main(sys.argv[1:])\nexcept SystemExit as e: code = e.code\n"
             "print('torch' in sys.modules, code)")
    import subprocess
    import sys
    done = subprocess.run([sys.executable, "-c", probe, "adapt", "norm", "--store",
                           str(biased_stores[0]), "--out", str(tmp_path / "n.h5")],
                          capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["False", "0"], done.stderr
    assert (tmp_path / "n.h5").exists()


def test_eval_json_dash_is_stdout(biased_stores, tmp_path, monkeypatch, capsys):
    # case: `eval --json -` wrote a file named `-`
    monkeypatch.chdir(tmp_path)
    code, out, err = reid_in_process("eval", "--store", biased_stores[0], "--json", "-",
                                     capsys=capsys)
    assert code == 0, err
    assert 0 <= json.loads(out)["mAP"] <= 1            # stdout is the JSON alone
    assert "rank-1" in err                              # the table went to stderr
    assert not (tmp_path / "-").exists()


def test_data_list_is_one_line_per_dataset(capsys):
    # case: `reid data list` printed 245 lines at 80 columns
    from reidcli.data.registry import available
    code, out, err = reid_in_process("data", "list", capsys=capsys)
    assert code == 0, err
    lines = out.strip().splitlines()
    assert len(lines) == len(available()) + 2              # header, datasets, pointer
    assert [l.split()[0] for l in lines[1:-1]] == list(available())


def test_methods_show_what_each_method_is(capsys):
    # case: `linear-projection` had no paper; dart3-lite listed bn_mode='batch' (no network)
    code, out, err = reid_in_process("methods", "--json", capsys=capsys)
    assert code == 0, err
    by_name = {m["name"]: m for m in json.loads(out)}
    assert by_name["linear-projection"]["paper"].startswith("none")
    assert "bn_mode" not in by_name["dart3-lite"]["parameters"]
    assert by_name["dart3"]["parameters"]["bn_mode"] == "batch"
