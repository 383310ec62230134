"""Deprecated spellings of ``reid`` options, kept for one release (docs/cli.md).

Every concept has one visible flag. An old flag still works: :func:`rewrite` replaces it by
the new one in the argument list before typer parses it, and prints one line,
``warning: --old is deprecated — use --new (the old name is removed in the next release)``.
An entry applies to the commands whose path (``eval``, ``train bot``; ``*`` matches any
words) matches, and only where the command has the new flag and not the old one — so
``--K`` stays the C-DPCF paper symbol on ``reid fit-pooling``.

Old positional inputs/outputs (``reid store info STORE``) are hidden optional arguments of
their commands, resolved with :func:`positional_or_option`.
"""
from __future__ import annotations

import dataclasses
from fnmatch import fnmatchcase
from typing import Any, Sequence

from reidcli.cli.warning_lines import print_warning

REMOVAL = "the old name is removed in the next release"


@dataclasses.dataclass(frozen=True)
class Alias:
    """``old`` is a deprecated spelling of ``new`` on the commands matching ``commands``."""

    commands: str
    old: str
    new: str


ALIASES: tuple[Alias, ...] = (
    Alias("*", "--data-root", "--root"),
    Alias("adapt *", "--in", "--store"),
    Alias("train *", "--lambda", "--reg"),
    Alias("train *", "--dims", "--dim"),
    Alias("fit-pooling *", "--xqda-lambda", "--reg"),
    Alias("fit-pooling *", "--xqda-dims", "--dim"),
    Alias("eval", "--k1", "--rerank-k1"),
    Alias("eval", "--k2", "--rerank-k2"),
    Alias("eval", "--lambda", "--rerank-lambda"),
    Alias("eval", "--n-parts", "--parts"),
    Alias("train bot", "--P", "--ids-per-batch"),
    Alias("train bot", "--batch-ids", "--ids-per-batch"),
    Alias("train bot", "--K", "--images-per-id"),
    Alias("train *", "--max-train-images", "--max-images"),
    Alias("train *", "--pretrained", "--init"),
    Alias("train *", "--lr-step", "--lr-steps"),
    Alias("train *", "--milestones", "--lr-steps"),
    Alias("train *", "--gamma", "--lr-gamma"),
    Alias("data synth", "--param", "--option"),
    Alias("store import", "--metric", "--distance"),
    Alias("plot weight-maps", "--maps", "--num-maps"),
    Alias("plot ranklist", "--topk", "--max-rank"),
)


def deprecated(old: str, new: str) -> None:
    """The one deprecation line for ``old`` (a flag or ``the positional X``)."""
    print_warning(f"{old} is deprecated — use {new} ({REMOVAL})")


def resolve_command(root, args: Sequence[str]) -> tuple[list[str], Any, int]:
    """(command path words, click command, index of its first argument) that ``args`` run
    on the click group ``root`` (the path stops at the first word that is not a
    subcommand)."""
    from typer.core import TyperGroup

    command, path, i = root, [], 0
    while isinstance(command, TyperGroup) and i < len(args):
        word = args[i]
        if word == "--":
            break
        if word.startswith("-"):                    # the groups' options take no values
            i += 1
            continue
        sub = command.commands.get(word)
        if sub is None:
            break
        command, i = sub, i + 1
        path.append(word)
    return path, command, i


def option_names(command) -> set[str]:
    """Every flag of a click command (``--x/--no-x`` both)."""
    names: set[str] = set()
    for param in getattr(command, "params", ()):
        names.update(getattr(param, "opts", ()))
        names.update(getattr(param, "secondary_opts", ()))
    return names


def aliases_for(path: Sequence[str], command) -> dict[str, str]:
    """old → new for the command at ``path``."""
    where = " ".join(path)
    flags = option_names(command)
    return {a.old: a.new for a in ALIASES
            if fnmatchcase(where, a.commands) and a.new in flags and a.old not in flags}


def rewrite(root, args: Sequence[str]) -> list[str]:
    """``args`` with every deprecated flag of the command they run replaced by its new name
    (also ``--old=value``); one warning line per deprecated flag used."""
    args = list(args)
    path, command, start = resolve_command(root, args)
    table = aliases_for(path, command)
    if not table:
        return args
    warned: set[str] = set()
    for i in range(start, len(args)):
        word = args[i]
        if word == "--":
            break
        name, eq, value = word.partition("=")
        new = table.get(name)
        if new is None:
            continue
        args[i] = new + eq + value
        if name not in warned:
            warned.add(name)
            deprecated(name, new)
    return args


def positional_or_option(positional, option, *, metavar: str, flag: str, example: str = ""):
    """The value of an input/output given as ``flag`` or, deprecated, as the old positional
    ``metavar`` (one warning line); UsageError when neither or both are given."""
    from reidcli.errors import UsageError

    if positional is not None:
        if option is not None:
            raise UsageError(f"{metavar} is given twice (as an argument and as {flag})",
                             f"give only {flag} {metavar}")
        deprecated(f"the positional {metavar}", f"{flag} {metavar}")
        return positional
    if option is None:
        raise UsageError(f"missing option {flag}", f"give {flag} {metavar}"
                         + (f", e.g. {example}" if example else ""))
    return option


__all__ = ["ALIASES", "Alias", "aliases_for", "deprecated", "positional_or_option",
           "resolve_command", "rewrite"]
