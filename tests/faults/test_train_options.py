"""Training options at their edges (issue 28): every numeric option of `reid train pcb|bot|
dgvae|dmgnet` has one constraint (range, finiteness, integer-ness; seeds in [0, 2³²)), checked
before anything is read or written — one line naming the flag, exit 2."""
from __future__ import annotations

import dataclasses
import typing

import pytest

from reidcli.errors import ParameterError
from reidcli.training.config import (FIELD_CONSTRAINTS, ITEM_CONSTRAINTS, TrainConfig,
                                     make_config)
from tests.faults.helpers import assert_one_line_error_in_process, reid_in_process

DATA = ["--dataset", "synthetic", "--option", "name=tiny", "--preset", "tiny"]


@pytest.mark.parametrize("method, args, needles", [
    # negative or huge seeds reached numpy / torch (traceback, or wrapped silently)
    ("bot", ["--seed", "-1"], ["--seed -1", "[0, "]),
    ("bot", ["--seed", str(2**32)], ["--seed 4294967296"]),
    ("pcb", ["--seed", str(10**20)], ["--seed"]),
    ("pcb", ["--subsample-seed", "-3"], ["--subsample-seed -3"]),
    # nan / inf learning rates and loss weights (a divergence later blamed on --lr)
    ("bot", ["--lr", "nan"], ["--lr nan", "finite"]),
    ("pcb", ["--lr", "inf"], ["--lr inf", "finite"]),
    ("pcb", ["--backbone-lr-mult", "nan"], ["--backbone-lr-mult nan"]),
    ("pcb", ["--rpp-lr", "-inf"], ["--rpp-lr -inf"]),
    ("bot", ["--label-smooth", "nan"], ["--label-smooth nan"]),
    ("bot", ["--triplet-margin", "inf"], ["--triplet-margin inf"]),
    ("dmgnet", ["--md-weight", "nan"], ["--md-weight nan"]),
    ("dmgnet", ["--md-weight", "inf"], ["--md-weight inf"]),
    ("dmgnet", ["--md-scale", "0"], ["--md-scale 0"]),
    ("dmgnet", ["--inner-lr", "nan"], ["--inner-lr nan"]),
    ("dmgnet", ["--outer-base-weight", "-1"], ["--outer-base-weight -1"]),
    ("dgvae", ["--stage-lrs", "nan,1e-3,1e-4"], ["--stage-lrs", "nan"]),
    ("dgvae", ["--classifier-lrs", "0.1,inf,0.1"], ["--classifier-lrs", "inf"]),
    # negative weight decay, warm-up, iterations
    ("bot", ["--weight-decay", "-1"], ["--weight-decay -1"]),
    ("bot", ["--warmup-epochs", "-2"], ["--warmup-epochs -2"]),
    ("bot", ["--warmup-factor", "0"], ["--warmup-factor 0"]),
    ("pcb", ["--max-iters", "-5"], ["--max-iters -5"]),
    ("dgvae", ["--iters-per-epoch", "-1"], ["--iters-per-epoch -1"]),
    ("pcb", ["--epochs", str(10**18)], ["--epochs"]),
    ("pcb", ["--lr-steps", "-3"], ["--lr-steps", "-3"]),
    ("pcb", ["--momentum", "1.5"], ["--momentum 1.5"]),
    ("pcb", ["--dropout", "nan"], ["--dropout nan"]),
    ("bot", ["--random-erasing", "2"], ["--random-erasing 2"]),
    ("pcb", ["--workers", "-1"], ["--workers -1"]),
    ("pcb", ["--log-every", "0"], ["--log-every 0"]),
    ("pcb", ["--checkpoint-every", "-1"], ["--checkpoint-every -1"]),
    ("pcb", ["--max-images", "0"], ["--max-images 0"]),
    # --ids-per-batch 1: a batch without negatives; --input-size 1x1: no feature map
    ("bot", ["--ids-per-batch", "1"], ["--ids-per-batch 1", "[2, "]),
    ("dmgnet", ["--ids-per-batch", "1"], ["--ids-per-batch 1"]),
    ("dgvae", ["--ids-per-batch", "1"], ["--ids-per-batch 1"]),
    ("bot", ["--input-size", "1x1"], ["--input-size", "1x1", "16"]),
    ("bot", ["--input-size", "abc"], ["--input-size 'abc'", "HxW"]),
    ("bot", ["--input-size", "0x128"], ["--input-size '0x128'"]),
    # one image per identity: no positive pair for the batch-hard triplet
    ("bot", ["--images-per-id", "1"], ["--images-per-id 1", "positive"]),
    # LR steps out of order were used as given
    ("bot", ["--lr-steps", "70,40"], ["--lr-steps '70,40'", "increasing", "40,70"]),
    ("dgvae", ["--input-size", "8x4"], ["--input-size", "8x4"]),
])
def test_edge_values_are_refused_up_front(capsys, tmp_path, method, args, needles):
    data = ["--sources", "synthetic"] if method == "dmgnet" else DATA[:4]
    result = reid_in_process("train", method, *data, "--preset", "tiny", *args,
                             "--root", tmp_path / "data", "--out", tmp_path / "run",
                             capsys=capsys)
    assert_one_line_error_in_process(result, *needles)
    assert sorted(p.name for p in tmp_path.iterdir()) == []        # nothing read or written


def _numeric(tp) -> bool:
    """Whether a TrainConfig field annotation holds a number (or a list of numbers)."""
    text = str(tp)
    return any(t in text for t in ("int", "float")) or text in ("list", "tuple")


def test_every_numeric_option_has_a_constraint():
    hints = typing.get_type_hints(TrainConfig)
    unchecked = [f.name for f in dataclasses.fields(TrainConfig)
                 if _numeric(hints[f.name]) and f.name not in FIELD_CONSTRAINTS
                 and f.name not in ITEM_CONSTRAINTS
                 and f.name not in ("sources", "domains", "targets")]   # names, not numbers
    assert unchecked == []
    # the defaults and presets of every method satisfy them
    for method in ("pcb", "bot", "dgvae", "dmgnet"):
        make_config(method)
        make_config(method, preset="tiny")


def test_values_are_canonical_and_library_errors_name_the_parameter():
    cfg = make_config("pcb", epochs=3.0, seed=7.0, lr=1)
    assert (cfg.epochs, cfg.seed, cfg.lr) == (3, 7, 1.0)
    assert type(cfg.epochs) is int and type(cfg.lr) is float
    with pytest.raises(ParameterError, match=r"parameter seed=-1 must be an integer"):
        make_config("pcb", seed=-1)
    with pytest.raises(ParameterError, match=r"epochs=2\.5 must be an integer"):
        make_config("pcb", epochs=2.5)
