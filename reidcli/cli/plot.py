"""`reid plot KIND` — figures (thin CLI over :mod:`reidcli.plotting`; matplotlib is imported
only when a figure is drawn, so `reid` starts fast)."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

HELP = "Figures: CMC, t-SNE, weight maps, rank lists, training curves, distance histograms."
app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False, help=HELP)

OUT = typer.Option(..., "--out", help="Figure file: .png (300 dpi), .pdf or .svg (vector).")
FORCE = typer.Option(False, "--force", help="Overwrite --out.")
MODEL = typer.Option(None, "--model", help="Fitted model (.h5) whose distance to use.")
FEATURE = typer.Option(None, "--feature", help="Store feature (default: the store's).")
TRIAL = typer.Option(0, "--trial", help="Protocol trial.")
SEED = typer.Option(0, "--seed", help="Seed of the sampling.")
STORE = typer.Option(None, "--store", help="Feature store (.h5). Required.")


def _store(store: Optional[Path]) -> Path:
    from reidcli.cli.context import required_option
    return required_option(store, metavar="STORE", flag="--store")


def _done(path) -> None:
    typer.echo(f"wrote {path}", err=True)


@app.command("cmc")
def cmc(results: List[Path] = typer.Argument(..., help="Result JSON files of reid eval --json."),
        out: Path = OUT,
        label: Optional[List[str]] = typer.Option(None, "--label", help="Legend name per "
                                                  "result, in order (repeatable)."),
        max_rank: int = typer.Option(20, "--max-rank", help="Last rank shown."),
        title: Optional[str] = typer.Option(None, "--title"),
        force: bool = FORCE) -> None:
    """CMC curves of several runs on one axis (mean ± std band over trials)."""
    from reidcli.cli.context import set_flag_names
    from reidcli.plotting.cmc import plot_cmc

    set_flag_names({"labels": "--label"})

    _done(plot_cmc(results, out, labels=label, max_rank=max_rank, title=title,
                   force=force).path)


@app.command("tsne")
def tsne(store: Optional[Path] = STORE, out: Path = OUT,
         feature: Optional[str] = FEATURE,
         color_by: str = typer.Option("camid", "--color-by", help="camid | pid | modality | "
                                      "domain | split | dataset (at most 10 colours; the "
                                      "rarest values beyond share one grey 'other')."),
         marker_by: Optional[str] = typer.Option(None, "--marker-by", help="e.g. split or "
                                                 "domain (3 shapes; with it, 7 colours)."),
         max_points: int = typer.Option(2000, "--max-points", help="Seeded subsample size."),
         compare: Optional[Path] = typer.Option(None, "--compare", help="Second store with the "
                                                "same rows (e.g. adapted), drawn beside."),
         split: Optional[str] = typer.Option(None, "--split", help="Only these splits, e.g. "
                                             "query,gallery."),
         perplexity: Optional[float] = typer.Option(None, "--perplexity", help="t-SNE "
                                                    "perplexity (default 30, lowered below a "
                                                    "third of the points)."),
         seed: int = SEED, force: bool = FORCE) -> None:
    """t-SNE of embeddings coloured by camera / identity / modality / domain."""
    from reidcli.cli.context import set_flag_names
    from reidcli.plotting.tsne import plot_tsne

    set_flag_names({"splits": "--split"})
    store = _store(store)
    splits = [s.strip() for s in split.split(",")] if split else None
    _done(plot_tsne(store, out, feature=feature, color_by=color_by, marker_by=marker_by,
                    max_points=max_points, compare=compare, splits=splits, seed=seed,
                    perplexity=perplexity, force=force).path)


@app.command("weight-maps")
def weight_maps(fitted: Optional[Path] = typer.Option(None, "--model", help="Fitted "
                                                      "C-DPCF/DPCF file. Required."),
                out: Path = OUT,
                trial: Optional[int] = typer.Option(None, "--trial", help="Trial (default: "
                                                    "the file's first)."),
                layers: Optional[str] = typer.Option(None, "--layers", help="e.g. conv4_x,conv5_x."),
                num_maps: int = typer.Option(4, "--num-maps", help="First maps shown (Fig. 4)."),
                figure: str = typer.Option("both", "--figure", help="maps (Fig. 4) | sum "
                                           "(Fig. 5) | both."),
                force: bool = FORCE) -> None:
    """C-DPCF Fig. 4 (first maps per layer and camera) and Fig. 5 (Σ|maps| + mean image)."""
    from reidcli.cli.context import set_flag_names
    from reidcli.plotting.weight_maps import plot_weight_maps

    from reidcli.cli.context import required_option

    set_flag_names({"num_maps": "--num-maps", "fitted": "--model"})
    fitted = required_option(fitted, metavar="FITTED", flag="--model")

    chosen = [s.strip() for s in layers.split(",")] if layers else None
    _done(plot_weight_maps(fitted, out, trial=trial, layers=chosen, num_maps=num_maps,
                           figure=figure, force=force).path)


@app.command("ranklist")
def ranklist(store: Optional[Path] = STORE,
             out: Path = OUT, model: Optional[Path] = MODEL, feature: Optional[str] = FEATURE,
             trial: int = TRIAL,
             queries: int = typer.Option(5, "--queries", help="Random queries shown."),
             query_index: Optional[str] = typer.Option(None, "--query-index", help="Store rows "
                                                       "of the queries, e.g. 3,17."),
             topk: int = typer.Option(10, "--max-rank", help="Gallery images per query "
                                      "(ranks 1..N)."),
             images_root: Optional[Path] = typer.Option(None, "--images-root", help="Folder "
                                                        "the store's relative image paths "
                                                        "are read under (default: the "
                                                        "current directory)."),
             seed: int = SEED, force: bool = FORCE) -> None:
    """Each query with its top-k gallery images, each tile labelled rank, distance, pid and
    camera (border green = same person, red = other, grey = unlabelled)."""
    from reidcli.cli.context import set_flag_names
    from reidcli.errors import UsageError

    set_flag_names({"trials": "--trial",     # the trial goes through the eval trial parser
                    "topk": "--max-rank"})
    from reidcli.plotting.ranklist import plot_ranklist

    store = _store(store)
    index = None
    if query_index:
        try:
            index = [int(v) for v in query_index.split(",") if v.strip()]
        except ValueError:
            raise UsageError(f"--query-index {query_index!r} is not a comma list of rows",
                             "e.g. --query-index 3,17") from None
    _done(plot_ranklist(store, out, model=model, feature=feature, trial=trial, queries=queries,
                        query_index=index, topk=topk, seed=seed, force=force,
                        images_root=images_root).path)


@app.command("training")
def training(run_dir: Optional[Path] = typer.Option(None, "--model", help="Run directory of "
                                                    "reid train. Required."),
             out: Path = OUT, force: bool = FORCE) -> None:
    """Loss / learning-rate / accuracy curves from the run directory's metrics.csv."""
    from reidcli.cli.context import required_option, set_flag_names
    from reidcli.plotting.training import plot_training

    set_flag_names({"run_dir": "--model"})
    run_dir = required_option(run_dir, metavar="RUN_DIR", flag="--model")

    _done(plot_training(run_dir, out, force=force).path)


