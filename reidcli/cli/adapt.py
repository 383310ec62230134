"""`reid adapt METHOD` — test-time adaptation of a store's query features (thin CLI over
:func:`reidcli.adapt.adapt_store`; options and defaults of docs/methods/dart3.md).

One command per adaptation method of the registry. Its ``--help`` lists only the options the
method reads, derived from its registration (:func:`method_options`): the options of every
method, the configuration fields its module names in ``extras["reads"]``, the optimisation
loop's options when it optimises (``extras["build"]``) and the model's when it can re-run the
backbone (``extras["needs_model"]`` for its mode). Other options are still accepted, hidden,
and print one line saying they have no effect; ``--param key=value`` sets any field of
:class:`~reidcli.adapt.AdaptConfig`.
"""
from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path
from typing import Any, List, Optional

import typer

app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Test-time adaptation of a store's features (DART3, Norm, TENT, TEMP).")

PARAM_HELP = ("Any adaptation setting as key=value (repeatable), e.g. tau=50; see "
              "docs/methods/dart3.md.")


def _o(annotation, default, flag: str, help: str):
    return annotation, default, flag, help


#: every option: name → (annotation, default, flag, help); the name is the AdaptConfig field
#: it sets, except the CLI's own (store, out, model, …) and ``no_external`` (external=False)
OPTIONS: dict[str, tuple] = {
    "store": _o(Path, ..., "--store", "Input store (.h5)."),
    "out": _o(Path, ..., "--out", "Adapted store to write (.h5)."),
    "feature": _o(Optional[str], None, "--feature", "Store feature (default: the store's "
                  "default feature)."),
    "trial": _o(int, 0, "--trial", "Protocol trial to adapt."),
    "query_cams": _o(Optional[str], None, "--query-cams", "Adapt only queries of these "
                     "0-based camids (in every domain)."),
    "mode": _o(str, "lite", "--mode", "lite (stored embeddings) | full (also the backbone's "
               "BN γ/β; needs --model)."),
    "model": _o(Optional[Path], None, "--model", "Run directory / model.pt of reid train, "
                "or a fast-reid / torchreid / reid-strong-baseline / layumi checkpoint "
                "recognised from its keys (docs/models.md)."),
    "images_root": _o(Optional[Path], None, "--images-root", "Folder the store's relative "
                      "image paths are read under."),
    "save_model": _o(Optional[Path], None, "--save-model", "Write the adapted model (BN "
                     "γ/β) here."),
    "batch_size": _o(Optional[int], None, "--batch-size", "Queries per batch (default: the "
                     "method's, `reid methods --stage adapt`)."),
    "steps": _o(int, 1, "--steps", "Optimisation steps per batch T."),
    "lr": _o(Optional[float], None, "--lr", "Learning rate (default: the method's)."),
    "optimizer": _o(str, "adam", "--optimizer", "adam | sgd."),
    "tau": _o(float, 100.0, "--tau", "Softmax temperature τ."),
    "topk": _o(int, 3, "--topk", "Nearest gallery entries k in the loss."),
    "distance": _o(str, "euclidean", "--distance", "euclidean | cosine (Tab 7 ablation; "
                   "re-tune --tau)."),
    "no_external": _o(bool, False, "--no-external", "Full mode: no M, Σ (loss on raw "
                      "features, BN γ/β only; Tab 4)."),
    "episodic": _o(bool, False, "--episodic", "Reset the state before every batch."),
    "split_by_query_camera": _o(bool, False, "--split-by-query-camera", "One independent "
                                "stream per query camera (setting A)."),
    "emit": _o(str, "pre", "--emit", "pre (Alg 2: before the batch's update) | post."),
    "order": _o(str, "shuffle", "--order", "shuffle (seeded) | stored."),
    "seed": _o(int, 0, "--seed", "Seed of the order, subsamples, grounding."),
    "stats": _o(str, "pooled", "--stats", "pooled (Alg 1) | separate."),
    "std_ddof": _o(int, 0, "--std-ddof", "0 population std | 1 unbiased."),
    "eps": _o(float, 1e-6, "--eps", "Floor of the scales ε."),
    "stats_max_per_camera": _o(Optional[int], None, "--stats-max-per-camera", "At most N rows "
                               "per camera for the statistics."),
    "grounding": _o(int, 0, "--grounding", "Grounding rows per batch (seen-camera / source "
                    "samples)."),
    "grounding_split": _o(str, "auto", "--grounding-split", "Store split of the grounding "
                          "pool (auto: grounding, else train)."),
    "bn_mode": _o(Optional[str], None, "--bn-mode", "batch | running (default: the "
                  "method's)."),
    "tent_logits": _o(str, "classifier", "--tent-logits", "classifier | features."),
    "temp_k": _o(int, 50, "--temp-k", "Top-k similarities."),
    "temp_gallery_sample": _o(int, 30000, "--temp-gallery-sample", "Gallery rows in the "
                              "loss."),
    "temp_reg": _o(float, 1e-4, "--temp-reg", "Anti-forgetting λ."),
    "precision": _o(str, "fp32", "--precision", "fp32 | bf16 (gallery GEMMs in bfloat16: ~3× "
                    "faster on CPUs with AVX-512 BF16 and on GPUs, ≈0.4 % error)."),
    "device": _o(str, "auto", "--device", "auto | cpu | cuda."),
    "workers": _o(Optional[int], None, "--workers", "Image loader workers."),
    "drop_convmaps": _o(bool, False, "--drop-convmaps", "Do not copy the input's conv maps "
                        "into the output."),
    "force": _o(bool, False, "--force", "Overwrite --out."),
    "quiet": _o(bool, False, "--quiet", "No progress or summary."),
}

