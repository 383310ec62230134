"""`reid adapt METHOD` — test-time adaptation of a store's query features (thin CLI over
:func:`reidcli.adapt.adapt_store`; options and defaults of docs/methods/dart3.md)."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Test-time adaptation of a store's features (DART3, Norm, TENT, TEMP).")



#: library parameters whose flag is not ``--`` + their name
FLAGS = {"external": "--no-external"}


def _cams(text: Optional[str]) -> Optional[list[int]]:
    from reidcli.cameras import parse_cameras
    return parse_cameras(text, "query_cams", owner="adaptation")


def _make(method: str):
    def command(
        store: Path = typer.Option(..., "--store", "--in", help="Input store (.h5)."),
        out: Path = typer.Option(..., "--out", help="Adapted store to write (.h5)."),
        feature: Optional[str] = typer.Option(None, "--feature", help="Store feature "
                                              "(default: the store's default feature)."),
        trial: int = typer.Option(0, "--trial", help="Protocol trial to adapt."),
        query_cams: Optional[str] = typer.Option(None, "--query-cams", help="Adapt only "
                                                 "queries of these 0-based cameras."),
        mode: str = typer.Option("lite", "--mode", help="dart3: lite | full."),
        model: Optional[Path] = typer.Option(None, "--model", help="Run directory / model.pt "
                                             "of reid train (full DART3, TENT, TEMP)."),
        images_root: Optional[Path] = typer.Option(None, "--images-root", help="Folder the "
                                                   "store's image paths are relative to."),
        save_model: Optional[Path] = typer.Option(None, "--save-model", help="Write the "
                                                  "adapted model (BN γ/β) here."),
        batch_size: Optional[int] = typer.Option(None, "--batch-size", help="Queries per "
                                                 "batch (dart3 8, temp 16, tent 64)."),
        steps: int = typer.Option(1, "--steps", help="Optimisation steps per batch T."),
        lr: Optional[float] = typer.Option(None, "--lr", help="Learning rate (dart3 1e-4, "
                                           "tent/temp 3.5e-4)."),
        optimizer: str = typer.Option("adam", "--optimizer", help="adam | sgd."),
        tau: float = typer.Option(100.0, "--tau", help="Softmax temperature τ."),
        topk: int = typer.Option(3, "--topk", help="Nearest gallery entries k in the loss."),
        distance: str = typer.Option("euclidean", "--distance", help="euclidean | cosine "
                                     "(Tab 7 ablation; re-tune --tau)."),
        no_external: bool = typer.Option(False, "--no-external", help="dart3 full: no M, Σ "
                                         "(loss on raw features, BN γ/β only; Tab 4)."),
        episodic: bool = typer.Option(False, "--episodic", help="Reset the state before "
                                      "every batch."),
        split_by_query_camera: bool = typer.Option(False, "--split-by-query-camera",
                                                   help="One independent stream per query "
                                                   "camera (setting A)."),
        emit: str = typer.Option("pre", "--emit", help="pre (Alg 2: before the batch's "
                                 "update) | post."),
        order: str = typer.Option("shuffle", "--order", help="shuffle (seeded) | stored."),
        seed: int = typer.Option(0, "--seed", help="Seed of the order, subsamples, grounding."),
        stats: str = typer.Option("pooled", "--stats", help="pooled (Alg 1) | separate."),
        std_ddof: int = typer.Option(0, "--std-ddof", help="0 population std | 1 unbiased."),
        eps: float = typer.Option(1e-6, "--eps", help="Floor of the scales ε."),
        stats_max_per_camera: Optional[int] = typer.Option(None, "--stats-max-per-camera",
                                                           help="At most N rows per camera "
                                                           "for the statistics."),
        grounding: int = typer.Option(0, "--grounding", help="Grounding rows per batch "
                                      "(seen-camera / source samples)."),
        grounding_split: str = typer.Option("auto", "--grounding-split", help="Store split "
                                            "of the grounding pool (auto: grounding, else "
                                            "train)."),
        bn_mode: Optional[str] = typer.Option(None, "--bn-mode", help="batch | running "
                                              "(default: batch for dart3/tent, running for "
                                              "temp)."),
        tent_logits: str = typer.Option("classifier", "--tent-logits", help="classifier | "
                                        "features."),
        temp_k: int = typer.Option(50, "--temp-k", help="TEMP: top-k similarities."),
        temp_gallery_sample: int = typer.Option(30000, "--temp-gallery-sample",
                                                help="TEMP: gallery rows in the loss."),
        temp_reg: float = typer.Option(1e-4, "--temp-reg", help="TEMP: anti-forgetting λ."),
        precision: str = typer.Option("fp32", "--precision", help="dart3: fp32 | bf16 "
                                      "(gallery GEMMs in bfloat16: ~3× faster on CPUs with "
                                      "AVX-512 BF16 and on GPUs, ≈0.4 % error)."),
        device: str = typer.Option("auto", "--device", help="auto | cpu | cuda."),
        workers: Optional[int] = typer.Option(None, "--workers", help="Image loader workers."),
        drop_convmaps: bool = typer.Option(False, "--drop-convmaps", help="Do not copy the "
                                           "input's conv maps into the output."),
        force: bool = typer.Option(False, "--force", help="Overwrite --out."),
        quiet: bool = typer.Option(False, "--quiet", help="No progress or summary."),
    ) -> None:
        from reidcli.adapt import AdaptConfig, adapt_store
        from reidcli.cli.context import invoked_command, set_flag_names
        from reidcli.progress import ENABLED

        set_flag_names(FLAGS)
        cfg = AdaptConfig(
            method=method, mode=mode, feature=feature, trial=trial,
            query_cams=_cams(query_cams), batch_size=batch_size, steps=steps, lr=lr,
            optimizer=optimizer, tau=tau, topk=topk, distance=distance,
            external=not no_external, episodic=episodic,
            split_by_query_camera=split_by_query_camera, emit=emit, order=order, seed=seed,
            stats=stats, std_ddof=std_ddof, eps=eps,
            stats_max_per_camera=stats_max_per_camera, grounding=grounding,
            grounding_split=grounding_split, bn_mode=bn_mode, tent_logits=tent_logits,
            temp_k=temp_k, temp_gallery_sample=temp_gallery_sample, temp_reg=temp_reg,
            precision=precision, device=device, workers=workers)
        result = adapt_store(store, out, cfg, model=model, images_root=images_root,
                             save_model=save_model, force=force, drop_convmaps=drop_convmaps,
                             progress=ENABLED and not quiet, command=invoked_command())
        if quiet:
            return
        a = result.adaptation
        label = a.config.method + (f" ({a.config.mode})" if a.config.method == "dart3" else "")
        loop = a.loop
        extra = ""
        if loop is not None and loop.losses.size:
            extra = (f", {len(loop.losses)} batches × {loop.losses.shape[1]} steps, loss "
                     f"{loop.losses[0].mean():.4f} → {loop.losses[-1].mean():.4f}")
        typer.echo(f"wrote {result.out}: {label} on {result.num_queries} queries{extra}, "
                   f"{a.seconds:.2f} s ({a.per_query_seconds * 1e3:.2f} ms/query)", err=True)

    return command


_BUILT: list[bool] = []


def build_commands() -> None:
    """One command per adaptation method of the registry (each module declares its own);
    built once, only when ``reid adapt`` runs (the methods import torch)."""
    if _BUILT:
        return
    _BUILT.append(True)
    from reidcli import registry
    for info in registry.methods("adapt"):
        command = _make(info.name)
        command.__doc__ = info.summary
        app.command(info.name, help=info.summary)(command)
