"""`reid extract` — images → feature store (thin CLI over :mod:`reidcli.features.extract`).

Without ``--model``: hand-crafted descriptors (``--features hsv-stripes,…``; ``bow`` learns
its codebook from the training rows first, or reuses one with ``--codebook-from``) and
spatial maps (``--maps color-grid``). With ``--model RUN_DIR``: the network's embeddings
(``--features pcb_g,pcb_h`` | ``rpp_g,rpp_h`` | ``bnneck,pool5`` | ``dgvae_idi,dgvae_iai``)
and pooled conv maps (``--maps conv2_x,…,conv5_x``; not for DG-VAE, whose rows go through
the visible or infrared trunk by their ``modality``). ``--model`` also takes a fast-reid,
torchreid, reid-strong-baseline or layumi checkpoint (``--arch``, ``--allow-partial``;
docs/models.md). Started by ``torchrun`` (``WORLD_SIZE`` >
1), ``--model`` extraction splits the rows over the ranks and rank 0 joins their shards into
``--out`` (:mod:`reidcli.features.distributed`; docs/formats.md, "Distributed extraction").
"""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

HELP = "Extract embeddings and conv maps from images into a feature store."
CONTEXT: dict = {}


def _names(values: Optional[List[str]]) -> list[str]:
    return [v.strip() for item in values or [] for v in item.split(",") if v.strip()]


