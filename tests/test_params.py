"""The one validation system (reidcli.params): every registered method's parameters are
constrained; shared constraints (PRECISION) accept every spelling and record one; every check
raises ParameterError naming the parameter."""
from __future__ import annotations

import pytest

from reidcli import registry
from reidcli.errors import ParameterError
from reidcli.params import (BOOL, NONE, PRECISION, TEXT, FloatList, Interval, Options,
                            check_param)


@pytest.mark.parametrize("stage", ["train", "fit-pooling", "adapt"])
def test_every_registered_parameter_has_a_constraint(stage):
    found = registry.methods(stage)
    assert found
    bare = [(m.name, p.name) for m in found for p in m.parameters if not p.constraints]
    assert bare == [], f"parameters without constraints: {bare}"


@pytest.mark.parametrize("spelling, canonical", [("float32", "float32"), ("fp32", "float32"),
                                                 ("FP32", "float32"), ("bf16", "bf16"),
                                                 ("bfloat16", "bf16")])
def test_precision_accepts_every_spelling_and_records_the_canonical_one(spelling, canonical):
    from reidcli.evaluation.run import StoreEvalRequest

    assert check_param("x", "precision", spelling, PRECISION) == canonical
    dart3 = {p.name: p for p in registry.get("dart3", "adapt").parameters}["precision"]
    assert dart3.constraints == (PRECISION,)
    request = StoreEvalRequest(store="s.h5", precision=spelling)
    assert request.precision == canonical                  # what the report records


def test_precision_error_names_the_parameter():
    from reidcli.evaluation.errors import EvaluationError
    from reidcli.evaluation.run import StoreEvalRequest

    with pytest.raises(ParameterError, match=r"precision='fp8' must be one of float32, bf16"
                       ) as info:
        StoreEvalRequest(store="s.h5", precision="fp8")
    assert info.value.parameter == "precision" and isinstance(info.value, EvaluationError)
    assert info.value.for_flag("--precision").message.startswith(
        "--precision 'fp8' must be one of float32, bf16")


def test_check_param_takes_the_hint_and_the_stage_error():
    class StageError(ParameterError):
        pass

    with pytest.raises(StageError, match="must be an integer ≥ 1 — use 5") as info:
        check_param("owner", "count", 0, Interval(int, 1), todo="use 5", error=StageError)
    assert (info.value.owner, info.value.parameter, info.value.value) == ("owner", "count", 0)


def test_options_record_the_declared_spelling():
    choice = Options(("A", "B"), aliases={"test_a": "A"})
    assert [check_param("o", "p", v, choice) for v in ("a", "B", "TEST_A")] == ["A", "B", "A"]
    with pytest.raises(ParameterError, match="must be one of A, B"):
        check_param("o", "p", "c", choice)


@pytest.mark.parametrize("dataset, options, parameter", [
    ("cuhk03", {"subset": "both"}, "subset"),
    ("grid", {"protocol": "x"}, "protocol"),
    ("msmt17", {"version": "v3"}, "version"),
    ("person30k", {"test_subset": "D"}, "test_subset"),
    ("sysu_mm01", {"draws": "random"}, "draws"),
    ("viper", {"probe_cam": "c"}, "probe_cam"),
])
def test_dataset_options_raise_the_one_parameter_error(tmp_path, dataset, options, parameter):
    from reidcli import data

    with pytest.raises(ParameterError, match="must be one of") as info:
        data.load(dataset, tmp_path, **options)
    assert info.value.parameter == parameter and info.value.owner == dataset


def test_cli_type_decides_the_generated_option_type():
    from reidcli.cli.estimator_commands import _option_type
    from reidcli.registry import Parameter

    assert Interval(int, 0).cli_type is int and Interval(float).cli_type is float
    assert BOOL.cli_type is bool and TEXT.cli_type is str and FloatList().cli_type is str
    kinds = {(Interval(int, 1),): int, (Interval(int, 1), Interval(float, 0)): float,
             (NONE, Interval(float, 0)): float, (BOOL,): bool, (PRECISION,): str,
             (NONE, TEXT): str, (): str}
    assert {c: _option_type(Parameter("p", None, c)) for c in kinds} == kinds
