"""`reid train METHOD` — network training (pcb, bot, dgvae, dmgnet, …) and metric learning on a
store.

Both are generated from the method registry: every ``stage="train"`` estimator gets a command
whose options are its own parameters (:mod:`reidcli.cli.estimator_commands`), every
``stage="train-net"`` trainer one whose options are the shared training settings and its
own parameters (:mod:`reidcli.cli.train_net`)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

from reidcli import registry
from reidcli.cli.estimator_commands import add_estimator_commands, common_option, method_flags

app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Train a network or fit a metric on a store.")


COMMON = [
    common_option("store", Path, ..., "--store", help="Feature store (.h5)."),
    common_option("out", Path, ..., "--out", help="Fitted model file to write (.h5)."),
    common_option("feature", Optional[str], None, "--feature",
                  help="Store feature (default: the store's only or first)."),
    common_option("trials", str, "all", "--trials", help="Protocol trials: all or e.g. 0,3."),
    common_option("force", bool, False, "--force", help="Overwrite --out."),
    common_option("quiet", bool, False, "--quiet", help="No summary on the terminal."),
]


def run_metric(info: registry.MethodInfo, given: dict[str, Any], common: dict[str, Any]) -> None:
    """Fit ``info``'s estimator with the ``given`` parameters over the store's trials."""
    from reidcli.cli.context import invoked_command, set_flag_names
    from reidcli.metric.fit import fit_feature_metric_store
    from reidcli.progress import ENABLED

    set_flag_names(method_flags(info))
    estimator = info.make_estimator(given)
    summary = fit_feature_metric_store(
        common["store"], common["out"], estimator, feature=common["feature"],
        trials=common["trials"], force=common["force"],
        progress=ENABLED and not common["quiet"], command=invoked_command())
    if not common["quiet"]:
        typer.echo(f"wrote {summary.path}: {info.name} on feature {summary.feature}, "
                   f"{len(summary.trials)} trial(s); {summary.seconds:.1f} s", err=True)


_BUILT: list[bool] = []
#: the network trainers whose command is built
_TRAINERS: set[str] = set()


def build_commands() -> None:
    """Generate one command per registered metric learner and one per network trainer
    (:mod:`reidcli.cli.train_net`), once, only when ``reid train`` runs (so other commands do
    not import every method module); ``reid train <metric>`` imports no network trainer
    (they import torch)."""
    from reidcli.cli.context import invoked_command

    if not _BUILT:
        _BUILT.append(True)
        add_estimator_commands(app, registry.methods("train"), COMMON, run_metric)
    words = [a for a in invoked_command()[1:] if not a.startswith("-")]
    if words[:1] == ["train"] and len(words) > 1 and registry.lookup(words[1], ["train"]):
        return
    new = [m for m in registry.methods("train-net") if m.name not in _TRAINERS]
    _TRAINERS.update(m.name for m in new)          # a plugin loaded later is added then
    _train_net.add_trainer_commands(app, new)


from reidcli.cli import train_net as _train_net  # noqa: E402


@app.callback(invoke_without_command=True)
def _train_again(ctx: typer.Context,
                 config: Optional[Path] = typer.Option(
                     None, "--config", help="Train a recorded run again: RUN/config.json "
                     "(its method and options; reid train METHOD --config … to override "
                     "options)."),
                 out: Optional[Path] = typer.Option(None, "--out", help="--config: the new "
                                                    "run directory."),
                 force: bool = typer.Option(False, "--force", help="--config: replace the "
                                            "run in --out (once the new run is complete)."),
                 quiet: bool = typer.Option(False, "--quiet")) -> None:
    """`reid train --config RUN/config.json --out NEW`: the recorded method and options."""
    from reidcli.errors import UsageError

    if ctx.invoked_subcommand is not None:
        if config is not None or out is not None:
            raise UsageError("--config and --out before the method apply to a re-run only",
                             f"put them after it: reid train {ctx.invoked_subcommand} "
                             "--config RUN/config.json --out NEW_DIR")
        return
    if config is None:
        typer.echo(ctx.get_help())
        raise typer.Exit(0)
    from reidcli.training.rerun import read_recorded_run

    method = read_recorded_run(config).method
    _train_net.run_training(method, out=out, resume=None, force=force, quiet=quiet,
                            config=config)
