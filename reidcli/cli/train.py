"""`reid train METHOD` — network training (pcb, bot) and metric learning on a store."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from reidcli.cli._stub import PASS_THROUGH, not_yet

app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Train a network or fit a metric on a store.")

#: stages still to come: a clear "not implemented yet" (exit 2)
LATER = ("dgvae", "dmgnet")

#: metric learners on stored features: method → (module, one-line help)
METRICS = {
    "warca": ("reidcli.metric.warca", "WARCA (Jose & Fleuret 2016): linear or kernel, AON "
              "regulariser, WARP rank weights."),
    "kissme": ("reidcli.metric.kissme", "KISSME (Köstinger et al. 2012) after PCA."),
    "lfda": ("reidcli.metric.lfda", "LFDA (Pedagadi et al. 2013)."),
    "klfda": ("reidcli.metric.lfda", "Kernel LFDA (Xiong et al. 2014)."),
    "rpcca": ("reidcli.metric.rpcca", "Regularised kernel PCCA (Xiong et al. 2014)."),
    "pca": ("reidcli.metric.pca", "PCA projection (unsupervised reference)."),
}


@app.command("xqda")
def xqda(
    store: Path = typer.Option(..., "--store", help="Feature store (.h5)."),
    out: Path = typer.Option(..., "--out", help="Fitted model file to write (.h5)."),
    feature: Optional[str] = typer.Option(None, "--feature", help="Store feature (default: "
                                          "the store's only or first)."),
    xqda_lambda: float = typer.Option(0.001, "--lambda", help="Regulariser λ added to Σ_I."),
    solver: str = typer.Option("svd", "--solver", help="svd (public release) | eigh (paper)."),
    dims: Optional[int] = typer.Option(None, "--dims", help="Cap on the subspace rank "
                                       "(default: #eigenvalues > 1)."),
    normalize: str = typer.Option("center-l2", "--normalize", help="center-l2 | l2 | none."),
    trials: str = typer.Option("all", "--trials", help="Protocol trials: all or e.g. 0,3."),
    force: bool = typer.Option(False, "--force", help="Overwrite --out."),
    quiet: bool = typer.Option(False, "--quiet", help="No summary on the terminal."),
) -> None:
    """XQDA (Liao et al. 2015) on a stored feature, one fit per protocol trial."""
    from functools import partial

    from reidcli.cli.context import invoked_command
    from reidcli.metric.fit import fit_feature_metric_store
    from reidcli.metric.xqda import PREPROCESSING, SOLVERS, fit_xqda_arrays
    from reidcli.errors import UsageError
    from reidcli.progress import ENABLED

    if solver not in SOLVERS or normalize not in PREPROCESSING:
        raise UsageError(f"--solver {solver!r} / --normalize {normalize!r} not recognised",
                         f"use --solver {'|'.join(SOLVERS)} and --normalize "
                         f"{'|'.join(PREPROCESSING)}")
    fit = partial(fit_xqda_arrays, lam=xqda_lambda, solver=solver, max_dims=dims,
                  normalize=normalize)
    summary = fit_feature_metric_store(
        store, out, "xqda", fit, {"lambda": xqda_lambda, "solver": solver, "dims": dims,
                                  "normalize": normalize},
        feature=feature, trials=trials, force=force, progress=ENABLED and not quiet,
        command=invoked_command())
    if not quiet:
        typer.echo(f"wrote {summary.path}: xqda on feature {summary.feature}, "
                   f"{len(summary.trials)} trial(s); {summary.seconds:.1f} s", err=True)


def _metric_command(method: str, module_name: str, doc: str):
    def command(
        store: Path = typer.Option(..., "--store", help="Feature store (.h5)."),
        out: Path = typer.Option(..., "--out", help="Fitted model file to write (.h5)."),
        feature: Optional[str] = typer.Option(None, "--feature", help="Store feature (default: "
                                              "the store's only or first)."),
        dim: Optional[int] = typer.Option(None, "--dim", help="Output dimension."),
        kernel: Optional[str] = typer.Option(None, "--kernel", help="Kernel methods: chi2rbf "
                                             "(WARCA-χ²) | chi2 | rbf | linear "
                                             "(see the method)."),
        lam: Optional[float] = typer.Option(None, "--lambda", help="Regulariser weight."),
        lr: Optional[float] = typer.Option(None, "--lr", help="Learning rate."),
        iterations: Optional[int] = typer.Option(None, "--iterations", help="Iterations."),
        batch_size: Optional[int] = typer.Option(None, "--batch-size", help="Minibatch size."),
        param: Optional[List[str]] = typer.Option(None, "--param", help="Any other "
                                                  "hyperparameter key=value (repeatable)."),
        trials: str = typer.Option("all", "--trials", help="Protocol trials: all or e.g. 0,3."),
        seed: int = typer.Option(0, "--seed", help="Seed of the fit."),
        force: bool = typer.Option(False, "--force", help="Overwrite --out."),
        quiet: bool = typer.Option(False, "--quiet", help="No summary on the terminal."),
    ) -> None:
        from reidcli.cli.context import invoked_command
        from reidcli.cli.data import parse_key_values
        from reidcli.metric.fit import metric_fitter
        from reidcli.metric.fit import fit_feature_metric_store
        from reidcli.progress import ENABLED

        given = {"dim": dim, "kernel": kernel, "lambda": lam, "lr": lr,
                 "iterations": iterations, "batch_size": batch_size, "seed": seed}
        hyper = {k: v for k, v in given.items() if v is not None}
        hyper.update(parse_key_values(param, "--param"))
        fit, resolved = metric_fitter(method, module_name, hyper)
        summary = fit_feature_metric_store(store, out, method, fit, resolved, feature=feature,
                                           trials=trials, seed=seed, force=force,
                                           progress=ENABLED and not quiet,
                                           command=invoked_command())
        if not quiet:
            typer.echo(f"wrote {summary.path}: {method} on feature {summary.feature}, "
                       f"{len(summary.trials)} trial(s); {summary.seconds:.1f} s", err=True)

    command.__doc__ = doc
    return command


for _method, (_module, _doc) in METRICS.items():
    app.command(_method, help=_doc)(_metric_command(_method, _module, _doc))


def _later(method: str):
    def command(ctx: typer.Context) -> None:
        not_yet(f"train {method}")
    command.__doc__ = f"{method} (not implemented yet)"
    return command


from reidcli.cli import train_net as _train_net  # noqa: E402

app.command("pcb", help="PCB (Sun et al. 2018): 6 stripes, shared 1×1 reduction, 6 classifiers; "
            "optional RPP.")(_train_net.pcb)
app.command("bot", help="BoT strong baseline: last stride 1, BNNeck, label smoothing, "
            "batch-hard triplet, warm-up.")(_train_net.bot)

for _method in LATER:
    app.command(_method, context_settings=PASS_THROUGH)(_later(_method))
