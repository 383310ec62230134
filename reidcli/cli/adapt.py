"""`reid adapt METHOD` — test-time adaptation of a store's query features (thin CLI over
:func:`reidcli.adapt.adapt_store`; docs/methods/dart3.md).

One command per adaptation method of the registry, generated from the declarations: the
shared settings the method reads (:data:`reidcli.adapt.config.SETTINGS`, by the groups of
:func:`~reidcli.adapt.config.setting_groups`), then the method's own parameters (its
registration), each with its constraints, help and the method's default; nothing here names
a method. Options of the other methods and unread settings are still accepted, hidden, and
print one line saying they have no effect; ``--param key=value`` sets any setting or
parameter of the method.
"""
from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path
from typing import Any, Optional

import typer

app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Test-time adaptation of a store's features (DART3, Norm, TENT, TEMP).")

PARAM_HELP = ("Any setting of the method as key=value (repeatable), e.g. tau=50; see "
              "`reid methods --stage adapt` and docs/methods/dart3.md.")


def _cli(name: str, annotation, default, flag: str, help: str) -> inspect.Parameter:
    from reidcli.cli.estimator_commands import common_option
    return common_option(name, annotation, default, flag, help=help)


def _io_options() -> list[inspect.Parameter]:
    """The command's own options before the settings (every method)."""
    return [_cli("store", Path, ..., "--store", "Input store (.h5)."),
            _cli("out", Path, ..., "--out", "Adapted store to write (.h5).")]


def _model_options() -> list[inspect.Parameter]:
    """The options of a method that re-runs the backbone (not adaptation settings)."""
    return [_cli("model", Optional[Path], None, "--model", "Run directory / model.pt of reid "
                 "train, or a fast-reid / torchreid / reid-strong-baseline / layumi "
                 "checkpoint recognised from its keys (docs/models.md)."),
            _cli("images_root", Optional[Path], None, "--images-root", "Folder the store's "
                 "relative image paths are read under."),
            _cli("save_model", Optional[Path], None, "--save-model", "Write the adapted model "
                 "(BN γ/β) here.")]


def _finish_options() -> list[inspect.Parameter]:
    return [_cli("drop_convmaps", bool, False, "--drop-convmaps", "Do not copy the input's "
                 "conv maps into the output."),
            _cli("force", bool, False, "--force", "Overwrite --out."),
            _cli("quiet", bool, False, "--quiet", "No progress or summary.")]


def _hide(option: inspect.Parameter) -> inspect.Parameter:
    """``option`` accepted but not listed; None = not given."""
    info = option.default
    annotation = option.annotation
    if not str(annotation).startswith("typing.Optional"):
        annotation = Optional[annotation]
    return option.replace(default=typer.Option(None, *info.param_decls, help=info.help,
                                               hidden=True), annotation=annotation)


def setting_flag(method: str, p) -> str:
    """The flag that sets parameter ``p`` away from its default (``--no-external`` for a
    boolean that defaults to true)."""
    from reidcli.cli.estimator_commands import _option_type
    from reidcli.cli.flags import parameter_flag

    flag = parameter_flag(method, p.name)
    return "--no-" + flag[2:] if _option_type(p) is bool and p.default is True else flag


@dataclasses.dataclass
class _Plan:
    """What the generated command of one method holds: its signature, the settings it passes
    on, those it warns about, and the flag of every setting (errors name it)."""

    signature: list[inspect.Parameter]
    passed: set[str]
    ignored: dict[str, str]              # option name → its flag
    flags: dict[str, str]


def plan_command(info, foreign: list) -> _Plan:
    """The options of ``reid adapt <info.name>``: the settings it reads and its own parameters
    listed; ``foreign`` parameters (other methods') and the settings it does not read
    accepted, hidden, ignored with a warning."""
    from reidcli.adapt.config import SETTINGS, own_parameters, read_settings, setting_groups
    from reidcli.cli.estimator_commands import _option

    name, groups = info.name, setting_groups(info)
    setting = _setting_option(info)
    read = set(read_settings(info))
    own = own_parameters(info)
    model = _model_options()
    signature = _listed_options(info, read, own, setting, model, "model" in groups)
    _check_own_names(name, own)
    unread = [setting(p, hidden=True) for p in SETTINGS if p.name not in read]
    unmodel = [_hide(o) for o in model] if "model" not in groups else []
    others = [_option(name, p, hidden=True) for p in foreign]
    extra, ignored = _ignored_options(signature, (*unread, *unmodel, *others))
    flags = {p.name: f"--param {p.name}" for p in (*SETTINGS, *own)}
    flags.update({p.name: setting_flag(name, p) for p in SETTINGS if p.name in read})
    flags.update({p.name: setting_flag(name, p) for p in own})
    passed = {p.name for p in SETTINGS if p.name in read} | {p.name for p in own}
    return _Plan([*signature, *extra, _param_option()], passed, ignored, flags)


