"""Absurd values of eval / adapt / plot / data options: each is a one-line error (exit 2, no
traceback) or an honest result, never a silently wrong number or a crash."""
from __future__ import annotations

import json
import shutil

import h5py
import numpy as np
import pytest
import torch

from reidcli.errors import ParameterError, UsageError
from tests.cli.helpers import run_cli
from tests.faults.helpers import (assert_nothing_written, assert_one_line_error, files,
                                  one_error_line, reid)


def _one_line(code: int, err: str, *needles: str) -> str:
    """In-process twin of assert_one_line_error."""
    assert code == 2, (code, err[-2000:])
    return one_error_line(err, *needles)


def _query_rows(path) -> np.ndarray:
    with h5py.File(path, "r") as f:
        return np.flatnonzero(f["records/split"][...].astype(str) == "query")


def _with_query_row(src, dst, value: float, row: int = 3):
    """Copy of store ``src`` whose ``row``-th query feature is [value, 0, …, 0]."""
    shutil.copy(src, dst)
    with h5py.File(dst, "a") as f:
        x = f["features/emb"][...]
        q = _query_rows(dst)[row]
        x[q] = 0
        x[q, 0] = value
        f["features/emb"][...] = x
    return dst


# -- 1: float32 overflow of the GEMM distance ---------------------------------------------------
@pytest.mark.parametrize("value", [1e20, 3e38])
def test_eval_rejects_rows_too_large_for_float32(capsys, biased_stores, tmp_path, value):
    store = _with_query_row(biased_stores[0], tmp_path / "big.h5", value)
    code, _, err = run_cli(capsys, "eval", "--store", store, "--quiet", "--device", "cpu")
    _one_line(code, err, "store feature 'emb' (query rows)", "1 row(s)", "too large",
              "--feat-norm")
    # normalised rows are fine: the check runs after --feat-norm
    code, _, err = run_cli(capsys, "eval", "--store", store, "--quiet", "--device", "cpu",
                           "--feat-norm", "global")
    assert code == 0, err


def test_query_gallery_rejects_huge_rows_and_keeps_order_independence():
    from reidcli.evaluation.distances import FeatureMetric, QueryGallery
    from reidcli.evaluation.backend import NumpyBackend
    from reidcli.evaluation.errors import EvaluationError

    rng = np.random.default_rng(0)
    q, g = rng.normal(size=(4, 8)).astype(np.float32), rng.normal(size=(6, 8)).astype(np.float32)
    q[1, 0] = 1e20
    with pytest.raises(EvaluationError, match=r"query features: 1 row\(s\) have values too large"):
        QueryGallery(FeatureMetric("euclidean", NumpyBackend()), q, g)
    q[1, 0] = 1e15                       # large but representable: same rows, any order
    metric = FeatureMetric("euclidean", NumpyBackend())
    a = QueryGallery(metric, q, g).block(np.arange(4))
    b = QueryGallery(metric, q[::-1].copy(), g).block(np.arange(4))[::-1]
    assert np.isfinite(a).all()
    np.testing.assert_array_equal(np.argsort(a, axis=1, kind="stable"),
                                  np.argsort(b, axis=1, kind="stable"))


# -- 2: adaptation diverging / bad learning rates ---------------------------------------------
def test_adapt_divergence_is_one_line_and_writes_nothing(capsys, biased_stores, tmp_path):
    before = files(tmp_path)
    code, _, err = run_cli(capsys, "adapt", "dart3-lite", "--store", biased_stores[0],
                           "--out", tmp_path / "a.h5", "--lr", "1e30", "--quiet")
    _one_line(code, err, "--lr", "diverge", "smaller learning rate")
    assert_nothing_written(tmp_path, before)


@pytest.mark.parametrize("lr", ["nan", "inf", "-1"])
def test_adapt_rejects_non_finite_or_negative_lr(capsys, biased_stores, tmp_path, lr):
    code, _, err = run_cli(capsys, "adapt", "dart3-lite", "--store", biased_stores[0],
                           "--out", tmp_path / "a.h5", "--lr", lr, "--quiet")
    _one_line(code, err, "--lr", "finite number ≥ 0")
    assert not (tmp_path / "a.h5").exists()


@pytest.mark.parametrize("field,value", [("lr", float("nan")), ("lr", float("inf")),
                                         ("tau", float("inf")), ("eps", float("nan")),
                                         ("temp_reg", float("nan")), ("seed", -1),
                                         ("steps", 2_000_000_000)])
