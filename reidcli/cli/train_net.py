"""`reid train <trainer>` — network training, generated from the trainers' declarations (thin
CLI over :mod:`reidcli.training.engine`).

Every network trainer registered in the method registry (stage ``train-net``) gets a command
whose options are the shared settings every trainer shows (data, run directory, execution,
evaluation during training: :data:`reidcli.training.config.COMMON`) and the parameters its
module declares, with their defaults and help (docs/architecture.md, "Adding a network
trainer"). A value is read from the text of its option by the form of its constraint (a
number, a comma list, ``HxW``, ``key=value`` …); the library checks it and names the
parameter, mapped back to the flag here. Defaults are the papers' (docs/methods/pcb.md,
docs/methods/bot.md, docs/methods/dgvae.md, docs/methods/dmgnet.md); ``--preset`` shrinks
the model and schedule for CPU runs; explicit options win over both.
"""
from __future__ import annotations

import inspect
import os
from pathlib import Path
from typing import Any, List, Optional

import typer

#: parameter → flag where the flag is not ``--`` + the parameter's name (one spelling per
#: concept across trainers; docs/cli.md)
TRAIN_FLAGS = {"p": "--ids-per-batch", "k": "--images-per-id", "options": "--option",
               "eval_options": "--eval-option", "settings": "--set",
               "source_options": "--source-option", "stage_epochs": "--epochs"}
#: trainer → {parameter: flag} where one trainer spells a shared setting its own way
METHOD_TRAIN_FLAGS = {"dmgnet": {"train_split": "--source-split"}}

OUT_HELP = ("Run directory to create (written into OUT.partial, renamed onto OUT when the run "
            "is complete).")
RESUME_HELP = ("Continue the run in this directory (or its interrupted OUT.partial) from its "
               "last checkpoint, with its recorded options and data; only --epochs, "
               "--max-iters, --log-every, --checkpoint-every, --device, --workers may change.")
CONFIG_HELP = ("Train again from a recorded run's RUN/config.json (into a new --out); options "
               "given override it.")
FORCE_HELP = "Replace the run in an existing --out (only once the new run is complete)."


def parameter_flag(method: str, name: str) -> str:
    """The flag of parameter ``name`` on ``reid train <method>`` (without ``--no-``)."""
    return METHOD_TRAIN_FLAGS.get(method, {}).get(name) or TRAIN_FLAGS.get(name) \
        or "--" + name.replace("_", "-")


def _form(p) -> str:
    """How the option of parameter ``p`` is read: ``int``, ``float``, ``flag``, ``list``,
    ``size``, ``key_values``, ``named_key_values``, ``names``, ``cameras``, ``switch``,
    ``same_or_number`` or ``text``."""
    from reidcli.params import NONE, Interval
    from reidcli.training.config import Each, _Size

    kinds = [c for c in p.constraints if c is not NONE]
    for c in kinds:
        form = getattr(c, "form", None)
        if form:
            return form
        if isinstance(c, _Size):
            return "size"
        if isinstance(c, Each):
            return "list"
    if kinds and all(isinstance(c, Interval) for c in kinds):
        return "int" if all(c.kind is int for c in kinds) else "float"
    return "text"


def option_flag(method: str, p) -> str:
    """The flag typed for ``p``: ``--no-<name>`` for a flag that defaults to true."""
    flag = parameter_flag(method, p.name)
    return "--no-" + flag[2:] if _form(p) == "flag" and p.default is True else flag


def parameter_option(method: str, p) -> inspect.Parameter:
    """The typer option of the trainer parameter ``p`` (its flag, type and help)."""
    form = _form(p)
    flag = option_flag(method, p)
    annotation: Any = {"int": Optional[int], "float": Optional[float], "flag": bool,
                       "key_values": Optional[List[str]],
                       "named_key_values": Optional[List[str]]}.get(form, Optional[str])
    default = False if form == "flag" else None
    info = typer.Option(default, flag, help=p.help or None)
    return inspect.Parameter(p.name, inspect.Parameter.KEYWORD_ONLY, default=info,
                             annotation=annotation)