def extract(
    dataset: Optional[str] = typer.Option(None, "--dataset", help="Dataset name or alias "
                                          "(reid data list); or --images / --images-list."),
    out: Path = typer.Option(..., "--out", help="Feature store to write (.h5)."),
    root: Optional[Path] = typer.Option(None, "--root", help="Data root (default "
                                        "$REIDCLI_DATA or ./data)."),
    features: Optional[List[str]] = typer.Option(None, "--features", help="Hand-crafted "
                                                 "descriptors: hsv-stripes, hist-lbp "
                                                 "(2580-d), lomo (26960-d), bow (Market-1501 "
                                                 "Bag-of-Words, 5600-d); with --model: "
                                                 "pcb_g,pcb_h (PCB), rpp_g,rpp_h (PCB+RPP) "
                                                 "bnneck,pool5 (BoT), "
                                                 "dgvae_idi,dgvae_iai (DG-VAE); a foreign "
                                                 "checkpoint's embed, bnneck or pool5 "
                                                 "(default: its toolkit's test feature)."),
    maps: Optional[List[str]] = typer.Option(None, "--maps", help="Maps to store as "
                                             "/convmaps: color-grid; with --model: "
                                             "conv2_x,conv3_x,conv4_x,conv5_x."),
    maps_dtype: str = typer.Option("float16", "--maps-dtype", help="float16 | float32."),
    model: Optional[Path] = typer.Option(None, "--model", help="Trained network: a reid "
                                         "train run directory or its model.pt, or a "
                                         "fast-reid / torchreid / reid-strong-baseline / "
                                         "layumi checkpoint (docs/models.md)."),
    arch: Optional[str] = typer.Option(None, "--arch", help="--model: the architecture of a "
                                       "foreign checkpoint when its keys do not tell "
                                       "(e.g. fastreid-sbs-r50-ibn, torchreid-osnet_x1_0; "
                                       "docs/models.md lists them)."),
    allow_partial: bool = typer.Option(False, "--allow-partial", help="--model: load a "
                                       "foreign checkpoint with missing or unexpected "
                                       "tensors anyway (warns; missing ones keep their "
                                       "initial values)."),
    map_size: str = typer.Option("24x8", "--map-size", help="--model maps: pooled HxW."),
    flip: bool = typer.Option(False, "--flip", help="--model: average each embedding with "
                              "the mirrored image's."),
    shard: Optional[str] = typer.Option(None, "--shard", help="--model: extract shard i/n "
                                        "of the rows (join with reid store merge); under "
                                        "torchrun each rank takes RANK/WORLD_SIZE."),
    no_merge: bool = typer.Option(False, "--no-merge", help="torchrun: keep each rank's "
                                  "OUT-stem.shard-i-of-n.h5 for reid store merge instead of "
                                  "joining them into --out on rank 0."),
    dist_timeout: float = typer.Option(1800.0, "--dist-timeout", help="torchrun: seconds a "
                                       "finished rank waits for the others."),
    allow_large: bool = typer.Option(False, "--allow-large", help="Allow conv maps for "
                                     "more than 20,000 images or above 16 GiB "
                                     "(MSMT17-scale)."),
    device: str = typer.Option("auto", "--device", help="--model: auto | cpu | cuda."),
    amp: str = typer.Option("off", "--amp", help="--model: off | auto | bf16 | fp16 (auto = fp32 on CPU; bf16 works on CPU)."),
    workers: Optional[int] = typer.Option(None, "--workers", help="Image loader workers."),
    option: Optional[List[str]] = typer.Option(None, "--option", help="Dataset loader option "
                                               "key=value (repeatable), e.g. protocol=..."),
    trials: Optional[str] = typer.Option(None, "--trials", help="Protocol trials to lay "
                                         "out: all or e.g. 0,3 (default all; with --model, "
                                         "the model's own trial when other trials test on "
                                         "its training identities)."),
    allow_overlap: bool = typer.Option(False, "--allow-overlap", help="--model: extract "
                                       "trials whose test identities the model was trained "
                                       "on (warns; the store records the overlap)."),
    batch_size: int = typer.Option(256, "--batch-size", help="Images per batch."),
    codebook_from: Optional[Path] = typer.Option(None, "--codebook-from", help="bow: reuse "
                                                 "the codebook of this store instead of "
                                                 "learning one."),
    color_names: Optional[str] = typer.Option(None, "--color-names", help="bow: Colour "
                                              "Names table: builtin (an approximation, the "
                                              "default) or Van de Weijer's w2c .mat/.txt/.npy."),
    bow_words: int = typer.Option(350, "--bow-words", help="bow: codebook size K."),
    max_images: int = typer.Option(4000, "--max-images", help="bow: at most this many "
                                   "training images learn the codebook."),
    seed: int = typer.Option(0, "--seed", help="bow: k-means and image-sampling seed."),
    force: bool = typer.Option(False, "--force", help="Overwrite --out."),
    images: Optional[Path] = typer.Option(None, "--images", help="Any folder of images "
                                          "instead of --dataset (recursive): its gallery, "
                                          "or its query/ and bounding_box_test/ folders."),
    query_images: Optional[Path] = typer.Option(None, "--query-images", help="--images: the "
                                                "folder of the query images."),
    images_list: Optional[Path] = typer.Option(None, "--images-list", help="CSV of images "
                                               "instead of --dataset: path[,pid,camid,"
                                               "split]."),
    pattern: Optional[str] = typer.Option(None, "--pattern", help="--images: regex with "
                                          "groups pid and cam (1-based) or camid, searched "
                                          "in file names; 'market' for Market names. "
                                          "Default: unlabelled (pid -1)."),
    skip_unmatched: bool = typer.Option(False, "--skip-unmatched", help="--pattern: leave "
                                        "out files it does not match (default: error)."),
) -> None:
    """Describe every image of a dataset's protocol trials and write a feature store."""
    from reidcli.cli.context import set_flag_names
    from reidcli.errors import UsageError
    from reidcli.features.distributed import DistributedEnv

    set_flag_names({"merge": "--no-merge", "timeout": "--dist-timeout"})
    dataset = _image_source(dataset, images, query_images, images_list, pattern,
                            skip_unmatched, root, option, trials)
    launch = DistributedEnv.from_environ()
    _check_flags(launch, model, no_merge, maps_dtype, batch_size, allow_overlap, arch,
                 allow_partial, codebook_from, color_names)
    names, map_names = _names(features), _names(maps)
    foreign = {"arch": arch, "allow_partial": allow_partial}
    if launch is not None:
        # once per rank: the trial choice (training identities) and the extraction share it
        from reidcli.models.checkpoint import load_model
        model = load_model(model, "cpu", **foreign)
        _extract_distributed(launch, model, dataset, out, root, names, map_names, maps_dtype,
                             map_size, flip, shard, allow_large, device, amp, workers, option,
                             trials, batch_size, force, not no_merge, dist_timeout,
                             allow_overlap)
        return
    if model is not None:
        _extract_with_model(model, dataset, out, root, names, map_names, maps_dtype, map_size,
                            flip, shard, allow_large, device, amp, workers, option, trials,
                            batch_size, force, allow_overlap, foreign)
        return
    if shard is not None:
        raise UsageError("--shard needs --model", "hand-crafted extraction is not sharded")
    _extract_handcrafted(dataset, out, root, names or ([] if map_names else ["hsv-stripes"]),
                         map_names, maps_dtype, option, trials, batch_size, force,
                         bow_words=bow_words, color_names=color_names, seed=seed,
                         max_images=max_images, codebook_from=codebook_from)