#: options of every method
EVERY = ("store", "out", "feature", "trial", "query_cams", "drop_convmaps", "force", "quiet")
#: options of a method that optimises batch by batch (extras["build"])
LOOP = ("batch_size", "steps", "lr", "optimizer", "episodic", "split_by_query_camera", "emit",
        "order", "seed", "grounding", "grounding_split", "device")
#: options of a method that re-runs the backbone (extras["needs_model"])
MODEL = ("model", "images_root", "save_model", "bn_mode", "workers")
#: registry field name → option name where they differ
FIELD_OPTION = {"external": "no_external"}
#: options that are not AdaptConfig fields
CLI_ONLY = ("store", "out", "model", "images_root", "save_model", "drop_convmaps", "force",
            "quiet", "no_external")


def method_options(info) -> list[str]:
    """The options ``reid adapt <info.name>`` lists, in :data:`OPTIONS` order (all of them
    for a method that declares no ``reads``)."""
    from reidcli import registry

    extras, modes = info.extras, ("lite", "full")
    if "alias_of" in extras:                        # dart3-lite = dart3 --mode lite
        target, mode = extras["alias_of"]
        extras, modes = {**registry.get(target, "adapt").extras, **extras}, (mode,)
    reads = extras.get("reads")
    if reads is None:
        return list(OPTIONS)
    chosen = set(EVERY) | {FIELD_OPTION.get(f, f) for f in reads}
    if "build" in extras:
        chosen |= set(LOOP)
    if set(extras.get("needs_model", ())) & set(modes):
        chosen |= set(MODEL)
    return [name for name in OPTIONS if name in chosen]


def option_flags(shown: list[str]) -> dict[str, str]:
    """AdaptConfig field → the flag that sets it on a command showing ``shown``
    (``--param field`` for the others)."""
    fields = [f.name for f in dataclasses.fields(_config_class())]
    flags = {f: f"--param {f}" for f in fields}
    for name in shown:
        field = next((f for f, o in FIELD_OPTION.items() if o == name), name)
        flags[field] = OPTIONS[name][2]
    return flags


def _config_class():
    from reidcli.adapt import AdaptConfig
    return AdaptConfig


