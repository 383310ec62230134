"""`reid fit-pooling METHOD` — C-DPCF, DPCF and average-pooling baselines on stored conv maps,
one command per ``stage="fit-pooling"`` method of the registry (thin CLI over
:func:`reidcli.pooling.fit.fit_pooling_store`)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

from reidcli import registry
from reidcli.cli.estimator_commands import (add_estimator_commands, common_option,
                                            invoked_methods, method_flags)

app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Fit camera-specific pooling (C-DPCF) or a baseline on a conv-map store.")

COMMON = [
    common_option("store", Path, ..., "--store", help="Store with /convmaps (reid extract "
                  "--maps ...)."),
    common_option("out", Path, ..., "--out", help="Fitted model file to write (.h5)."),
    common_option("trials", str, "all", "--trials", help="Protocol trials: all or e.g. 0,3."),
    common_option("train_ids", Optional[int], None, "--train-ids",
                  help="Fit on this many random training ids (paper: 10/30/50/100)."),
    common_option("repeats", int, 5, "--repeats", help="Subsets per trial with --train-ids."),
    common_option("average_images", bool, True, "--average-images/--no-average-images",
                  help="Keep each camera's mean training image (for reid plot weight-maps, "
                  "Fig. 5)."),
    common_option("force", bool, False, "--force", help="Overwrite --out."),
    common_option("quiet", bool, False, "--quiet", help="No summary on the terminal."),
]


def run_pooling(info: registry.MethodInfo, given: dict[str, Any], common: dict[str, Any]) -> None:
    """Fit ``info``'s pooling method over the store's trials and write the fitted file."""
    from reidcli.cli.context import invoked_command, set_flag_names
    from reidcli.errors import UsageError
    from reidcli.pooling.cdpcf import PoolingEstimator
    from reidcli.pooling.fit import fit_pooling_store
    from reidcli.progress import ENABLED

    set_flag_names(method_flags(info))
    estimator = info.make_estimator(given)
    if common["train_ids"] is not None and not isinstance(estimator, PoolingEstimator):
        raise UsageError(f"--train-ids is not available for {info.name}",
                         "drop --train-ids (C-DPCF, DPCF and the AvgP baselines have it)")
    summary = fit_pooling_store(common["store"], common["out"], estimator,
                                trials=common["trials"], train_ids_limit=common["train_ids"],
                                repeats=common["repeats"], force=common["force"],
                                progress=ENABLED and not common["quiet"],
                                command=invoked_command(),
                                with_average_images=common["average_images"])
    if not common["quiet"]:
        typer.echo(f"wrote {summary.path}: {info.name} on {', '.join(summary.layers)}; "
                   f"{len(summary.trials)} trial(s), cameras "
                   f"{', '.join(map(str, summary.cameras))}, "
                   f"{min(summary.num_train_images)}–{max(summary.num_train_images)} "
                   f"training images per trial; {summary.seconds:.1f} s", err=True)


def build_commands() -> None:
    """Generate the commands of the registered pooling methods this invocation needs (only
    when ``reid fit-pooling`` runs; `reid fit-pooling cdpcf` imports the one module of
    C-DPCF: :func:`~reidcli.cli.estimator_commands.invoked_methods`)."""
    add_estimator_commands(app, invoked_methods("fit-pooling"), COMMON, run_pooling)