@app.command("distances")
def distances(store: Optional[Path] = STORE,
              out: Path = OUT,
              model: Optional[Path] = MODEL, feature: Optional[str] = FEATURE,
              trial: int = TRIAL,
              max_pairs: int = typer.Option(200_000, "--max-pairs", help="Pairs kept per group."),
              bins: int = typer.Option(60, "--bins"), seed: int = SEED,
              normalize: Optional[bool] = typer.Option(
                  None, "--normalize/--no-normalize", help="Euclidean distance between "
                  "L2-normalised features (DG-VAE Fig. 5(b); default without --model) or the "
                  "distance reid eval ranks by (default with --model)."),
              force: bool = FORCE) -> None:
    """Intra- vs inter-class (and cross-modality) distance histograms, with the gap δ =
    mean inter − mean intra in the title (DG-VAE Fig. 5(b))."""
    from reidcli.cli.context import set_flag_names

    set_flag_names({"trials": "--trial"})     # the trial goes through the eval trial parser
    from reidcli.plotting.distances import plot_distances

    store = _store(store)
    plot = plot_distances(store, out, model=model, feature=feature, trial=trial,
                          max_pairs=max_pairs, bins=bins, seed=seed, normalize=normalize,
                          force=force)
    if plot.gap is not None:
        typer.echo(f"delta = {plot.gap:.4f} (mean inter-class - mean intra-class"
                   f"{', cross-modality' if any('cross' in k for k in plot.groups) else ''}"
                   f"{', L2-normalised features' if plot.normalized else ''})")
    _done(plot.path)
