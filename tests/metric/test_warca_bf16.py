"""WARCA ``precision="bf16"`` (bfloat16 GEMM inputs, float32 everything else) and ``threads``
(docs/methods/warca.md, Cost per iteration)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from reidcli.errors import ParameterError, UsageError
from reidcli.metric.warca import WARCA
from reidcli.metric.warca_trainer import WARCATrainer
from tests.metric.helpers import camera_offset_toy, rank1_of_embeddings

# l2 rows: distances of order 1 like the margin, so one step's sampling decisions do not hinge
# on rounding (unnormalised toy rows are ~22 apart and flip them within a few steps)
TOY = dict(dim=10, normalize="l2", seed=0, holdout_check=0.0)


@pytest.fixture(scope="module")
def toy():
    return camera_offset_toy(seed=0, test_ids=200)


def _relative(a, b) -> float:
    return float(np.linalg.norm(np.asarray(a) - np.asarray(b)) / np.linalg.norm(np.asarray(b)))


def test_bf16_sgd_updates_match_float32_to_bf16_rounding(toy):
    # same seed, same pairs and negatives: the SGD update W_t − W_0 differs only by the
    # rounding of the GEMM inputs (measured 0.3–0.45 % over 4 toy seeds and 3 steps)
    x, pids, _, _ = toy
    updates = {}
    for precision in ("float32", "bf16"):
        tr = WARCA(**TOY, optimizer="sgd", lam=0.1, precision=precision).trainer(x, pids)
        start = tr.params.clone()
        steps = []
        for _ in range(3):
            tr.step()
            steps.append((tr.params - start).numpy().copy())
        updates[precision] = steps
        assert tr.params.dtype == torch.float32
    for low, full in zip(updates["bf16"], updates["float32"]):
        assert 0 < _relative(low, full) < 0.02


def test_bf16_run_is_deterministic_and_close_to_float32(toy):
    # 300 Adam iterations: sampling decisions drift apart (even a 1e-6 relative perturbation
    # of X moved W by 11 % on one toy seed), so W agrees loosely — measured 0.11–0.39
    # relative over 5 toy seeds — and rank-1 within a few points (measured ≤ 4 points)
    x, pids, q, g = toy
    fits = {p: WARCA(**TOY, iterations=300, precision=p).fit(x, pids)
            for p in ("float32", "bf16")}
    again = WARCA(**TOY, iterations=300, precision="bf16").fit(x, pids)
    assert np.array_equal(again.W_, fits["bf16"].W_)
    assert fits["bf16"].W_.dtype == np.float32
    assert _relative(fits["bf16"].W_, fits["float32"].W_) < 0.6
    rank1 = {p: rank1_of_embeddings(m.transform(q), m.transform(g)) for p, m in fits.items()}
    assert abs(rank1["bf16"] - rank1["float32"]) <= 0.08
    assert rank1["bf16"] > 2 * rank1_of_embeddings(q, g)        # learned, not random


def test_float32_precision_is_the_default_path(toy):
    x, pids, _, _ = toy
    default = WARCA(**TOY, iterations=20).fit(x, pids)
    explicit = WARCA(**TOY, iterations=20, precision="float32").fit(x, pids)
    assert default.hyper_["precision"] == "float32"
    assert np.array_equal(default.W_, explicit.W_)


def test_bf16_touched_rows_path_matches_the_all_rows_path(toy, monkeypatch):
    # the projection choice must not change a bf16 step beyond rounding either
    x, pids, _, _ = toy
    result = {}
    for project_all in (True, False):
        monkeypatch.setattr(WARCATrainer, "_projects_all_rows", lambda self, v=project_all: v)
        tr = WARCA(**TOY, optimizer="sgd", lam=0.1, precision="bf16").trainer(x, pids)
        start = tr.params.clone()
        tr.step()
        result[project_all] = (tr.params - start).numpy()
    assert _relative(result[False], result[True]) < 0.02


def test_threads_applies_during_fit_and_is_restored(toy, monkeypatch):
    x, pids, _, _ = toy
    before = torch.get_num_threads()
    seen = []
    run = WARCATrainer.run

    def spy(self, *args, **kwargs):
        seen.append(torch.get_num_threads())
        return run(self, *args, **kwargs)

    monkeypatch.setattr(WARCATrainer, "run", spy)
    try:
        torch.set_num_threads(2)
        WARCA(**TOY, iterations=2, threads=1).fit(x, pids)
        assert seen == [1] and torch.get_num_threads() == 2
        WARCA(**TOY, iterations=2).fit(x, pids)                  # threads=0: left as is
        assert seen == [1, 2] and torch.get_num_threads() == 2
        with pytest.raises(UsageError):                          # restored on errors too
            WARCA(**TOY, iterations=2, threads=1).fit(x, np.zeros(len(x), int))
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("bad", [{"precision": "fp16"}, {"precision": "bfloat"},
                                 {"threads": -1}])
def test_bad_precision_or_threads_is_refused(toy, bad):
    x, pids, _, _ = toy
    with pytest.raises(ParameterError, match=next(iter(bad))):
        WARCA(**TOY, iterations=1, **bad).fit(x, pids)


def test_bf16_with_a_kernel_is_refused(toy):
    x, pids, _, _ = toy
    with pytest.raises(UsageError, match="primal only") as err:
        WARCA(**TOY, kernel="chi2rbf", precision="bf16").trainer(np.abs(x), pids)
    assert "\n" not in str(err.value.args[0])
    WARCA(**TOY, kernel="chi2rbf", precision="float32").trainer(np.abs(x), pids)