def _cams(text: Optional[str]) -> Optional[list[int]]:
    from reidcli.cameras import parse_cameras
    return parse_cameras(text, "query_cams", owner="adaptation")


def _signature(shown: list[str]) -> list[inspect.Parameter]:
    params = []
    for name, (annotation, default, flag, text) in OPTIONS.items():
        hidden = name not in shown
        if hidden:                                  # accepted, unlisted: None = not given
            annotation = annotation if str(annotation).startswith("typing.Optional") \
                else Optional[annotation]
            default = None
        info = typer.Option(default, flag, help=text, hidden=hidden)
        params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=info,
                                        annotation=annotation))
    params.append(inspect.Parameter("param", inspect.Parameter.KEYWORD_ONLY,
                                    default=typer.Option(None, "--param", help=PARAM_HELP),
                                    annotation=Optional[List[str]]))
    return params


def _make(method: str, shown: list[str]):
    def command(**values: Any) -> None:
        from reidcli.adapt import adapt_store
        from reidcli.cli.context import invoked_command, set_flag_names
        from reidcli.cli.data import parse_key_values
        from reidcli.cli.warning_lines import print_warning
        from reidcli.errors import UsageError
        from reidcli.progress import ENABLED

        set_flag_names(option_flags(shown))
        for name in OPTIONS:
            if name not in shown and values.get(name) is not None \
                    and values.get(name) is not False:
                print_warning(f"{OPTIONS[name][2]} has no effect on reid adapt {method} — "
                              "drop it (see reid adapt " + method + " --help)")
        given = {k: v for k, v in values.items() if k in OPTIONS and v is not None}
        config = {k: v for k, v in given.items() if k not in CLI_ONLY}
        if "query_cams" in config:
            config["query_cams"] = _cams(config["query_cams"])
        if given.get("no_external"):
            config["external"] = False
        settings = parse_key_values(values.get("param"), "--param")
        fields = {f.name for f in dataclasses.fields(_config_class())} - {"method"}
        unknown = sorted(set(settings) - fields)
        if unknown:
            raise UsageError(f"--param {unknown[0]} is not an adaptation setting",
                             f"settings: {', '.join(sorted(fields))}")
        cfg = _config_class()(method=method, **{**config, **settings})
        result = adapt_store(given["store"], given["out"], cfg, model=given.get("model"),
                             images_root=given.get("images_root"),
                             save_model=given.get("save_model"),
                             force=bool(given.get("force")),
                             drop_convmaps=bool(given.get("drop_convmaps")),
                             progress=ENABLED and not given.get("quiet"),
                             command=invoked_command())
        if given.get("quiet"):
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

    signature = _signature(shown)
    command.__signature__ = inspect.Signature(signature)
    command.__annotations__ = {p.name: p.annotation for p in signature}
    command.__name__ = method.replace("-", "_")
    return command


_BUILT: set[str] = set()

#: closed-form methods whose module imports no torch (reidcli/adapt/norm.py): `reid adapt
#: norm|none` builds only its own command, so that a z-score costs no torch import
NUMPY_ONLY = ("norm", "none")


def build_commands() -> None:
    """One command per adaptation method of the registry (each module declares its own);
    built once, only when ``reid adapt`` runs (the methods import torch) — only the
    invoked one when it is a :data:`NUMPY_ONLY` method."""
    from reidcli import registry
    from reidcli.cli.context import invoked_command

    words = [a for a in invoked_command()[1:] if not a.startswith("-")]
    if words[:1] == ["adapt"] and len(words) > 1 and words[1] in NUMPY_ONLY:
        import reidcli.adapt.norm  # noqa: F401  (registers none and norm)
        found = [registry.get(words[1], "adapt")]
    else:
        found = registry.methods("adapt")
    for info in found:
        if info.name in _BUILT:
            continue
        _BUILT.add(info.name)
        command = _make(info.name, method_options(info))
        command.__doc__ = info.summary
        app.command(info.name, help=info.summary)(command)
