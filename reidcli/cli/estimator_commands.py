"""Generate one typer command per registered estimator (``reid train <metric>``,
``reid fit-pooling <method>``) from the registry: each method's own parameters become its
options, with its defaults and help; nothing here names a method."""
from __future__ import annotations

import inspect
from typing import Any, Callable, List, Optional

import typer

from reidcli.params import BOOL, NONE, Interval
from reidcli.registry import MethodInfo, Parameter

PARAM_HELP = "Any parameter of the method as key=value (repeatable); see `reid methods`."


def _option_type(param: Parameter) -> type:
    kinds = [c for c in param.constraints if c is not NONE]
    if kinds and all(c is BOOL for c in kinds):
        return bool
    if kinds and all(isinstance(c, Interval) for c in kinds):
        return int if all(c.kind is int for c in kinds) else float
    return str


def _option(param: Parameter) -> inspect.Parameter:
    kind = _option_type(param)
    default = "none" if param.default is None else param.default
    text = f"{param.help} (default: {default})".strip()
    if kind is bool:
        flag = param.cli_flag
        info = typer.Option(None, f"{flag}/--no-{flag[2:]}", help=text, show_default=False)
    else:
        info = typer.Option(None, param.cli_flag, help=text, show_default=False)
    return inspect.Parameter(param.name, inspect.Parameter.KEYWORD_ONLY, default=info,
                             annotation=Optional[kind])


def estimator_command(info: MethodInfo, common: list[inspect.Parameter],
                      run: Callable[[MethodInfo, dict[str, Any], dict[str, Any]], None]):
    """A typer command for ``info``: the ``common`` options of its stage, then one option per
    visible parameter and ``--param key=value``. ``run(info, given_params, common_values)``
    does the work; ``given_params`` holds only the parameters the user set."""
    visible = [p for p in info.parameters if p.cli]
    common_names = {p.name for p in common}
    clash = [p.name for p in visible if p.name in common_names or p.name == "param"]
    if clash:
        raise ValueError(f"{info.name}: parameters {clash} clash with the stage's options")
    signature = [*common, *(_option(p) for p in visible),
                 inspect.Parameter("param", inspect.Parameter.KEYWORD_ONLY,
                                   default=typer.Option(None, "--param", help=PARAM_HELP),
                                   annotation=Optional[List[str]])]

    def command(**values: Any) -> None:
        from reidcli.cli.data import parse_key_values

        given = {p.name: values[p.name] for p in visible if values.get(p.name) is not None}
        given.update(parse_key_values(values.pop("param", None), "--param"))
        run(info, given, {name: values[name] for name in common_names})

    command.__signature__ = inspect.Signature(signature)
    command.__annotations__ = {p.name: p.annotation for p in signature}
    command.__doc__ = f"{info.summary} ({info.paper})"
    command.__name__ = info.name.replace("-", "_")
    return command


def add_estimator_commands(app: typer.Typer, methods: list[MethodInfo],
                           common: list[inspect.Parameter], run) -> None:
    """Register one generated command per method on ``app``."""
    for info in methods:
        app.command(info.name, help=f"{info.summary} ({info.paper})")(
            estimator_command(info, common, run))


def common_option(name: str, annotation, default, *flags: str, help: str) -> inspect.Parameter:
    """A stage-level option (``--store``, ``--out``, …) as a signature parameter."""
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY,
                             default=typer.Option(default, *flags, help=help),
                             annotation=annotation)