def _check_flags(launch, model, no_merge, maps_dtype, batch_size, allow_overlap, arch,
                 allow_partial, codebook_from, color_names) -> None:
    """UsageError on flags that do not go together (a torchrun launch, --model or not) or a
    bad --maps-dtype / --batch-size."""
    from reidcli.errors import UsageError

    if launch is None and no_merge:
        raise UsageError("--no-merge applies to a torchrun launch only",
                         "drop it, or start reid extract with torchrun")
    if launch is not None and model is None:
        raise UsageError(f"a torchrun launch ({launch.world_size} ranks) needs --model",
                         "hand-crafted extraction runs in one process: start it without "
                         "torchrun")
    if maps_dtype not in ("float16", "float32"):
        raise UsageError(f"--maps-dtype {maps_dtype!r} is not float16 or float32",
                         "pass --maps-dtype float16")
    if batch_size < 1:
        raise UsageError(f"--batch-size {batch_size} must be ≥ 1", "e.g. --batch-size 256")
    if model is None and allow_overlap:
        raise UsageError("--allow-overlap applies to --model only",
                         "drop it: hand-crafted features learn no identities")
    if model is None and (arch is not None or allow_partial):
        raise UsageError(f"{'--arch' if arch is not None else '--allow-partial'} applies to "
                         "--model only", "drop it, or pass the foreign checkpoint with --model")
    if model is not None and (codebook_from is not None or color_names is not None):
        raise UsageError("--codebook-from and --color-names are bow options",
                         "drop them with --model")


def _extract_handcrafted(dataset, out, root, names, map_names, maps_dtype, option, trials,
                         batch_size, force, **bow) -> None:
    """Hand-crafted descriptors and maps of ``dataset`` (a name, or the images given) into
    the store ``out``; the fitted descriptors' summaries and one line on stderr."""
    from reidcli.cli.context import invoked_command
    from reidcli.cli.data import parse_key_values
    from reidcli.features.extract import extract_handcrafted_store, stored_summaries
    from reidcli.features.layout import dataset_layout
    from reidcli.io import check_output
    from reidcli.progress import ENABLED

    check_output(out, force)
    if isinstance(dataset, str):
        layout = dataset_layout(dataset, root, trials=trials, progress=ENABLED,
                                **parse_key_values(option, "--option"))
    else:                                                    # --images / --images-list
        layout = dataset.layout()
    path = extract_handcrafted_store(layout, out, names, maps=map_names, maps_dtype=maps_dtype,
                                     batch_size=batch_size, force=force, progress=ENABLED,
                                     command=invoked_command(),
                                     inputs=[f for f in [layout.image_folder()] if f], **bow)
    for line in stored_summaries(path):
        typer.echo(line, err=True)
    typer.echo(f"wrote {path}: {len(layout.records)} images, {len(layout.trials)} trial(s)"
               + (f", features {', '.join(names)}" if names else "")
               + (f", maps {', '.join(map_names)}" if map_names else ""), err=True)


def _image_source(dataset, images, query_images, images_list, pattern, skip_unmatched,
                  root, option, trials):
    """``--dataset`` NAME, or the :class:`~reidcli.features.image_folder.ImageSource` of
    ``--images``/``--query-images``/``--images-list`` with its rows read (errors first; a
    summary line on stderr)."""
    from reidcli.errors import UsageError
    from reidcli.features.image_folder import ImageSource

    given = [f for f, v in (("--images", images), ("--query-images", query_images),
                            ("--images-list", images_list)) if v is not None]
    if dataset is not None and given:
        raise UsageError(f"--dataset and {given[0]} both name the images", "give one of them")
    if dataset is None and not given:
        raise UsageError("no images to extract",
                         "pass --dataset NAME, --images DIR or --images-list FILE")
    if dataset is not None:
        for flag, value in (("--pattern", pattern), ("--skip-unmatched", skip_unmatched)):
            if value:
                raise UsageError(f"{flag} applies to --images/--images-list only",
                                 "drop it: a dataset's loader reads its own labels")
        return dataset
    for flag, value in (("--root", root), ("--option", option), ("--trials", trials)):
        if value:
            raise UsageError(f"{flag} applies to --dataset only",
                             f"drop it with {given[0]}")
    if query_images is not None and images is None:
        raise UsageError("--query-images needs --images (the gallery folder)",
                         "pass --images DIR as well")
    if skip_unmatched and pattern is None:
        raise UsageError("--skip-unmatched applies with --pattern only",
                         "pass --pattern, or drop --skip-unmatched")
    source = ImageSource(images, query_images, images_list, pattern, skip_unmatched)
    typer.echo(source.summary(), err=True)
    return source