def test_adapt_config_rejects_up_front(field, value):
    from reidcli.adapt import AdaptConfig

    with pytest.raises(ParameterError) as info:
        AdaptConfig(method="dart3", mode="lite", **{field: value}).resolved()
    assert info.value.parameter == field


def test_adapt_loop_checks_its_outputs():
    from reidcli.adapt import AdaptConfig
    from reidcli.adapt.run import adapt_features, inputs_from_arrays

    rng = np.random.default_rng(0)
    q, g = rng.normal(size=(40, 8)), rng.normal(size=(60, 8))
    inputs = inputs_from_arrays(q, np.arange(40) % 2, g, np.arange(60) % 2)
    with pytest.raises(ParameterError, match="diverge") as info:
        adapt_features(inputs, AdaptConfig(method="dart3", mode="lite", lr=1e30, batch_size=8))
    assert info.value.parameter == "lr"


# -- 3: plots of NaN ----------------------------------------------------------------------------
def test_plot_cmc_refuses_nan_naming_file_and_field(capsys, biased_stores, tmp_path):
    report = tmp_path / "r.json"
    code, _, err = run_cli(capsys, "eval", "--store", biased_stores[0], "--quiet", "--json",
                           report, "--device", "cpu")
    assert code == 0, err
    data = json.loads(report.read_text())
    data["cmc"][2] = float("nan")
    bad = tmp_path / "nan.json"
    bad.write_text(json.dumps(data))                # json writes NaN
    code, _, err = run_cli(capsys, "plot", "cmc", bad, "--out", tmp_path / "c.png")
    _one_line(code, err, str(bad), "cmc[2]")
    data = json.loads(report.read_text())
    data["trials"][0]["cmc"][0] = "x"
    bad.write_text(json.dumps(data))
    code, _, err = run_cli(capsys, "plot", "cmc", bad, "--out", tmp_path / "c.png")
    _one_line(code, err, str(bad), "trials[0].cmc[0]")
    assert not (tmp_path / "c.png").exists()


def test_plot_tsne_nan_rows_one_line(capsys, biased_stores, tmp_path):
    store = tmp_path / "nan.h5"
    shutil.copy(biased_stores[0], store)
    with h5py.File(store, "a") as f:
        x = f["features/emb"][...]
        x[5, 3] = np.nan
        f["features/emb"][...] = x
    code, _, err = run_cli(capsys, "plot", "tsne", "--store", store, "--out", tmp_path / "t.png")
    _one_line(code, err, str(store), "'emb'", "NaN", "store row 5")
    for option, value in (("--perplexity", "nan"), ("--perplexity", "0"),
                          ("--max-points", "0"), ("--seed", "-1")):
        code, _, err = run_cli(capsys, "plot", "tsne", "--store", biased_stores[0], "--out",
                               tmp_path / "t.png", option, value)
        _one_line(code, err, option)
    assert not (tmp_path / "t.png").exists()


# -- 4: unknown loader options ------------------------------------------------------------------
def test_unknown_loader_option_lists_the_accepted_ones(tmp_path):
    from reidcli.data import registry

    with pytest.raises(UsageError, match="unknown option") as info:
        registry.load("synthetic", tmp_path, nmae="tiny")
    assert "nmae" in info.value.what and "name" in info.value.todo
    assert not any(tmp_path.iterdir())               # nothing generated
    with pytest.raises(UsageError, match="keep_junk"):
        registry.load("market1501", tmp_path, keep_junks=True)


def test_unknown_loader_option_cli(capsys, tmp_path):
    code, _, err = run_cli(capsys, "data", "check", "synthetic", "--root", tmp_path,
                           "--option", "nmae=tiny")
    _one_line(code, err, "nmae", "valid options", "name")


def test_every_loader_declares_its_options():
    import inspect

    from reidcli.data import registry

    registry._ensure_loaded()
    for name, entry in registry._REGISTRY.items():
        accepted = registry.accepted_options(entry.info, generic=False)
        params = inspect.signature(entry.loader).parameters
        takes_any = any(p.kind is p.VAR_KEYWORD for p in params.values())
        for key in accepted:
            assert takes_any or key in params, (name, key)


# -- 5: dataset-specific protocols --------------------------------------------------------------
@pytest.mark.parametrize("protocol", ["sysu", "regdb", "cuhk03_sgs"])
def test_dataset_specific_protocol_on_other_store(capsys, biased_stores, protocol):
    code, _, err = run_cli(capsys, "eval", "--store", biased_stores[0], "--protocol", protocol,
                           "--quiet", "--device", "cpu")
    _one_line(code, err, f"--protocol {protocol}", "synthetic_bias", "--protocol market")


