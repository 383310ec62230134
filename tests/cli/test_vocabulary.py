"""One name per concept (docs/cli.md): the help of every command, no second spelling,
per-method option lists and library warnings as one line naming a real flag."""
from __future__ import annotations

import io
import warnings

import numpy as np
import pytest

from reidcli.cli.main import _register, app
from tests.cli.helpers import run_cli

@pytest.fixture(scope="module")
def tree():
    """The click command tree with every generated method command."""
    from typer.main import get_command

    from reidcli.cli import help_format

    for stage in ("train", "fit-pooling", "adapt"):
        _register([stage])
    help_format.install()
    return get_command(app)


def _leaves(group, path=()):
    commands = getattr(group, "commands", None)
    if commands is None:
        yield path, group
        return
    for name, command in commands.items():
        yield from _leaves(command, (*path, name))


def _options(command) -> set[str]:
    return {flag for p in command.params if not getattr(p, "hidden", False)
            for flag in (*p.opts, *p.secondary_opts)}


def test_no_bool_metavar_and_no_doubled_default_anywhere(capsys, tree):
    groups = [()] + [tuple(p) for p, _ in _leaves(tree)]
    seen = set()
    for path in groups:
        for depth in range(len(path) + 1):
            words = path[:depth]
            if words in seen:
                continue
            seen.add(words)
            code, out, err = run_cli(capsys, *words, "--help")
            assert code == 0, (words, err)
            assert "<bool>" not in out, words
    assert len(seen) > 30                                  # every stage and method
    for path, command in _leaves(tree):
        for param in command.params:
            text = (getattr(param, "help", None) or "").lower()
            shows_default = bool(getattr(param, "show_default", False)) and \
                param.default not in (None, False) and not getattr(param, "is_flag", False)
            assert text.count("(default") + shows_default <= 1, (path, param.name, text)


def test_per_method_help_lists_only_what_the_method_reads(tree):
    def flags(*path):
        command = tree
        for word in path:
            command = command.commands[word]
        return _options(command)

    norm = flags("adapt", "norm")
    assert {"--store", "--out", "--stats", "--eps"} <= norm
    assert not {"--tau", "--temp-k", "--tent-logits", "--model", "--mode", "--lr"} & norm
    assert not {"--mode", "--model", "--no-external", "--temp-k"} & flags("adapt", "dart3-lite")
    assert {"--mode", "--model", "--no-external", "--tau"} <= flags("adapt", "dart3")
    assert "--tau" not in flags("adapt", "tent") and "--tent-logits" in flags("adapt", "tent")
    assert {"--temp-k", "--model"} <= flags("adapt", "temp")
    assert flags("adapt", "none") & {"--seed", "--stats", "--batch-size"} == set()
    assert "--kernel" not in flags("train", "kissme") and "--dim" in flags("train", "kissme")
    assert "--kernel" in flags("train", "klfda") and "--kernel" not in flags("train", "lfda")
    assert not {"--K", "--E"} & flags("fit-pooling", "avgp")
    assert {"--K", "--E", "--G", "--reg", "--dim"} <= flags("fit-pooling", "cdpcf")
    for method in ("xqda", "lfda", "klfda", "rpcca", "warca"):
        assert "--reg" in flags("train", method) and "--lambda" not in flags("train", method)


def test_hidden_options_of_other_methods_still_parse_and_say_they_do_nothing(capsys,
                                                                              tmp_path):
    code, _, err = run_cli(capsys, "adapt", "norm", "--store", tmp_path / "missing.h5",
                           "--out", tmp_path / "o.h5", "--tau", "5")
    lines = err.splitlines()
    assert code == 2 and lines[0].startswith("warning: --tau has no effect on reid adapt norm")
    assert lines[1].startswith("error: ") and len(lines) == 2


def test_plot_help_lists_all_six_kinds(capsys):
    code, out, _ = run_cli(capsys, "plot", "--help")
    assert code == 0
    for kind in ("cmc", "tsne", "weight-maps", "ranklist", "training", "distances"):
        assert f" {kind} " in out, kind
    code, out, _ = run_cli(capsys, "--help")
    assert "training" in out and "distance" in out


def _npz(tmp_path, n_ids=8, per_id=6):
    rng = np.random.default_rng(0)
    pid = np.repeat(np.arange(1, n_ids + 1), per_id)        # native ids (pid 0: distractor)
    camid = np.tile([0, 1], n_ids * per_id // 2)
    feats = (rng.standard_normal((len(pid), 6)) + pid[:, None]).astype(np.float32)
    split = np.where(pid <= n_ids // 2, "train", np.where(np.arange(len(pid)) % 2, "query",
                                                           "gallery"))
    np.savez(tmp_path / "e.npz", features=feats, pid=pid, camid=camid, split=split)
    return tmp_path / "e.npz"


def test_one_spelling_per_input_and_no_positional_store(capsys, tmp_path):
    npz = _npz(tmp_path)
    code, out, err = run_cli(capsys, "store", "import", "--out", tmp_path / "s.h5", "--npz", npz,
                             "--distance", "cosine")
    assert code == 0 and err == "", err
    code, out, err = run_cli(capsys, "store", "info", "--store", tmp_path / "s.h5", "--json")
    assert code == 0 and '"cosine"' in out
    code, _, err = run_cli(capsys, "store", "info")
    assert code == 2 and err.startswith("error: missing option --store")
    for args in (("store", "info", tmp_path / "s.h5"),            # no positional STORE
                 ("store", "import", "--out", tmp_path / "t.h5", "--npz", npz, "--metric",
                  "cosine")):                                     # no second spelling
        code, _, err = run_cli(capsys, *args)
        assert code == 2 and err.startswith("error: ") and len(err.splitlines()) == 1, err


def test_library_warning_is_one_line_naming_the_running_commands_flags(capsys, tmp_path,
                                                                       monkeypatch):
    from reidcli.metric.xqda import XQDA
    from reidcli.naming import param

    assert run_cli(capsys, "store", "import", "--out", tmp_path / "s.h5", "--npz",
                   _npz(tmp_path))[0] == 0
    fit = XQDA.fit

    def warning_fit(self, *args, **kwargs):
        warnings.warn(f"the metric is weak — try {param('lam', 0.01)}, "
                      f"{param('normalize', 'l2')} or {param('device', 'cpu')}", UserWarning)
        return fit(self, *args, **kwargs)

    monkeypatch.setattr(XQDA, "fit", warning_fit)
    with warnings.catch_warnings():
        warnings.simplefilter("once")
        code, _, err = run_cli(capsys, "train", "xqda", "--store", tmp_path / "s.h5", "--out",
                               tmp_path / "m.h5", "--quiet")
    assert code == 0, err
    assert err == ("warning: the metric is weak — try --reg 0.01, --normalize l2 or "
                   "--param device=cpu\n")


def test_warning_prints_above_a_live_progress_display():
    from rich.console import Console

    from reidcli import progress
    from reidcli.cli.warning_lines import print_warning

    buffer = io.StringIO()
    progress.set_console(Console(file=buffer, force_terminal=True, width=80))
    try:
        with progress.task("working", total=3, enabled=True) as t:
            t.advance()
            assert progress._live is not None
            print_warning("something odd — do this\n(detail)")
    finally:
        progress.set_console(None)
    text = buffer.getvalue()
    assert text.count("warning: something odd — do this (detail)") == 1