def _setting_option(info):
    """``setting(p, hidden=False)``: the option of shared setting ``p`` on ``info``'s command,
    with the method's default (an alias's target's defaults, then its own)."""
    from reidcli.adapt.config import setting_defaults
    from reidcli.cli.estimator_commands import _option

    target = info
    if "alias_of" in info.extras:
        from reidcli.adapt.config import adapt_method
        target = adapt_method(info.extras["alias_of"][0])
    defaults = {**setting_defaults(target), **setting_defaults(info)}
    return lambda p, hidden=False: _option(info.name, dataclasses.replace(
        p, default=defaults.get(p.name, p.default)), hidden=hidden)


def _listed_options(info, read: set[str], own: list, setting, model: list[inspect.Parameter],
                    with_model: bool) -> list[inspect.Parameter]:
    """The command's signature before the ignored options: input/output, the settings of
    the group every method shares, the method's own parameters (the quiet ones hidden, last),
    the model options (``with_model``), the other settings read, the finishing options."""
    from reidcli.adapt.config import GROUPS, SETTINGS, fixed_values, merged_extras
    from reidcli.cli.estimator_commands import _option

    name = info.name
    quiet = set(merged_extras(info).get("hidden", ())) | set(fixed_values(info))
    listed = {"every": [], "other": []}
    for p in SETTINGS:
        if p.name in read:
            listed["every" if p.name in GROUPS["every"] else "other"].append(setting(p))
    visible_own = [_option(name, p) for p in own if p.name not in quiet]
    quiet_own = [_option(name, p, hidden=True) for p in own if p.name in quiet]
    return [*_io_options(), *listed["every"], *visible_own,
            *(model if with_model else []), *listed["other"], *_finish_options(),
            *quiet_own]


#: option names of reid adapt itself, which a method's parameter may not take
_RESERVED = {"store", "out", "model", "images_root", "save_model", "drop_convmaps", "force",
             "quiet", "param"}


def _check_own_names(name: str, own: list) -> None:
    """MethodRegistryError when method ``name`` declares a parameter named as an option of
    reid adapt itself."""
    from reidcli.errors import MethodRegistryError

    clash = [p.name for p in own if p.name in _RESERVED]
    if clash:
        raise MethodRegistryError(f"adaptation method {name} declares parameter {clash[0]!r}, "
                                  "a name reid adapt keeps for its own option",
                                  "rename the parameter")


def _ignored_options(signature: list[inspect.Parameter], candidates
                     ) -> tuple[list[inspect.Parameter], dict[str, str]]:
    """(hidden options to add, option name → flag) for the ``candidates`` whose name and
    flags no option of ``signature`` (or an earlier candidate) takes."""
    taken_names = {p.name for p in signature} | {"param"}
    ignored: dict[str, str] = {}
    extra: list[inspect.Parameter] = []
    for option in candidates:
        flags = set(option.default.param_decls[0].split("/"))
        taken = {f for o in (*signature, *extra) for d in o.default.param_decls
                 for f in d.split("/")}
        if option.name in taken_names or flags & taken:
            continue
        extra.append(option)
        taken_names.add(option.name)
        ignored[option.name] = option.default.param_decls[0].split("/")[0]
    return extra, ignored


def _param_option() -> inspect.Parameter:
    from typing import List
    return _cli("param", Optional[List[str]], None, "--param", PARAM_HELP)