def test_protocol_fits_cross_modality_rows():
    from reidcli.evaluation.errors import EvaluationError
    from reidcli.evaluation.protocols import PROTOCOLS, check_protocol_fits

    check_protocol_fits(PROTOCOLS["sysu"], "sysu_mm01", None, ["visible"], [0])
    check_protocol_fits(PROTOCOLS["sysu"], "merged", None, ["visible", "infrared"], [0, 5])
    check_protocol_fits(PROTOCOLS["regdb"], "x", "regdb", ["visible"], [0])
    check_protocol_fits(PROTOCOLS["market"], "x", None, ["visible"], [0])
    with pytest.raises(EvaluationError):
        check_protocol_fits(PROTOCOLS["sysu"], "merged", None, ["visible", "infrared"], [0, 9])
    with pytest.raises(EvaluationError):
        check_protocol_fits(PROTOCOLS["cuhk03_sgs"], "market1501", None, ["visible"], [0])


# -- 6: determinism of the adaptation -----------------------------------------------------------
def _adapt(store, threads: int) -> np.ndarray:
    from reidcli.adapt import AdaptConfig
    from reidcli.adapt.inputs import read_inputs
    from reidcli.adapt.run import adapt_features

    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        cfg = AdaptConfig(method="dart3", mode="lite", batch_size=64, seed=1, lr=1e-2, steps=2)
        return adapt_features(read_inputs(store), cfg).queries.copy()
    finally:
        torch.set_num_threads(old)


def test_adapt_same_seed_same_bits(biased_stores):
    first = _adapt(biased_stores[1], 2)
    np.testing.assert_array_equal(first, _adapt(biased_stores[1], 2))
    np.testing.assert_array_equal(first, _adapt(biased_stores[1], 1))


def test_adapt_cli_runs_bit_identical(capsys, biased_stores, tmp_path):
    outs = []
    for i in range(2):
        out = tmp_path / f"a{i}.h5"
        code, _, err = run_cli(capsys, "adapt", "dart3-lite", "--store", biased_stores[0],
                               "--out", out, "--batch-size", "64", "--seed", "1", "--quiet")
        assert code == 0, err
        with h5py.File(out, "r") as f:
            outs.append(f["features/emb"][...])
    np.testing.assert_array_equal(outs[0], outs[1])


