"""The `reid` entry point: stages listed, version, one-line errors with exit code 2."""
from __future__ import annotations

import subprocess
import sys

import reidcli
from tests.cli.helpers import run_cli

STAGES = ("data", "store", "extract", "train", "fit-pooling", "adapt", "eval", "plot", "demo")


def test_help_lists_every_stage(capsys):
    code, out, _ = run_cli(capsys, "--help")
    assert code == 0
    for stage in STAGES:
        assert stage in out


def test_version(capsys):
    code, out, _ = run_cli(capsys, "--version")
    assert code == 0 and out.strip() == f"reidcli {reidcli.__version__}"


def test_user_error_is_one_line_exit_2(capsys, tmp_path):
    code, out, err = run_cli(capsys, "store", "info", "--store", tmp_path / "missing.h5")
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("error: store ") and "does not exist — " in lines[0]
    assert "Traceback" not in err


def test_debug_shows_traceback(capsys, tmp_path):
    code, _, err = run_cli(capsys, "store", "info", "--store", tmp_path / "missing.h5", "--debug")
    assert code == 2
    assert "Traceback" in err and err.strip().splitlines()[-1].startswith("error: ")


def test_unknown_option_is_usage_error(capsys):
    code, _, err = run_cli(capsys, "store", "info", "--no-such-option")
    assert code == 2 and "no-such-option" in err


def test_console_script_runs():
    proc = subprocess.run([sys.executable, "-m", "reidcli.cli.main", "--help"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "fit-pooling" in proc.stdout


def test_typer_usage_errors_are_one_line_too(capsys):
    code, _, err = run_cli(capsys, "eval", "--store", "x.h5", "--max-rank", "abc")
    assert code == 2 and "Traceback" not in err and "╭" not in err
    assert err.strip().count("\n") == 0
    assert err.startswith("error: Invalid value for '--max-rank'") and "reid eval --help" in err
    code, _, err = run_cli(capsys, "train", "xqda", "--bogus", "1")
    assert code == 2 and err.startswith("error: No such option: --bogus")
