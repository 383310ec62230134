"""`reid data synth | check | list | info` on the synthetic dataset and a missing copy."""
from __future__ import annotations

import pandas as pd

from tests.cli.helpers import run_cli


def test_synth_then_check(capsys, tmp_path):
    code, out, err = run_cli(capsys, "data", "synth", "--preset", "tiny", "--out", tmp_path,
                             "--name", "t", "--option", "num_cameras=3", "--seed", "4")
    assert code == 0, err
    images = pd.read_csv(tmp_path / "synthetic" / "t" / "images.csv")
    assert f"{len(images)} images" in out
    assert images["camid"].max() == 2          # the --param override reached the generator
    code, out, err = run_cli(capsys, "data", "check", "synthetic", "--root", tmp_path,
                             "--option", "name=t")
    assert code == 0, err
    n_query = int((images["split"] == "query").sum())
    cells = [[c.strip() for c in line.split("│")[1:-1]] for line in out.splitlines()
             if line.count("│") >= 5]
    assert ["query", str(n_query)] in [row[:2] for row in cells]


def test_synth_bad_param_is_usage_error(capsys, tmp_path):
    code, _, err = run_cli(capsys, "data", "synth", "--preset", "tiny", "--out", tmp_path,
                           "--option", "num_cameras=12")
    assert code == 2 and err.startswith("error: ") and "num_cameras" in err
    code, _, err = run_cli(capsys, "data", "synth", "--preset", "tiny", "--out", tmp_path,
                           "--option", "oops")
    assert code == 2 and "key=value" in err


def test_check_missing_copy_exits_1_with_path(capsys, tmp_path):
    code, _, err = run_cli(capsys, "data", "check", "market", "--root", tmp_path)
    assert code == 1
    assert err.startswith("error: no market1501 dataset under ") and str(tmp_path) in err


def test_list_and_info(capsys):
    code, out, _ = run_cli(capsys, "data", "list")
    assert code == 0 and "market1501" in out and "synthetic" in out
    code, out, _ = run_cli(capsys, "data", "info", "duke")
    assert code == 0 and "withdrawn" in out.lower()
    code, _, err = run_cli(capsys, "data", "info", "nosuch")
    assert code == 2 and "unknown dataset" in err