def cli_option(name: str, annotation, default, flag: str,
               help: str | None) -> inspect.Parameter:
    """A keyword-only typer option ``flag`` of a generated command."""
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY,
                             default=typer.Option(default, flag, help=help),
                             annotation=annotation)


def command_parameters(method: str) -> list:
    """The parameters ``reid train <method>`` shows, in their order: the run's (data, root,
    loader options, preset), the trainer's own list, then execution and evaluation."""
    from reidcli.training.config import EXECUTION_SETTINGS, RUN_SETTINGS, method_info, \
        method_parameters

    info = method_info(method)
    declared = {p.name: p for p in method_parameters(method)}
    skip = set()
    if info.extras.get("data_parameter"):
        skip = {"dataset", "options"}                 # its own parameter names the data
    run = [declared[n] for n in RUN_SETTINGS if n not in skip]
    execution = [declared[n] for n in EXECUTION_SETTINGS]
    fixed = set(RUN_SETTINGS) | set(EXECUTION_SETTINGS)
    own = [p for p in info.parameters if p.cli and p.name not in fixed]
    return [*run, *own, *execution]


def trainer_flags(method: str) -> dict[str, str]:
    """parameter → the flag that sets it (errors name it)."""
    from reidcli.training.config import method_parameters

    return {p.name: option_flag(method, p) for p in method_parameters(method)}