def _model_layout(model, dataset, root, option, trials, progress, show_note=True,
                  foreign=None):
    """(layout, loaded model or None): :func:`~reidcli.features.model_extract.model_layout`
    (its note on stderr).
    ``model`` is a path (loaded with ``foreign`` = {arch, allow_partial}) or a loaded model;
    a foreign checkpoint's load report goes to stderr when ``show_note``."""
    from reidcli.cli.data import parse_key_values
    from reidcli.features.layout import dataset_layout
    from reidcli.features.model_extract import model_layout
    from reidcli.models.checkpoint import LoadedModel, load_model
    from reidcli.models.training_identities import training_identities

    loaded = model if isinstance(model, LoadedModel) else \
        load_model(model, "cpu", **(foreign or {}))
    if loaded.kind == "foreign" and show_note:
        for key in ("foreign_summary", "foreign_describe"):
            if loaded.meta.get(key):
                typer.echo(f"model: {loaded.meta[key]}", err=True)
    if not isinstance(dataset, str):                         # --images / --images-list
        return dataset.layout(), loaded
    loader_options = parse_key_values(option, "--option")

    def make_layout(chosen):
        return dataset_layout(dataset, root, trials=chosen, progress=progress,
                              **loader_options)

    layout, note = model_layout(make_layout, training_identities(loaded.meta, loaded.path),
                                trials, loader_options)
    if note and show_note:
        typer.echo(f"note: {note}", err=True)
    return layout, loaded


def _extract_with_model(model, dataset, out, root, names, map_names, maps_dtype, map_size,
                        flip, shard, allow_large, device, amp, workers, option, trials,
                        batch_size, force, allow_overlap, foreign=None) -> None:
    from reidcli.cli.context import invoked_command
    from reidcli.data.transforms import parse_size
    from reidcli.features.model_extract import extract_model_store
    from reidcli.io import check_output
    from reidcli.progress import ENABLED
    from reidcli.store.writer import parse_shard

    size = parse_size(map_size, "map_size")
    part = parse_shard(shard) if shard else None
    check_output(out, force)
    layout, loaded = _model_layout(model, dataset, root, option, trials, ENABLED,
                                   foreign=foreign)
    path = extract_model_store(layout, out, loaded, features=names, maps=map_names,
                               map_size=size, maps_dtype=maps_dtype, flip=flip,
                               batch_size=batch_size, shard=part, device=device, amp=amp,
                               allow_large=allow_large, workers=workers, force=force,
                               progress=ENABLED, command=invoked_command(),
                               inputs=[f for f in [layout.image_folder()] if f],
                               allow_overlap=allow_overlap)
    from reidcli.store.reader import open_store

    with open_store(path) as st:
        typer.echo(f"wrote {path}: {st.num_rows} images"
                   + (f" (shard {part[0]}/{part[1]})" if part else "")
                   + f", features {', '.join(st.feature_names)}"
                   + (f", maps {', '.join(st.convmap_layers)}" if st.convmap_layers else ""),
                   err=True)


def _extract_distributed(launch, model, dataset, out, root, names, map_names, maps_dtype,
                         map_size, flip, shard, allow_large, device, amp, workers, option,
                         trials, batch_size, force, merge, timeout, allow_overlap) -> None:
    """One rank of ``torchrun … reid extract --model``: its shard, then rank 0 merges
    (:mod:`reidcli.features.distributed`)."""
    from reidcli.cli.context import invoked_command
    from reidcli.data.transforms import parse_size
    from reidcli.features.distributed import distributed_extract_model_store
    from reidcli.progress import ENABLED
    from reidcli.store.writer import parse_shard

    size = parse_size(map_size, "map_size")
    requested = parse_shard(shard) if shard else None

    def layout():
        return _model_layout(model, dataset, root, option, trials,
                             ENABLED and launch.rank == 0, show_note=launch.rank == 0)[0]

    result = distributed_extract_model_store(
        layout, out, model, env=launch, merge=merge, timeout=timeout, device=device,
        requested_shard=requested, force=force, progress=ENABLED, command=invoked_command(),
        features=names, maps=map_names, map_size=size, maps_dtype=maps_dtype, flip=flip,
        batch_size=batch_size, amp=amp, allow_large=allow_large, workers=workers,
        allow_overlap=allow_overlap,
        inputs=lambda lay: [f for f in [lay.image_folder()] if f])
    mine = result.reports[launch.rank]
    if result.merged:
        typer.echo(f"wrote {result.path}: {sum(r.rows or 0 for r in result.reports)} images "
                   f"from {launch.world_size} ranks ({result.backend}); shards removed",
                   err=True)
    elif not merge:
        typer.echo(f"rank {launch.rank}: wrote shard {mine.path} ({mine.rows} images)"
                   + ("; join with reid store merge --out " + str(out) + " "
                      + " ".join(map(str, result.shard_paths)) if launch.rank == 0 else ""),
                   err=True)
