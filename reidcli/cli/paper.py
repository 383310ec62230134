"""``reid paper``: our results beside the papers' tables (docs/papers.md).

Each command hands its arguments to the comparison's own parser in :mod:`reidcli.paper`
(``reid paper compare dmgnet --help`` lists that comparison's options)."""
from __future__ import annotations

from typing import Callable, List

import typer

app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False)

#: the comparison's parser reads every argument, ``--help`` included
PASS_THROUGH = {"allow_extra_args": True, "ignore_unknown_options": True,
                "help_option_names": []}


def _run(main: Callable[[List[str]], int | None], args: List[str]) -> None:
    code = main(list(args))
    if code:
        raise typer.Exit(code)


@app.command("compare", context_settings=PASS_THROUGH, add_help_option=False)
def compare(ctx: typer.Context) -> None:
    """PAPER --dataset D LABEL=result.json …: ours beside the paper's table and its claims
    (PAPER: cdpcf, warca, dart3, dgvae, dmgnet)."""
    from reidcli.paper.compare import main

    _run(main, ctx.args)


budget_app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False)
app.add_typer(budget_app, name="budget",
              help="Where runs of reid train departed from the paper's training budget.")


@budget_app.command("dgvae", context_settings=PASS_THROUGH, add_help_option=False)
def budget_dgvae(ctx: typer.Context) -> None:
    """RUN_DIR …: the DG-VAE runs' departures from the paper's budget."""
    from reidcli.paper.dgvae_budget import main

    _run(main, ctx.args)


@budget_app.command("dmgnet", context_settings=PASS_THROUGH, add_help_option=False)
def budget_dmgnet(ctx: typer.Context) -> None:
    """RUN_DIR …: the DMG-Net runs' departures from the paper's budget."""
    from reidcli.paper.dmgnet_budget import main

    _run(main, ctx.args)


@app.command("warca-protocol", context_settings=PASS_THROUGH, add_help_option=False)
def warca_protocol(ctx: typer.Context) -> None:
    """header STORE --dim D | cv MODEL: what the WARCA recipes print about their protocol."""
    from reidcli.paper.warca_protocol import main

    _run(main, ctx.args)


@app.command("dgvae-toy", context_settings=PASS_THROUGH, add_help_option=False)
def dgvae_toy(ctx: typer.Context) -> None:
    """--variants dgvae,baseline --seeds 0,1,2: DG-VAE variants on the two-modality toy."""
    from reidcli.paper.dgvae_toy import main

    _run(main, ctx.args)


HELP = "Compare results with the papers' tables (docs/papers.md)."
