"""Numbers at the edges of `reid adapt` (issue 28): every adaptation setting is checked against
its constraint (reidcli.adapt.config.CONSTRAINTS) before any work, and a refused value is one
line naming the flag (exit 2, no traceback) — never a traceback from numpy/torch, never
silently accepted."""
from __future__ import annotations

import pytest

from reidcli.adapt import AdaptConfig
from reidcli.errors import ParameterError
from tests.faults.helpers import assert_one_line_error_in_process, files, reid_in_process


# one case per (flag, value) a careless user may type; the needles the error line must name
@pytest.mark.parametrize("method,args,needles", [
    # seeds: negative, beyond 2³², not an integer (torch.manual_seed overflowed: traceback)
    ("dart3-lite", ["--seed", "-1"], ["--seed", "-1"]),
    ("dart3-lite", ["--seed", "4294967296"], ["--seed", "4294967296"]),
    ("dart3-lite", ["--seed", "99999999999999999999"], ["--seed"]),
    ("dart3-lite", ["--param", "seed=1e20"], ["--param seed", "1e+20"]),
    ("dart3-lite", ["--param", "seed=abc"], ["--param seed", "'abc'"]),
    ("norm", ["--param", "seed=-5"], ["--param seed", "-5"]),
    # numbers as text that are not numbers (ValueError traceback before)
    ("dart3-lite", ["--param", "tau=abc"], ["--param tau", "'abc'"]),
    ("dart3-lite", ["--param", "tau="], ["--param tau", "''"]),
    ("dart3-lite", ["--param", "temp_k=abc"], ["--param temp_k", "'abc'"]),
    ("dart3-lite", ["--param", "query_cams=abc"], ["--param query_cams", "'abc'"]),
    # integers given as fractions (TypeError traceback or silently truncated before)
    ("dart3-lite", ["--param", "steps=2.5"], ["--param steps", "2.5", "integer"]),
    ("dart3-lite", ["--param", "grounding=2.5"], ["--param grounding", "2.5", "integer"]),
    ("dart3-lite", ["--param", "trial=1.5"], ["--param trial", "1.5", "integer"]),
    # booleans that are not true/false/yes/no/1/0 (silently true before)
    ("dart3-lite", ["--param", "episodic=maybe"], ["--param episodic", "'maybe'"]),
    ("dart3-lite", ["--param", "external=2"], ["--param external", "true or false"]),
    ("dart3-lite", ["--param", "split_by_query_camera=2"],
     ["--param split_by_query_camera", "true or false"]),
    ("dart3-lite", ["--param", "std_ddof=true"], ["--param std_ddof", "[0, 1]"]),
    # out of range or not finite (float32 overflow traceback or silently accepted before)
    ("dart3-lite", ["--lr", "1e300"], ["--lr", "1e+300"]),
    ("dart3-lite", ["--param", "tau=1e-300"], ["--param tau", "1e-300"]),
    ("dart3-lite", ["--param", "tau=1e300"], ["--param tau", "1e+300"]),
    ("dart3-lite", ["--param", "tau=nan"], ["--param tau", "nan"]),
    ("dart3-lite", ["--eps", "1e30"], ["--eps", "1e+30"]),
    ("dart3-lite", ["--batch-size", "100000000000"], ["--batch-size", "100000000000"]),
    ("dart3-lite", ["--topk", "3000000000"], ["--topk", "3000000000"]),
    ("dart3-lite", ["--param", "workers=-1"], ["--param workers", "-1"]),
    ("dart3-lite", ["--param", "temp_reg=inf"], ["--param temp_reg", "inf"]),
    # empty names, and a mode that contradicts the method (silently ignored before)
    ("dart3-lite", ["--param", "grounding_split="], ["--param grounding_split", "''"]),
    ("dart3-lite", ["--param", "feature="], ["--param feature", "''"]),
    ("dart3-lite", ["--param", "device=cuda:x"], ["--param device", "'cuda:x'"]),
    ("dart3-lite", ["--param", "mode=full"], ["--param mode", "'full'", "dart3-lite"]),
    ("dart3", ["--param", "mode="], ["--param mode", "''"]),
    # unknown keys and an empty key
    ("dart3-lite", ["--param", "nope=3"], ["--param nope"]),
    ("dart3-lite", ["--param", "=3"], ["--param"]),
])
def test_adapt_settings_refused_in_one_line(capsys, biased_stores, tmp_path, method, args,
                                             needles):
    before = files(tmp_path)
    result = reid_in_process("adapt", method, "--store", biased_stores[0], "--out",
                             tmp_path / "out.h5", "--quiet", *args, capsys=capsys)
    assert_one_line_error_in_process(result, *needles)
    assert files(tmp_path) == before                              # nothing written


# case: values that a careless user types and that mean something are converted, not refused
def test_adapt_settings_converted():
    cfg = AdaptConfig(method="dart3-lite", seed="7", steps="2.0", episodic="YES",
                      external="1", distance="Cosine", device="CPU", tau="50",
                      query_cams="0,2", batch_size="none").resolved()
    assert (cfg.seed, cfg.steps, cfg.episodic, cfg.external) == (7, 2, True, True)
    assert (cfg.distance, cfg.device, cfg.tau, cfg.query_cams) == ("cosine", "cpu", 50.0, [0, 2])
    assert cfg.batch_size == 8                                      # none → the default


# case: the library API refuses the same values, naming the parameter (not a flag)
@pytest.mark.parametrize("field,value", [
    ("seed", -1), ("seed", 2**32), ("seed", 1.5), ("steps", 0), ("topk", True),
    ("episodic", "maybe"), ("lr", float("nan")), ("tau", 0.0), ("eps", 2.0),
    ("grounding", -1), ("workers", 2000), ("order", "random"), ("order", None),
])
def test_adapt_config_names_the_parameter(field, value):
    with pytest.raises(ParameterError) as refused:
        AdaptConfig(method="dart3", **{field: value}).resolved()
    assert refused.value.parameter == field
