"""`reid plot KIND` writes each figure and answers bad input with one line, exit 2."""
from __future__ import annotations

import warnings

import numpy as np

from tests.cli.helpers import run_cli, spy
from tests.plotting.conftest import (one_native_thread, png_size, run_dir,  # noqa: F401
                                     tiny_store, tiny_store_lbp, toy_fit, two_modality_store,
                                     two_results)


def test_every_kind_from_the_cli(capsys, tiny_store, two_results, run_dir, two_modality_store,
                                 tmp_path):
    runs = {
        "cmc": ["cmc", *map(str, two_results), "--label", "A", "--label", "B"],
        "tsne": ["tsne", "--store", str(tiny_store), "--max-points", "25", "--perplexity", "5",
                 "--color-by", "pid"],
        "ranklist": ["ranklist", "--store", str(tiny_store), "--queries", "2", "--max-rank", "3"],
        "training": ["training", "--model", str(run_dir)],
        "distances": ["distances", "--store", str(tiny_store), "--bins", "10"],
        "distances-mm": ["distances", "--store", str(two_modality_store), "--bins", "6"],
    }
    for name, args in runs.items():
        out = tmp_path / f"{name}.png"
        code, _, err = run_cli(capsys, "plot", *args, "--out", out)
        assert code == 0, (name, err)
        assert f"wrote {out}" in err and png_size(out)[0] > 100


def test_plot_errors_are_one_line(capsys, tiny_store, tmp_path):
    code, _, err = run_cli(capsys, "plot", "tsne", "--store", tiny_store, "--out", tmp_path / "x.bmp2")
    assert code == 2 and err.count("\n") == 1 and "format" in err
    code, _, err = run_cli(capsys, "plot", "weight-maps", "--model", tiny_store, "--out",
                           tmp_path / "w.png")
    assert code == 2 and "Traceback" not in err
    code, _, err = run_cli(capsys, "plot", "training", "--model", tmp_path, "--out", tmp_path / "t.png")
    assert code == 2 and "metrics.csv" in err


def test_weight_maps_from_the_cli_draws_the_chosen_figure(capsys, toy_fit, tmp_path,
                                                          monkeypatch):
    from reidcli.plotting import weight_maps

    drawn = spy(monkeypatch, weight_maps, "plot_weight_maps")
    out = tmp_path / "w.svg"
    code, _, err = run_cli(capsys, "plot", "weight-maps", "--model", toy_fit[1], "--out", out,
                           "--num-maps", "3", "--figure", "maps", "--trial", "1")
    assert code == 0, err
    assert f"wrote {out}" in err and out.read_text().lstrip().startswith("<?xml")
    plot, = drawn
    assert len(plot.figure.axes) == 3 * len(plot.maps) == 3 * 2 * 2   # 2 layers × 2 cameras
    out = tmp_path / "w.png"
    code, _, err = run_cli(capsys, "plot", "weight-maps", "--model", toy_fit[1], "--out", out,
                           "--figure", "sum", "--layers", "conv5_x")
    assert code == 0, err
    assert png_size(out)[1] > 100
    assert sorted(drawn[-1].images) == [0, 1] and len(drawn[-1].figure.axes) == 2 * 2
    code, _, err = run_cli(capsys, "plot", "weight-maps", "--model", toy_fit[1], "--out",
                           tmp_path / "x.png", "--trial", "7")
    assert code == 2 and err.count("\n") == 1 and "--trial 7" in err


def test_tsne_compare_from_the_cli(capsys, tiny_store, tiny_store_lbp, tmp_path, monkeypatch):
    from reidcli.plotting import tsne

    drawn = spy(monkeypatch, tsne, "plot_tsne")
    out = tmp_path / "t.png"
    code, _, err = run_cli(capsys, "plot", "tsne", "--store", tiny_store, "--compare", tiny_store_lbp,
                           "--max-points", "20", "--perplexity", "4", "--split",
                           "query,gallery", "--out", out)
    assert code == 0, err
    plot, = drawn
    assert len(plot.figure.axes) == 2 and "hist-lbp" in plot.titles[1]
    assert not np.allclose(plot.points[0], plot.points[1])
    assert png_size(out)[0] > png_size(out)[1]


def test_ranklist_cli_warns_about_missing_images(capsys, two_modality_store, tmp_path):
    out = tmp_path / "r.png"
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        code, _, err = run_cli(capsys, "plot", "ranklist", "--store", two_modality_store,
                               "--queries", "2", "--max-rank", "2", "--out", out)
    assert code == 0, err
    lines = [line for line in err.splitlines() if "missing or unreadable" in line]
    assert len(lines) == 1 and lines[0].startswith("warning: ")      # one line, no source path
    assert ".py" not in err
    assert png_size(out)[0] > 100
