"""``reid paper``: our results beside the papers' tables (docs/papers.md).

Each command hands its arguments to the comparison's own parser in :mod:`reidcli.paper`
(``reid paper compare dmgnet --help`` lists that comparison's options)."""
from __future__ import annotations

import importlib
from typing import Callable

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
    ("budget", "dgvae"): ("dgvae_budget", "RUN_DIR …: the DG-VAE runs' departures from the "
                          "paper's budget."),
    ("budget", "dmgnet"): ("dmgnet_budget", "RUN_DIR …: the DMG-Net runs' departures from the "
                           "paper's budget."),
    (None, "warca-protocol"): ("warca_protocol", "header STORE --dim D | cv MODEL: what the "
                               "WARCA recipes print about their protocol."),
    (None, "dgvae-toy"): ("dgvae_toy", "--variants dgvae,baseline --seeds 0,1,2: DG-VAE "
                          "variants on the two-modality toy."),
}
GROUPS = {"budget": "Where runs of reid train departed from the paper's training budget."}


def _pass_through(module: str) -> Callable[[typer.Context], None]:
    """A command that hands its arguments to ``reidcli.paper.<module>.main``."""
    def command(ctx: typer.Context) -> None:
        code = importlib.import_module(f"reidcli.paper.{module}").main(list(ctx.args))
        if code:
            raise typer.Exit(code)
    return command


def _register() -> None:
    groups = {}
    for group, help_text in GROUPS.items():
        groups[group] = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False)
        app.add_typer(groups[group], name=group, help=help_text)
    for (group, name), (module, help_text) in COMMANDS.items():
        target = app if group is None else groups[group]
        target.command(name, context_settings=PASS_THROUGH, add_help_option=False,
                       help=help_text)(_pass_through(module))


_register()


HELP = "Compare results with the papers' tables (docs/papers.md)."
