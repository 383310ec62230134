"""`reid plot KIND` writes each figure and answers bad input with one line, exit 2."""
from __future__ import annotations

from tests.cli.helpers import run_cli
from tests.plotting.conftest import png_size, run_dir, tiny_store, two_results  # noqa: F401


def test_every_kind_from_the_cli(capsys, tiny_store, two_results, run_dir, tmp_path):
    runs = {
        "cmc": ["cmc", *map(str, two_results), "--label", "A", "--label", "B"],
        "tsne": ["tsne", str(tiny_store), "--max-points", "25", "--perplexity", "5",
                 "--color-by", "pid"],
        "ranklist": ["ranklist", str(tiny_store), "--queries", "2", "--topk", "3"],
        "training": ["training", str(run_dir)],
        "distances": ["distances", str(tiny_store), "--bins", "10"],
    }
    for name, args in runs.items():
        out = tmp_path / f"{name}.png"
        code, _, err = run_cli(capsys, "plot", *args, "--out", out)
        assert code == 0, (name, err)
        assert f"wrote {out}" in err and png_size(out)[0] > 100


def test_plot_errors_are_one_line(capsys, tiny_store, tmp_path):
    code, _, err = run_cli(capsys, "plot", "tsne", tiny_store, "--out", tmp_path / "x.bmp2")
    assert code == 2 and err.count("\n") == 1 and "format" in err
    code, _, err = run_cli(capsys, "plot", "weight-maps", tiny_store, "--out",
                           tmp_path / "w.png")
    assert code == 2 and "Traceback" not in err
    code, _, err = run_cli(capsys, "plot", "training", tmp_path, "--out", tmp_path / "t.png")
    assert code == 2 and "metrics.csv" in err
