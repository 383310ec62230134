"""`reid fit-pooling METHOD` — C-DPCF, DPCF and average-pooling baselines on stored conv maps
(thin CLI over :func:`reidcli.pooling.fit.fit_pooling_store`)."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Fit camera-specific pooling (C-DPCF) or a baseline on a conv-map store.")

METHOD_HELP = {
    "cdpcf": "C-DPCF: camera-specific discriminative weight maps + XQDA per (layer, map).",
    "dpcf": "DPCF: one discriminative weight-map set shared by all cameras + XQDA.",
    "avgp": "AvgP+XQDA: stripe-average pooling, one XQDA per layer.",
    "avgp-pad": "AvgP+pad.+XQDA: camera zero-padded stripe averages (CRAFT-style) + XQDA.",
}


def _split_layers(values: Optional[List[str]]) -> list[str] | None:
    if not values:
        return None
    return [v.strip() for item in values for v in item.split(",") if v.strip()]


def _make(method: str):
    def command(
        store: Path = typer.Option(..., "--store", help="Store with /convmaps (reid extract "
                                   "--maps ...)."),
        out: Path = typer.Option(..., "--out", help="Fitted model file to write (.h5)."),
        layers: Optional[List[str]] = typer.Option(None, "--layers", help="Conv-map layers, "
                                                   "e.g. conv4_x,conv5_x (default: all)."),
        k_maps: int = typer.Option(10, "--K", help="Weight maps per layer (paper: 10)."),
        e_dim: int = typer.Option(64, "--E", help="Random projection rank (paper: 64; 0 = "
                                  "w/o R)."),
        g_stripes: int = typer.Option(6, "--G", help="Horizontal stripes (paper: 6)."),
        grid: Optional[str] = typer.Option(None, "--grid", help="Pooling grid GhxGw (default "
                                           "Gx1); overrides --G."),
        metric: str = typer.Option("xqda", "--metric", help="xqda | none (w/o V: 1 − cosine "
                                   "of raw pooled vectors)."),
        xqda_lambda: float = typer.Option(0.001, "--xqda-lambda", help="XQDA regulariser λ."),
        xqda_solver: str = typer.Option("svd", "--xqda-solver", help="svd (public release) | "
                                        "eigh (paper's generalized eigenproblem)."),
        xqda_dims: Optional[int] = typer.Option(None, "--xqda-dims", help="Cap on the XQDA "
                                                "subspace rank."),
        center: str = typer.Option("global", "--center", help="Mean removed before L2: "
                                   "global | per-camera."),
        trials: str = typer.Option("all", "--trials", help="Protocol trials: all or e.g. 0,3."),
        train_ids: Optional[int] = typer.Option(None, "--train-ids", help="Fit on this many "
                                                "random training ids (paper: 10/30/50/100)."),
        repeats: int = typer.Option(5, "--repeats", help="Subsets per trial with --train-ids."),
        seed: int = typer.Option(0, "--seed", help="Seed of R and of the id subsets."),
        chunk: int = typer.Option(256, "--chunk", help="Images per block of conv maps read."),
        average_images: bool = typer.Option(True, "--average-images/--no-average-images",
                                            help="Keep each camera's mean training image "
                                            "(for reid plot weight-maps, Fig. 5)."),
        force: bool = typer.Option(False, "--force", help="Overwrite --out."),
        quiet: bool = typer.Option(False, "--quiet", help="No summary on the terminal."),
    ) -> None:
        from reidcli.cli.context import invoked_command
        from reidcli.pooling.cdpcf import PoolingConfig
        from reidcli.pooling.fit import fit_pooling_store
        from reidcli.pooling.geometry import parse_grid
        from reidcli.progress import ENABLED

        config = PoolingConfig(method=method, K=k_maps, E=e_dim,
                               grid=parse_grid(grid, g_stripes), seed=seed, metric=metric,
                               xqda_lambda=xqda_lambda, xqda_solver=xqda_solver,
                               xqda_dims=xqda_dims, center=center, chunk=chunk)
        summary = fit_pooling_store(store, out, config, layers=_split_layers(layers),
                                    trials=trials, train_ids_limit=train_ids, repeats=repeats,
                                    force=force, progress=ENABLED and not quiet,
                                    command=invoked_command(),
                                    with_average_images=average_images)
        if not quiet:
            typer.echo(f"wrote {summary.path}: {method} on {', '.join(summary.layers)}; "
                       f"{len(summary.trials)} trial(s), cameras "
                       f"{', '.join(map(str, summary.cameras))}, "
                       f"{min(summary.num_train_images)}–{max(summary.num_train_images)} "
                       f"training images per trial; {summary.seconds:.1f} s", err=True)

    command.__doc__ = METHOD_HELP[method]
    return command


for _method in METHOD_HELP:
    app.command(_method, help=METHOD_HELP[_method])(_make(_method))