def _numbers(text: str, flag: str, constraint) -> list:
    from reidcli.errors import UsageError

    try:
        return [constraint.cast(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise UsageError(f"{flag} {text!r} is not a comma list of {constraint.noun}",
                         f"e.g. {flag} {constraint.example}") from None


def _size(text: str, flag: str):
    from reidcli.data.transforms import parse_size
    from reidcli.errors import UsageError

    try:
        return parse_size(text)
    except UsageError:
        raise UsageError(f"{flag} {text!r} is not HxW with sides ≥ 1",
                         f"e.g. {flag} 256x128 (height x width)") from None


def _named_key_values(items: List[str], flag: str) -> Optional[dict]:
    """``["market1501.protocol=x", ...]`` → ``{"market1501": {"protocol": "x"}}``."""
    from reidcli.cli.data import parse_key_values
    from reidcli.errors import UsageError

    out: dict = {}
    for item in items:
        name, dot, rest = item.partition(".")
        if not dot or "=" not in rest:
            raise UsageError(f"{flag} {item!r} is not NAME.KEY=VALUE",
                             f"e.g. {flag} cuhk03.labels=detected")
        out.setdefault(name.strip(), {}).update(parse_key_values([rest], flag))
    return out or None


def _switch(text: str, flag: str) -> bool:
    from reidcli.errors import UsageError

    low = text.strip().lower()
    if low not in ("on", "off", "true", "false"):
        raise UsageError(f"{flag} {text!r} is not on or off", f"e.g. {flag} on")
    return low in ("on", "true")


def _same_or_number(text: str, flag: str) -> Optional[float]:
    from reidcli.errors import UsageError

    try:
        return None if text.strip().lower() == "same" else float(text)
    except ValueError:
        raise UsageError(f"{flag} {text!r} is not 'same' or a number",
                         f"e.g. {flag} same") from None


def parse_value(method: str, p, value: Any) -> Any:
    """The value of ``p`` from its option as parsed by typer (None: not given)."""
    form, flag = _form(p), option_flag(method, p)
    if form == "flag":
        return (not p.default) if value else None
    if value is None:
        return None
    if form == "list":
        from reidcli.training.config import Each
        return _numbers(value, flag, next(c for c in p.constraints if isinstance(c, Each)))
    if form == "size":
        return _size(value, flag)
    if form == "key_values":
        from reidcli.cli.data import parse_key_values
        return parse_key_values(value, flag) or None
    if form == "named_key_values":
        return _named_key_values(value, flag)
    if form == "names":
        return [t.strip() for t in value.split(",") if t.strip()] or None
    if form == "cameras":
        from reidcli.cameras import parse_cameras
        return parse_cameras(value, p.name, owner="training")
    if form == "switch":
        return _switch(value, flag)
    if form == "same_or_number":
        return _same_or_number(value, flag)
    return value


def trainer_command(method: str):
    """The typer command of network trainer ``method``, generated from its declaration."""
    from reidcli.training.config import method_info

    info = method_info(method)
    params = command_parameters(method)
    signature = [parameter_option(method, p) for p in params]
    names = [p.name for p in params]
    at = names.index("preset") + 1 if "preset" in names else len(signature)
    signature[at:at] = [cli_option("out", Optional[Path], None, "--out", OUT_HELP),
                        cli_option("resume", Optional[Path], None, "--resume", RESUME_HELP)]
    signature += [cli_option("config", Optional[Path], None, "--config", CONFIG_HELP),
                  cli_option("force", bool, False, "--force", FORCE_HELP),
                  cli_option("quiet", bool, False, "--quiet", None)]
    taken = [f for o in signature for f in o.default.param_decls]
    if len(set(taken)) != len(taken) or len(set(o.name for o in signature)) != len(signature):
        from reidcli.errors import MethodRegistryError
        raise MethodRegistryError(f"network trainer {method} declares a parameter whose "
                                  "option reid train already has",
                                  "rename the parameter")

    def command(**values: Any) -> None:
        given = {p.name: parse_value(method, p, values.get(p.name)) for p in params}
        run_training(method, out=values.get("out"), resume=values.get("resume"),
                     config=values.get("config"), force=bool(values.get("force")),
                     quiet=bool(values.get("quiet")), **given)

    command.__signature__ = inspect.Signature(signature)
    command.__annotations__ = {o.name: o.annotation for o in signature}
    command.__name__ = method.replace("-", "_")
    command.__doc__ = info.summary
    return command


def run_training(method: str, *, out: Optional[Path], resume: Optional[Path],
                 force: bool, quiet: bool, config: Optional[Path] = None, **given) -> None:
    """Build the config, train, print a one-line summary (shared by every trainer).

    ``given`` holds the trainer's parameters as read from their options (None = not given).
    """
    from reidcli.cli.context import invoked_command, set_flag_names
    from reidcli.progress import ENABLED
    from reidcli.training.config import method_info
    from reidcli.training.engine import train_model

    info = method_info(method)
    flags = trainer_flags(method)
    set_flag_names(flags)
    _name_training_data(info, flags, given, fresh=resume is None and config is None)
    dataset, root, preset = (given.pop(n, None) for n in ("dataset", "root", "preset"))
    options = given.pop("options", None) or {}
    explicit = given
    recorded = _recorded_run(method, config, resume, out)
    run_dir = _run_directory(method, out, resume, dataset, recorded)
    cfg = _training_config(method, recorded, explicit, dataset, root, preset, options)
    again = None
    if resume is not None:          # the options given again: checked against the run's
        again = _given_again(force, explicit, dataset, root, preset, options)
    echo = (lambda text: None) if quiet else (lambda text: typer.echo(text, err=True))
    result = train_model(cfg, run_dir, resume=resume is not None, force=force,
                         progress=ENABLED and not quiet, command=invoked_command(), echo=echo,
                         given=again)
    if int(os.environ.get("RANK", "0")) != 0:          # torchrun: rank 0 reports
        return
    losses = "" if result.first_loss is None else \
        f", loss {result.first_loss:.4f} → {result.last_loss:.4f}"
    typer.echo(f"wrote {result.model_path}: {result.iterations} iterations{losses}, "
               f"{result.images_per_s:.1f} images/s, {result.seconds:.1f} s", err=True)


def _name_training_data(info, flags: dict[str, str], given: dict, *, fresh: bool) -> None:
    """Set ``given["dataset"]`` from a trainer's data parameter (DMG-Net's sources) or its
    optional ``--sources`` (BoT), refusing a missing or contradicting one."""
    from reidcli.errors import UsageError

    data_parameter = info.extras.get("data_parameter")
    if data_parameter:                      # e.g. DMG-Net's sources name the training data
        names = given.get(data_parameter)
        if not names and fresh:
            flag = flags[data_parameter]
            raise UsageError(f"{flag} is required", "e.g. " + " or ".join(
                f"{flag} {ex}" for ex in info.extras.get("data_example", ("NAME",))))
        given["dataset"] = "+".join(names) if names else None
    sources_parameter = info.extras.get("sources_parameter")
    if sources_parameter and given.get(sources_parameter):   # e.g. BoT --sources a,b
        if given.get("dataset") is not None:
            raise UsageError(f"{flags['dataset']} and {flags[sources_parameter]} contradict "
                             "each other", f"give one dataset with {flags['dataset']} or "
                             f"several with {flags[sources_parameter]}")
        given["dataset"] = "+".join(given[sources_parameter])


def _run_directory(method: str, out: Optional[Path], resume: Optional[Path],
                   dataset: Optional[str], recorded) -> Path:
    """The run directory: ``resume`` (``out`` may only repeat it) or ``out`` of a new run."""
    from reidcli.errors import UsageError

    if resume is not None:
        if out is not None and Path(out) != Path(resume):
            raise UsageError("--out and --resume name different run directories",
                             "give only --resume RUN_DIR")
        return resume
    if out is None or (dataset is None and recorded is None):
        raise UsageError("--dataset and --out are required",
                         f"e.g. reid train {method} --dataset market1501 --root DIR "
                         "--out runs/x (or --resume RUN_DIR)")
    return out


def _training_config(method: str, recorded, explicit: dict, dataset, root, preset,
                     options: dict):
    """The run's TrainConfig: the recorded run (``--config``) overridden by the options
    given, or the trainer's defaults (and ``preset``) with them."""
    if recorded is not None:               # --config: the recorded run ← the options given
        return recorded.config({**explicit, "dataset": dataset, "preset": preset,
                                "root": recorded.data_root if root is None else str(root),
                                "options": {**recorded.options.get("options", {}), **options}},
                               override_batch=explicit.get("batch_size") is not None)
    from reidcli.training.config import make_config

    return make_config(method, preset=preset, dataset=dataset or "synthetic",
                       root=None if root is None else str(root), options=options, **explicit)


def _given_again(force: bool, explicit: dict, dataset, root, preset, options: dict) -> dict:
    """The options a ``--resume`` gives again (checked against the run's record)."""
    from reidcli.errors import UsageError

    if force:
        raise UsageError("--force and --resume contradict each other",
                         "give --resume RUN_DIR to continue a run, or --force --out "
                         "RUN_DIR to replace it")
    again = {k: v for k, v in explicit.items() if v is not None}
    again.update({k: v for k, v in (("dataset", dataset), ("preset", preset),
                                    ("options", options or None)) if v is not None})
    if root is not None:
        again["root"] = str(root)
    return again


def _recorded_run(method: str, config: Optional[Path], resume: Optional[Path],
                  out: Optional[Path]):
    """The run recorded in ``--config`` (None when not given), checked to be of ``method``."""
    from reidcli.errors import UsageError
    from reidcli.training.rerun import read_recorded_run

    if config is None:
        return None
    if resume is not None:
        raise UsageError("--config and --resume both name a run",
                         "give --resume RUN_DIR to continue it, or --config "
                         "RUN/config.json --out NEW_DIR to train it again")
    recorded = read_recorded_run(config)
    if recorded.method != method:
        raise UsageError(f"{recorded.path} records a {recorded.method} run, not {method}",
                         f"use reid train {recorded.method} --config {config}")
    if out is None:
        raise UsageError("--config needs --out (the new run directory)",
                         f"e.g. reid train {method} --config {config} --out runs/again")
    return recorded


def add_trainer_commands(app: typer.Typer, methods: list) -> None:
    """One generated command per registered network trainer on ``app``."""
    for info in methods:
        app.command(info.name, help=info.summary)(trainer_command(info.name))


__all__ = ["run_training", "trainer_command", "add_trainer_commands", "command_parameters",
           "parameter_flag", "option_flag", "trainer_flags", "parse_value", "parameter_option",
           "cli_option", "TRAIN_FLAGS"]