def _make(info, plan: _Plan):
    method = info.name

    def command(**values: Any) -> None:
        from reidcli.adapt import AdaptConfig, adapt_store
        from reidcli.cli.context import invoked_command, set_flag_names
        from reidcli.cli.data import parse_key_values
        from reidcli.cli.warning_lines import print_warning
        from reidcli.progress import ENABLED

        set_flag_names(plan.flags)
        for name, flag in plan.ignored.items():
            if values.get(name) is not None:
                print_warning(f"{flag} has no effect on reid adapt {method} — drop it (see "
                              f"reid adapt {method} --help)")
        settings = {k: values[k] for k in plan.passed if values.get(k) is not None}
        settings.update(parse_key_values(values.get("param"), "--param"))
        own = {k: settings.pop(k) for k in list(settings) if k in ("method", "params")}
        cfg = AdaptConfig(method, params=own, **settings)
        quiet = bool(values.get("quiet"))
        result = adapt_store(values["store"], values["out"], cfg, model=values.get("model"),
                             images_root=values.get("images_root"),
                             save_model=values.get("save_model"),
                             force=bool(values.get("force")),
                             drop_convmaps=bool(values.get("drop_convmaps")),
                             progress=ENABLED and not quiet, command=invoked_command())
        if quiet:
            return
        a = result.adaptation
        mode = a.config.params.get("mode")
        label = a.config.method + (f" ({mode})" if mode else "")
        loop = a.loop
        extra = ""
        if loop is not None and loop.losses.size:
            extra = (f", {len(loop.losses)} batches × {loop.losses.shape[1]} steps, loss "
                     f"{loop.losses[0].mean():.4f} → {loop.losses[-1].mean():.4f}")
        typer.echo(f"wrote {result.out}: {label} on {result.num_queries} queries{extra}, "
                   f"{a.seconds:.2f} s ({a.per_query_seconds * 1e3:.2f} ms/query)", err=True)

    command.__signature__ = inspect.Signature(plan.signature)
    command.__annotations__ = {p.name: p.annotation for p in plan.signature}
    command.__name__ = method.replace("-", "_")
    command.__doc__ = info.summary
    return command


#: method → whether its command was built with the other methods' options
_BUILT: dict[str, bool] = {}


def _foreign(info, methods: list) -> list:
    """The parameters other adaptation methods declare (accepted by ``info``'s command)."""
    from reidcli.adapt.config import own_parameters

    mine = {p.name for p in own_parameters(info)}
    seen: dict[str, Any] = {}
    for other in methods:
        if "alias_of" in other.extras:
            continue
        for p in own_parameters(other):
            if p.name not in mine:
                seen.setdefault(p.name, p)
    return list(seen.values())


def _typed_flags(words: list[str]) -> set[str]:
    return {w.split("=", 1)[0] for w in words if w.startswith("--")}


def build_commands() -> None:
    """One command per adaptation method of the registry (each module declares its own);
    built once, only when ``reid adapt`` runs (the methods import torch) — only the invoked
    one when it is a method whose module imports no torch
    (:data:`reidcli.adapt.config.NUMPY_ONLY`) and the command line gives no option of the
    other methods."""
    from reidcli import registry
    from reidcli.adapt.config import NUMPY_ONLY
    from reidcli.cli.context import invoked_command

    args = invoked_command()[1:]
    words = [a for a in args if not a.startswith("-")]
    if words[:1] == ["adapt"] and len(words) > 1 and words[1] in NUMPY_ONLY \
            and words[1] not in _BUILT and not _BUILT:
        import reidcli.adapt.norm  # noqa: F401  (registers none and norm)
        info = registry.get(words[1], "adapt")
        plan = plan_command(info, [])
        known = {f for o in plan.signature for d in o.default.param_decls
                 for f in d.split("/")} | {"--help", "--debug"}
        if _typed_flags(args) <= known:
            _add(info, plan, complete=False)
            return
    found = registry.methods("adapt")
    for info in found:
        if not _BUILT.get(info.name):
            _add(info, plan_command(info, _foreign(info, found)), complete=True)


def _add(info, plan: _Plan, complete: bool) -> None:
    if info.name in _BUILT:                     # built alone before: replace it
        app.registered_commands[:] = [c for c in app.registered_commands
                                      if c.name != info.name]
    _BUILT[info.name] = complete
    app.command(info.name, help=info.summary)(_make(info, plan))
