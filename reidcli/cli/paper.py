"""``reid paper``: our results beside the papers' tables (docs/papers.md).

Each command hands its arguments to the comparison's own parser in :mod:`reidcli.paper`
(``reid paper compare dmgnet --help`` lists that comparison's options); ``reid paper ablation
dgvae|dmgnet`` is built, when it runs, from the trainer's declared parameters (the options of
``reid train dgvae|dmgnet``) and runs :func:`reidcli.paper.ablation.run_ablation`."""
from __future__ import annotations

import importlib
import inspect
from pathlib import Path
from typing import Any, Callable, Optional

import typer

app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False)

#: the comparison's parser reads every argument, ``--help`` included
PASS_THROUGH = {"allow_extra_args": True, "ignore_unknown_options": True,
                "help_option_names": []}


#: the sub-commands: (group or None, name) → (module of :mod:`reidcli.paper` whose
#: ``main(argv)`` runs it, one-line help)
COMMANDS: dict[tuple[str | None, str], tuple[str, str]] = {
    (None, "compare"): ("compare", "PAPER --dataset D LABEL=result.json …: ours beside the "
                        "paper's table and its claims (PAPER: cdpcf, warca, dart3, dgvae, "
                        "dmgnet)."),
    ("budget", "dgvae"): ("dgvae_budget", "RUN_DIR|ABLATION_DIR …: the DG-VAE runs' "
                          "departures from the paper's budget."),
    ("budget", "dmgnet"): ("dmgnet_budget", "RUN_DIR|ABLATION_DIR …: the DMG-Net runs' "
                           "departures from the paper's budget."),
    (None, "warca-protocol"): ("warca_protocol", "header STORE --dim D | cv MODEL: what the "
                               "WARCA recipes print about their protocol."),
    (None, "dgvae-toy"): ("dgvae_toy", "--variants dgvae,baseline --seeds 0,1,2: DG-VAE "
                          "variants on the two-modality toy."),
    ("ablation", "dgvae"): ("ablation", "--out DIR --seeds 0,1,2 + reid train dgvae's options: "
                            "every Table 2 row at every seed, mean ± std, PASS/FAIL."),
    ("ablation", "dmgnet"): ("ablation", "--out DIR --seeds 0,1,2 + reid train dmgnet's "
                             "options: the Table 6 rows at every seed, mean ± std, PASS/FAIL."),
}
GROUPS = {"budget": "Where runs of reid train departed from the paper's training budget.",
          "ablation": "A paper's ablation table in one process: train, extract and evaluate "
                      "every row at every seed, then ours beside the paper."}
#: modules whose command is built here from declared parameters instead of handing the
#: arguments to the module's ``main(argv)``
BUILT = {"ablation": lambda name: _ablation(name)}

#: the ablation's own options: parameter → (flag, annotation, default, help)
ABLATION_OPTIONS = {
    "out": ("--out", Optional[Path], None, "Folder of the outputs: VARIANT/seedS/ (run), "
            "VARIANT/seedS.h5 (store), VARIANT.json (reid eval over the seeds), "
            "ablation.json."),
    "variants": ("--variants", Optional[str], None, "Rows to run, comma list (default: "
                 "every row, in the paper's order)."),
    "seeds": ("--seeds", str, "0,1,2", "Seeds, comma list: one run per row and seed; the "
              "report is their mean ± std."),
    "force": ("--force", bool, False, "Replace existing outputs (each only once its "
              "replacement is complete)."),
    "quiet": ("--quiet", bool, False, "No progress bar and no notes (the table and claims "
              "are still printed)."),
}


def _pass_through(module: str) -> Callable[[typer.Context], None]:
    """A command that hands its arguments to ``reidcli.paper.<module>.main``."""
    def command(ctx: typer.Context) -> None:
        code = importlib.import_module(f"reidcli.paper.{module}").main(list(ctx.args))
        if code:
            raise typer.Exit(code)
    return command


def ablation_command(paper: str) -> Callable[..., None]:
    """The command of ``reid paper ablation PAPER``: the options of ``reid train <trainer>``
    (:func:`reidcli.cli.train_net.command_parameters`, less what a row or seed sets) and
    :data:`ABLATION_OPTIONS`."""
    from reidcli.cli import train_net
    from reidcli.paper.ablation_rows import ablation

    setup = ablation(paper)
    method = setup.trainer
    params = [p for p in train_net.command_parameters(method) if p.name not in setup.fixed]
    signature = [train_net.parameter_option(method, p) for p in params]
    signature += [train_net.cli_option(name, annotation, default, flag, help_text)
                  for name, (flag, annotation, default, help_text) in ABLATION_OPTIONS.items()]

    def command(**values: Any) -> None:
        from reidcli.cli.context import invoked_command, required_option, set_flag_names
        from reidcli.paper.ablation import run_ablation
        from reidcli.progress import ENABLED

        set_flag_names({**train_net.trainer_flags(method),
                        **{n: flag for n, (flag, *_) in ABLATION_OPTIONS.items()}})
        out = required_option(values["out"], metavar="DIR", flag="--out",
                              example=f"runs/{paper}_ablation")
        given = {p.name: train_net.parse_value(method, p, values.get(p.name)) for p in params}
        quiet = bool(values["quiet"])
        run_ablation(paper, out, variants=values["variants"], seeds=values["seeds"],
                     given=given, force=bool(values["force"]), progress=ENABLED and not quiet,
                     command=invoked_command(),
                     echo=(lambda text: None) if quiet else
                     (lambda text: typer.echo(text, err=True)))

    command.__signature__ = inspect.Signature(signature)
    command.__annotations__ = {o.name: o.annotation for o in signature}
    command.__name__ = f"ablation_{paper}"
    return command


def _ablation(paper: str) -> Callable[[typer.Context], None]:
    """``reid paper ablation PAPER``: its command is built when it runs (the trainers'
    parameters import torch), then reads the arguments."""
    def command(ctx: typer.Context) -> None:
        from typer.main import get_command

        sub = typer.Typer(pretty_exceptions_enable=False, add_completion=False)
        sub.command(paper, help=COMMANDS[("ablation", paper)][1])(ablation_command(paper))
        code = get_command(sub).main(args=list(ctx.args), prog_name=ctx.command_path,
                                     standalone_mode=False)
        if isinstance(code, int) and code:
            raise typer.Exit(code)
    return command


def _register() -> None:
    groups = {}
    for group, help_text in GROUPS.items():
        groups[group] = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False)
        app.add_typer(groups[group], name=group, help=help_text)
    for (group, name), (module, help_text) in COMMANDS.items():
        target = app if group is None else groups[group]
        handler = BUILT[module](name) if module in BUILT else _pass_through(module)
        target.command(name, context_settings=PASS_THROUGH, add_help_option=False,
                       help=help_text)(handler)


_register()


HELP = "Compare results with the papers' tables (docs/papers.md)."
