"""Generate one typer command per registered estimator (``reid train <metric>``,
``reid fit-pooling <method>``) from the registry: each method's own parameters become its
options, with its defaults and help (only the parameters the method has: ``--help`` shows
nothing another method reads); nothing here names a method."""
from __future__ import annotations

import inspect
from typing import Any, Callable, List, Optional

import typer

from reidcli.cli.flags import parameter_flag
from reidcli.params import NONE
from reidcli.registry import MethodInfo, Parameter

PARAM_HELP = "Any parameter of the method as key=value (repeatable); see `reid methods`."


def _option_type(param: Parameter) -> type:
    """The type typer parses the option to: the constraints' common
    :attr:`~reidcli.params.Constraint.cli_type` (int and float → float), else ``str`` (the
    constraints then parse the text: ``"none"``, ``"1e-3,1e-2"``)."""
    types = {c.cli_type for c in param.constraints if c is not NONE}
    if types == {bool}:
        return bool
    if types and types <= {int, float}:
        return int if types == {int} else float
    return str


def _help(param: Parameter) -> str:
    """The parameter's help with its default — once: a help that already states its default
    (``(default: keep `variance` …)``) is not given a second one."""
    if "default" in param.help.lower():
        return param.help
    default = "none" if param.default is None else param.default
    return f"{param.help} (default: {default})".strip()


def _option(method: str, param: Parameter, hidden: bool = False) -> inspect.Parameter:
    """The typer option of ``param`` of ``method``; ``hidden`` ones (set with ``--param``)
    also accept their flag, without showing it in ``--help``."""
    kind = _option_type(param)
    flag = parameter_flag(method, param.name)
    flags = (f"{flag}/--no-{flag[2:]}",) if kind is bool else (flag,)
    info = typer.Option(None, *flags, help=_help(param), show_default=False, hidden=hidden)
    return inspect.Parameter(param.name, inspect.Parameter.KEYWORD_ONLY, default=info,
                             annotation=Optional[kind])


def method_flags(info: MethodInfo) -> dict[str, str]:
    """parameter → the flag that sets it on ``info``'s command: its own option, or
    ``--param name`` (:func:`reidcli.naming.param` adds ``=value``) for a parameter shown
    only through ``--param``."""
    return {p.name: parameter_flag(info.name, p.name) if p.cli else f"--param {p.name}"
            for p in info.parameters}


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
    taken = {f for p in common for f in p.default.param_decls} | {"--param"} | \
        {parameter_flag(info.name, p.name) for p in visible}
    # a --param-only parameter keeps a hidden flag of its own unless that name is taken
    quiet = [p for p in info.parameters if not p.cli and p.name not in common_names
             and parameter_flag(info.name, p.name) not in taken and p.name != "param"]
    options = [*visible, *quiet]
    signature = [*common, *(_option(info.name, p) for p in visible),
                 *(_option(info.name, p, hidden=True) for p in quiet),
                 inspect.Parameter("param", inspect.Parameter.KEYWORD_ONLY,
                                   default=typer.Option(None, "--param", help=PARAM_HELP),
                                   annotation=Optional[List[str]])]

    def command(**values: Any) -> None:
        from reidcli.cli.data import parse_key_values

        given = {p.name: values[p.name] for p in options if values.get(p.name) is not None}
        given.update(parse_key_values(values.pop("param", None), "--param"))
        run(info, given, {name: values[name] for name in common_names})

    command.__signature__ = inspect.Signature(signature)
    command.__annotations__ = {p.name: p.annotation for p in signature}
    command.__doc__ = f"{info.summary} ({info.paper})"
    command.__name__ = info.name.replace("-", "_")
    return command


def add_estimator_commands(app: typer.Typer, methods: list[MethodInfo],
                           common: list[inspect.Parameter], run) -> None:
    """Register one generated command per method on ``app`` (once: a method whose command
    ``app`` has is skipped, so an invocation may add the commands a previous one lacked)."""
    have = {c.name for c in app.registered_commands}
    for info in methods:
        if info.name in have:
            continue
        app.command(info.name, help=f"{info.summary} ({info.paper})")(
            estimator_command(info, common, run))


def common_option(name: str, annotation, default, *flags: str, help: str,
                  **extra: Any) -> inspect.Parameter:
    """A stage-level option (``--store``, ``--out``, …) as a signature parameter."""
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY,
                             default=typer.Option(default, *flags, help=help, **extra),
                             annotation=annotation)


def invoked_methods(stage: str, also: tuple[str, ...] = ()) -> list[MethodInfo]:
    """The methods of ``stage`` whose commands this invocation needs: only the method the
    command line names when its stage's index knows it (`reid train xqda …` imports XQDA's
    module alone), none when it names a method of a stage in ``also`` that the same command
    runs (`reid train bot`: a network trainer), else every method (`reid train --help`, a
    misspelt name: typer's error then lists them all)."""
    from reidcli import registry
    from reidcli.cli.context import invoked_command

    words = [a for a in invoked_command()[1:] if not a.startswith("-")]
    if len(words) > 1 and words[0] == stage:            # the stage's command is its name
        name = words[1]
        if name in registry.METHODS.index([stage]):
            return [registry.get(name, stage)]
        if also and name in registry.METHODS.index(also):
            return []
    return registry.methods(stage)
