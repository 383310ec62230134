"""Run the `reid` CLI in-process and capture its exit code and output."""
from __future__ import annotations

import pytest

from reidcli.cli.main import main


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    """``(exit_code, stdout, stderr)`` of ``reid ARGV...``."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as info:
        main([str(a) for a in argv])
        raise SystemExit(0)
    out, err = capsys.readouterr()
    code = info.value.code
    return (0 if code is None else int(code)), out, err


def spy(monkeypatch, module, name: str) -> list:
    """Record what ``module.name`` returns while the CLI calls it (list filled per call)."""
    returned = []
    real = getattr(module, name)

    def wrapper(*args, **kwargs):
        returned.append(real(*args, **kwargs))
        return returned[-1]

    monkeypatch.setattr(module, name, wrapper)
    return returned
