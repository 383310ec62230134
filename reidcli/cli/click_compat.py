"""The click that typer runs on, whichever typer is installed: typer ≥ 0.26 vendors it as
``typer._click`` (and needs no ``click`` package); older typer depends on ``click`` itself.
Every ``reid`` module takes click names from here (docs/cli.md "Supported systems")."""
from __future__ import annotations

try:                                        # typer ≥ 0.26: its own copy of click
    from typer._click import exceptions
    from typer._click.globals import get_current_context
except ImportError:                         # older typer: the click package it depends on
    from click import exceptions
    from click.globals import get_current_context

ClickException = exceptions.ClickException


class _NeverRaised(Exception):
    """Stands for an exception this click version does not have."""


#: click ≥ 8.2 raises it for a bare group (its message is the help); older click prints the
#: help itself and exits 0
NoArgsIsHelpError = getattr(exceptions, "NoArgsIsHelpError", _NeverRaised)



# -- option values without pydantic ----------------------------------------------------------
#: typer ≥ 0.29 converts every option's value — a default too — through a pydantic
#: TypeAdapter built per option on first use (~3 ms each, and pydantic's import): `reid eval`'s
#: 31 options cost more than its store read. The plain cases below give the very value typer
#: would (None; a str for a str option; an int/float default for its own type; a path typed by
#: the user, checked by typer's own path rules); every other value goes through typer's own
#: conversion, so its messages for bad values are unchanged.
_SLOW = object()


def _plain(descriptor) -> bool:
    info = descriptor.parameter_info
    return (info.parser is None and descriptor.file_annotation is None
            and not descriptor.is_choice and info.min is None and info.max is None
            and not info.clamp)


def _fast_leaf(annotation, info, value, param, ctx, coerce_path):
    from pathlib import Path

    if annotation is str and type(value) is str:
        return value
    if annotation in (int, float) and type(value) is annotation:
        return value
    if annotation is Path and type(value) is str and info.path_type is None:
        return coerce_path(Path(value), info, path_type=Path, param=param, ctx=ctx)
    return _SLOW


class _LazyRuntimeParam:
    """Stands for typer's runtime conversion of one option: plain values are converted here,
    anything else by typer's own (built on the first such value)."""

    def __init__(self, param, build, coerce_path):
        self._param, self._build, self._coerce_path = param, build, coerce_path
        self._real = None

    def coerce(self, value, param, ctx):
        multi = param.multiple or param.nargs == -1
        if value is None:                      # as typer's RuntimeParam.coerce
            return () if multi else None
        descriptor = param.type_descriptor
        if _plain(descriptor):
            info = descriptor.parameter_info
            if multi and isinstance(value, (list, tuple)) and descriptor.is_list:
                item_type = (getattr(descriptor.annotation, "__args__", None) or (None,))[0]
                items = [_fast_leaf(item_type, info, v, param, ctx, self._coerce_path)
                         for v in value]
                if all(v is not _SLOW for v in items):
                    return items
            elif not multi:
                out = _fast_leaf(descriptor.annotation, info, value, param, ctx,
                                 self._coerce_path)
                if out is not _SLOW:
                    return out
        if self._real is None:
            self._real = self._build(descriptor)
        return self._real.coerce(value, param=param, ctx=ctx)


_FAST_COERCION: list[bool] = []


def install_fast_coercion() -> None:
    """Give typer's options the conversion above (idempotent; a typer without per-option
    runtime conversion is left as it is)."""
    if _FAST_COERCION:
        return
    _FAST_COERCION.append(True)
    try:
        from typer import core
        from typer._coercion import build_runtime_param
        from typer._param_types import coerce_cli_path
    except ImportError:
        return
    cls = getattr(core, "_TyperParameter", None)
    if cls is None or not hasattr(cls, "get_runtime_param"):
        return

    def get_runtime_param(self):
        if self._runtime_param is None:
            self._runtime_param = _LazyRuntimeParam(self, build_runtime_param, coerce_cli_path)
        return self._runtime_param

    cls.get_runtime_param = get_runtime_param


__all__ = ["ClickException", "NoArgsIsHelpError", "get_current_context", "install_fast_coercion"]