@pytest.mark.parametrize("layout,batch", [("rows", 5), ("columns", 32)])
def test_chunked_reduction_matches_reference(monkeypatch, layout, batch):
    from reidcli.adapt import losses

    gen = torch.Generator().manual_seed(0)
    gallery = torch.randn(3000, 16, generator=gen)
    z = torch.randn(batch, 16, generator=gen, requires_grad=True)
    ref = losses.dart3_loss_reference(z, gallery, 10.0, 3)
    (g_ref,) = torch.autograd.grad(ref, z)
    results = []
    for chunk in (7, 1024, 10 ** 6):                  # any chunking: the same loss/gradient
        monkeypatch.setattr(losses, "REDUCTION_CHUNK", chunk)
        prepared = losses.PreparedGallery(gallery, batch_size=batch, layout=layout, block=1000)
        loss = losses.dart3_loss(z, prepared, 10.0, 3)
        (grad,) = torch.autograd.grad(loss, z)
        torch.testing.assert_close(loss, ref, rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(grad, g_ref, rtol=1e-3, atol=1e-5)
        results.append(grad)
    a = losses.dart3_loss(z, losses.PreparedGallery(gallery, batch_size=batch, layout=layout,
                                                    block=1000), 10.0, 3)
    b = losses.dart3_loss(z, losses.PreparedGallery(gallery, batch_size=batch, layout=layout,
                                                    block=1000), 10.0, 3)
    assert torch.equal(a, b)


# -- 7: absurd numeric values of eval / adapt -------------------------------------------------
@pytest.mark.parametrize("args,needles", [
    (["--max-rank", "2000000000"], ["--max-rank 2000000000", "gallery", "at most"]),
    (["--max-rank", "0"], ["--max-rank"]),
    (["--sgs-repeats", "2000000000"], ["--sgs-repeats"]),
    (["--block-size", "-1"], ["--block-size"]),
    (["--rerank", "--rerank-lambda", "nan"], ["--rerank-lambda"]),
    (["--rerank", "--rerank-k1", "0"], ["--rerank-k1"]),
    (["--nmi", "--nmi-k", "2000000000"], ["--nmi-k"]),
    (["--feat-norm", "parts", "--parts", "0"], ["--parts"]),
])
def test_eval_absurd_values_one_line(capsys, biased_stores, args, needles):
    code, _, err = run_cli(capsys, "eval", "--store", biased_stores[0], "--quiet",
                           "--device", "cpu", *args)
    _one_line(code, err, *needles)


def test_eval_huge_auc_max_rank_is_cheap(capsys, biased_stores):
    code, _, err = run_cli(capsys, "eval", "--store", biased_stores[0], "--quiet", "--device",
                           "cpu", "--full-cmc", "--auc-max-rank", "2000000000")
    assert code == 0, err


def test_cmc_auc_past_the_curve():
    from reidcli.evaluation.scores import cmc_auc

    curve = np.array([0.5, 0.75, 1.0])
    assert cmc_auc(curve, 5) == pytest.approx((0.5 + 0.75 + 1 + 1 + 1) / 5)
    assert cmc_auc(curve, 2_000_000_000) == pytest.approx(1.0, abs=1e-8)


@pytest.mark.parametrize("args,needles", [
    (["--lr", "nan"], ["--lr"]), (["--seed", "-1"], ["--seed"]),
    (["--steps", "2000000000"], ["--steps"]), (["--tau", "nan"], ["--tau"]),
    (["--eps", "0"], ["--eps"]), (["--batch-size", "0"], ["--batch-size"]),
    (["--topk", "-1"], ["--topk"]), (["--std-ddof", "2"], ["--std-ddof"]),
    (["--trial", "2000000000"], ["--trial"]),
])
def test_adapt_absurd_values_one_line(capsys, biased_stores, tmp_path, args, needles):
    code, _, err = run_cli(capsys, "adapt", "dart3-lite", "--store", biased_stores[0],
                           "--out", tmp_path / "a.h5", "--quiet", *args)
    _one_line(code, err, *needles)
    assert not (tmp_path / "a.h5").exists()


def test_eval_max_rank_subprocess(biased_stores):
    """The reported case, as a real process: no traceback, no huge allocation."""
    proc = reid("eval", "--store", biased_stores[0], "--max-rank", "2000000000", "--quiet",
                "--device", "cpu", timeout=120)
    assert_one_line_error(proc, "--max-rank")


# -- 8: errors name the flag the user typed -------------------------------------------------
def test_train_xqda_reg_names_reg(capsys, biased_stores, tmp_path):
    code, _, err = run_cli(capsys, "train", "xqda", "--store", biased_stores[0],
                           "--out", tmp_path / "x.h5", "--reg", "-1")
    line = _one_line(code, err, "--reg")
    assert "--xqda-lambda" not in line


def test_fit_pooling_cdpcf_g_names_g(capsys, biased_stores, tmp_path):
    code, _, err = run_cli(capsys, "fit-pooling", "cdpcf", "--store", biased_stores[0],
                           "--out", tmp_path / "c.h5", "--G", "0")
    line = _one_line(code, err, "--G 0")
    assert "--E" not in line


@pytest.mark.parametrize("kind,args,needles", [
    ("distances", ["--max-pairs", "0"], ["--max-pairs"]),
    ("distances", ["--max-pairs", "-1"], ["--max-pairs"]),
    ("distances", ["--bins", "0"], ["--bins"]),
    ("distances", ["--bins", "2000000000"], ["--bins"]),
    ("distances", ["--seed", "-1"], ["--seed"]),
    ("distances", ["--trial", "-1"], ["--trial '-1'"]),
    ("ranklist", ["--queries", "0"], ["--queries"]),
    ("ranklist", ["--queries", "-1"], ["--queries"]),
    ("ranklist", ["--max-rank", "-1"], ["--max-rank"]),
    ("ranklist", ["--seed", "-1"], ["--seed"]),
    ("cmc", ["--max-rank", "0"], ["--max-rank"]),
])
def test_plot_absurd_values_one_line(capsys, biased_stores, tmp_path, kind, args, needles):
    source = biased_stores[0]
    if kind == "cmc":
        source = tmp_path / "r.json"
        code, _, err = run_cli(capsys, "eval", "--store", biased_stores[0], "--quiet",
                               "--json", source, "--device", "cpu")
        assert code == 0, err
    given = [source] if kind == "cmc" else ["--store", source]
    code, _, err = run_cli(capsys, "plot", kind, *given, "--out", tmp_path / "p.png", *args)
    _one_line(code, err, *needles)
    assert not (tmp_path / "p.png").exists()
