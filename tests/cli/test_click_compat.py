"""Option values converted without pydantic (click_compat.install_fast_coercion) are the very
values typer's own conversion gives, and every other value still goes through typer's."""
from __future__ import annotations

from pathlib import Path

import pytest

from reidcli.cli.click_compat import _LazyRuntimeParam
from reidcli.cli.main import _register, app


def test_plain_values_convert_as_typer_does(tmp_path):
    from typer._click import Context
    from typer._coercion import build_runtime_param
    from typer._param_types import coerce_cli_path
    from typer.main import get_command

    _register(["eval"], every_stage=False)
    command = get_command(app).commands["eval"]
    ctx = Context(command)
    built = []

    def build(descriptor):
        built.append(descriptor)
        return build_runtime_param(descriptor)

    (tmp_path / "s.h5").write_bytes(b"")
    samples = [None, "auto", "", "0,3", 7, 0.5, 1800.0, str(tmp_path / "s.h5"),
               str(tmp_path / "missing.json"), (str(tmp_path / "s.h5"), "b.h5"), "12", "x"]
    checked = 0
    for param in command.params:
        if param.type_descriptor.annotation is bool:
            continue
        own = build_runtime_param(param.type_descriptor)
        for value in samples + [param.default]:
            try:
                expected = own.coerce(value, param=param, ctx=ctx)
            except Exception as exc:                    # typer refuses it: so must we
                with pytest.raises(type(exc)):
                    _LazyRuntimeParam(param, build, coerce_cli_path).coerce(value, param, ctx)
                continue
            got = _LazyRuntimeParam(param, build, coerce_cli_path).coerce(value, param, ctx)
            assert got == expected and type(got) is type(expected), (param.name, value)
            checked += 1
    assert checked > 60
    # given ints and floats, and odd values, went through typer's own conversion
    assert built and all(d.annotation in (int, float, str, Path) or d.is_list for d in built)


def test_bad_values_keep_typer_messages(capsys):
    from tests.cli.helpers import run_cli

    code, _, err = run_cli(capsys, "eval", "--store", "x.h5", "--max-rank", "abc")
    assert code == 2 and "Invalid value for '--max-rank'" in err
