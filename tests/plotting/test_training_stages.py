"""`reid plot training` on a staged run (DG-VAE's three stages, DG-VAE paper §4.2): one panel
per loss term, stage boundaries dashed and named, log axes where a term spans decades."""
from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from reidcli.plotting.training import LOG_SPAN, needs_log_scale, phase_segments, plot_training
from reidcli.plotting.training import read_metrics
from tests.plotting.conftest import png_size

#: (phase, epochs, terms logged in that phase) — the DG-VAE trainer's metrics.csv layout
STAGES = (("stage1", 2, ("loss_id", "loss_cmtl", "loss_gmm", "loss_lmc", "loss_lmc_alpha_reg")),
          ("stage2", 1, ("loss_rec", "loss_cyc", "loss_idc", "loss_ambi")),
          ("stage3", 2, ("loss_id", "loss_cmtl", "loss_gmm", "loss_lmc", "loss_lmc_alpha_reg",
                         "loss_rec", "loss_cyc", "loss_idc", "loss_ambi")))
TERMS = ("loss_id", "loss_cmtl", "loss_gmm", "loss_lmc", "loss_lmc_alpha_reg", "loss_ambi",
         "loss_rec", "loss_cyc", "loss_idc")
ITERS_PER_EPOCH = 3


@pytest.fixture
def staged_run(tmp_path):
    """A 5-epoch, 15-iteration staged run; L_gmm falls from 1000 to 1 in stage 1."""
    run = tmp_path / "dgvae_run"
    run.mkdir()
    columns = ["epoch", "iteration", "lr", "loss", "images_per_s", "seconds", "phase", *TERMS,
               "alpha_mean", "sigma_d", "sigma_a"]
    rows, epoch, it = [], 0, 0
    for phase, epochs, active in STAGES:
        for _ in range(epochs):
            for _ in range(ITERS_PER_EPOCH):
                it += 1
                row = {"epoch": epoch, "iteration": it, "lr": 2e-4 if phase != "stage3" else 2e-5,
                       "loss": 10.0 / it, "images_per_s": 50, "seconds": it, "phase": phase,
                       "alpha_mean": 1 + 0.01 * it, "sigma_d": 0.5, "sigma_a": 0.9}
                for term in TERMS:
                    row[term] = "" if term not in active else 0.5 + 0.01 * it
                row["loss_gmm"] = "" if "loss_gmm" not in active else 1000.0 / it ** 2.6
                row["loss_lmc_alpha_reg"] = "" if "loss_gmm" not in active else -1 - 0.01 * it
                rows.append(row)
            epoch += 1
    with open(run / "metrics.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, columns)
        writer.writeheader()
        writer.writerows(rows)
    (run / "config.json").write_text(json.dumps({"config": {"method": "dgvae",
                                                            "dataset": "synthetic",
                                                            "backbone": "tiny"}}))
    return run


def test_phase_segments_of_a_staged_run(staged_run):
    frame = read_metrics(staged_run)
    assert phase_segments(frame) == [("stage1", 1, 6), ("stage2", 7, 9), ("stage3", 10, 15)]
    single = frame.assign(phase="bot")
    assert phase_segments(single) == [] and phase_segments(frame.drop(columns="phase")) == []


def test_staged_run_has_a_panel_per_term_and_named_stage_boundaries(staged_run, tmp_path):
    out = tmp_path / "stages.png"
    plot = plot_training(staged_run, out)
    titles = [ax.get_title() for ax in plot.figure.axes if ax.get_visible()]
    assert titles == ["loss (weighted total)", *TERMS, "learning rate", "latent statistics"]
    assert [s[0] for s in plot.stages] == ["stage1", "stage2", "stage3"]
    for ax in plot.figure.axes:
        if not ax.get_visible():
            continue
        dashed = sorted(ln.get_xdata()[0] for ln in ax.get_lines() if ln.get_linestyle() == "--")
        assert dashed == [6.5, 9.5], ax.get_title()              # between the stages
        dotted = sorted(ln.get_xdata()[0] for ln in ax.get_lines() if ln.get_linestyle() == ":")
        assert dotted == [3, 12], ax.get_title()                 # epoch ends inside stages
        assert [t.get_text() for t in ax.texts] == ["stage1", "stage2", "stage3"]
    # a term not active in a stage is a gap (NaN), not a zero
    x, rec = plot.series["loss_rec"]
    assert np.isnan(rec[x <= 6]).all() and np.isfinite(rec[x > 6]).all()
    x, gmm = plot.series["loss_gmm"]
    assert np.isnan(gmm[(x > 6) & (x <= 9)]).all()
    # L_gmm spans decades → log axis; the others and the negative regulariser stay linear
    by_title = {ax.get_title(): ax for ax in plot.figure.axes}
    assert by_title["loss_gmm"].get_yscale() == "log"
    assert by_title["loss_id"].get_yscale() == "linear"
    assert by_title["loss_lmc_alpha_reg"].get_yscale() == "linear"
    assert set(plot.log_panels) == {"loss_gmm", "learning rate"}
    latent = sorted(ln.get_label() for ln in by_title["latent statistics"].get_lines()
                    if ln.get_linestyle() == "-")
    assert latent == ["alpha_mean", "sigma_a", "sigma_d"]
    assert png_size(out)[0] > 1000                                # 4 panels per row


def test_a_term_never_logged_gets_no_panel(staged_run):
    frame = read_metrics(staged_run)
    frame["loss_cyc"] = np.nan
    frame.to_csv(staged_run / "metrics.csv", index=False)
    plot = plot_training(staged_run)
    assert "loss_cyc" not in [ax.get_title() for ax in plot.figure.axes]


def test_log_scale_rule():
    assert needs_log_scale([np.array([1.0, LOG_SPAN * 1.5, np.nan])])
    assert not needs_log_scale([np.array([1.0, LOG_SPAN / 2])])
    assert not needs_log_scale([np.array([-1.0, 1e6])])                  # not all positive
    assert not needs_log_scale([np.array([np.nan])])


def test_gradient_norm_columns_get_one_log_panel(staged_run):
    """DG-VAE's optional gradnorm_<term> columns (grad_norms=true) share one log-axis panel;
    a column never logged (all empty) is left out, and a run without them has no such panel."""
    frame = read_metrics(staged_run)
    it = frame["iteration"].to_numpy(dtype=float)
    frame["gradnorm_id"] = 0.5 + 0.0 * it
    frame["gradnorm_gmm"] = 1e4 / it
    frame["gradnorm_rec"] = np.nan
    frame.to_csv(staged_run / "metrics.csv", index=False)
    plot = plot_training(staged_run)
    by_title = {ax.get_title(): ax for ax in plot.figure.axes if ax.get_visible()}
    panel = by_title["gradient norm per term"]
    labels = sorted(ln.get_label() for ln in panel.get_lines() if ln.get_linestyle() == "-")
    assert labels == ["gradnorm_gmm", "gradnorm_id"]
    assert panel.get_yscale() == "log" and "gradient norm per term" in plot.log_panels
    np.testing.assert_allclose(plot.series["gradnorm_gmm"][1], 1e4 / it)
    frame.drop(columns=["gradnorm_id", "gradnorm_gmm", "gradnorm_rec"]).to_csv(
        staged_run / "metrics.csv", index=False)
    assert "gradient norm per term" not in [ax.get_title() for ax in
                                            plot_training(staged_run).figure.axes]


def test_a_one_phase_run_plots_only_the_terms_it_logged(staged_run):
    """A stage-1-only run (one phase, one loss panel): the stage-2 terms it never logged are
    not in the legend."""
    frame = read_metrics(staged_run)
    frame = frame[frame["phase"] == "stage1"]
    frame.to_csv(staged_run / "metrics.csv", index=False)
    plot = plot_training(staged_run)
    labels = {line.get_label() for ax in plot.figure.axes for line in ax.get_lines()}
    assert {"loss_id", "loss_gmm"} <= labels
    assert not labels & {"loss_rec", "loss_cyc", "loss_idc", "loss_ambi"}
