"""Seconds per query of every ``reid adapt`` method against the batch size — the grid of
DART3's Table 5 — on an MSMT17-sized gallery of random embeddings (82,161 × 2,048, 15
cameras), on CPU and on CUDA when present.

Every method runs through :func:`reidcli.adapt.adapt_features` (the code ``reid adapt``
runs); its time covers the queries' processing only (for none/norm/DART3 LITE the backbone's
encoding of the queries is not included; the camera statistics and G̃ are a one-time set-up,
reported separately). The model-based methods (TENT, TEMP, full DART3) re-encode random
images with a BoT (``--backbone``: ``tiny`` at 64×32 on CPU by default, ResNet-50 at 256×128
on CUDA), whose embeddings (d = 128 for tiny) replace the 2,048-d ones.

Same-run references: DART3 LITE with its loss written in plain autograd
(:func:`reidcli.adapt.losses.dart3_loss_reference`), at the batch sizes of ``--ref-batches``;
and the methods of ``--before-methods`` with the fused loss of an earlier revision
(``--before-rev``, default the code before issue 32: ``reidcli/adapt/losses.py`` read from
git and loaded beside the current one, so both run in this process on the same problem),
timed right after the current code, ``--repeats`` times alternately; medians are printed,
with the ratio before / now.

    python benchmarks/adapt_speed.py [--gallery 82161] [--dim 2048] [--batches 1,2,8,16,32,64]
        [--methods none,norm,dart3-lite,dart3,tent,temp] [--device auto|cpu|cuda]
        [--before-methods dart3-lite] [--before-rev 882d295] [--repeats 1]
"""
from __future__ import annotations

import argparse
import contextlib
import os
import platform
import statistics
import subprocess
import sys
import time
import types
from pathlib import Path
from unittest import mock

# as `reid` does before torch loads (reidcli/cli/main.py): idle OpenMP workers sleep
# instead of spinning on the shared cores; a value set by the caller is kept
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch

from reidcli.adapt import AdaptConfig, adapt_features, inputs_from_arrays
from reidcli.adapt import losses

#: DART3 Table 5 (s per test sample, CLIP-ReID on an RTX A6000; "–" = not run there)
PAPER_TABLE5 = {"none": (0.110, 0.030, 0.004, 0.002, 0.001, 0.0003),
                "norm": (0.112, 0.032, 0.004, 0.002, 0.001, 0.001),
                "tent": (None, 0.180, 0.057, 0.049, 0.042, 0.038),
                "temp": (None, 0.181, 0.059, 0.049, 0.043, 0.039),
                "dart3": (None, 0.408, 0.116, 0.077, 0.058, 0.047),
                "dart3-lite": (0.136, 0.092, 0.047, 0.046, 0.045, 0.043)}
PAPER_BATCHES = (1, 2, 8, 16, 32, 64)
MODEL_METHODS = ("dart3", "tent", "temp")
#: target of issue 7: DART3 LITE at batch 64 on 2 CPU cores
TARGET_MS = 5.0
#: the revision whose DART3 loss is timed as "before": the last one before issue 32
BEFORE_REV = "882d295"


def random_problem(num_gallery: int, dim: int, num_queries: int, cams: int, seed: int = 0):
    """Camera-biased random embeddings: queries [Nq, d], gallery [Ng, d] and 0-based cameras."""
    gen = torch.Generator().manual_seed(seed)
    shift = torch.randn(cams, dim, generator=gen)
    g_cams = torch.randint(0, cams, (num_gallery,), generator=gen)
    q_cams = torch.randint(0, cams, (num_queries,), generator=gen)
    gallery = torch.randn(num_gallery, dim, generator=gen).add_(shift[g_cams])
    queries = torch.randn(num_queries, dim, generator=gen).add_(shift[q_cams])
    return queries.numpy(), q_cams.numpy(), gallery.numpy(), g_cams.numpy()


def make_model(backbone: str, input_size, device, num_classes: int = 1000):
    from reidcli.models.checkpoint import LoadedModel, ModelSpec, build_model

    torch.manual_seed(0)
    spec = ModelSpec(kind="bot", backbone=backbone, num_classes=num_classes,
                     input_size=tuple(input_size))
    module = build_model(spec).to(device).eval()
    return LoadedModel(module=module, spec=spec, meta={}, path=f"random {backbone}",
                       device=torch.device(device))


def losses_at(rev: str) -> types.ModuleType:
    """``reidcli/adapt/losses.py`` as of git revision ``rev``, loaded as a separate module."""
    root = Path(__file__).resolve().parents[1]
    path = "reidcli/adapt/losses.py"
    try:
        source = subprocess.run(["git", "-C", str(root), "show", f"{rev}:{path}"],
                                capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        raise SystemExit(f"error: cannot read {path} at revision {rev} ({exc}) — pass "
                         "--before-methods '' or another --before-rev") from None
    name = f"_losses_before_{rev}"
    module = types.ModuleType(name)
    module.__file__ = f"{rev}:{path}"
    sys.modules[name] = module                  # dataclasses look their module up
    exec(compile(source, module.__file__, "exec"), module.__dict__)
    return module


def _reference_loss(zhat, gallery, tau, k, distance="euclidean"):
    """DART3's loss in plain autograd on the prepared gallery's rows (the reference)."""
    return losses.dart3_loss_reference(zhat, gallery.rows, tau, k, distance)


def time_method(inputs, method: str, batch: int, device: str, model=None, images=None,
                reference: bool = False, precision: str = "fp32",
                before: types.ModuleType | None = None) -> float:
    """Seconds per query of one (method, batch size) run through ``adapt_features``.

    ``images`` [≥ batch, 3, H, W] are fed to the model-based methods in place of decoded
    files; ``reference`` swaps DART3's fused loss for the autograd one; ``before`` (a
    :func:`losses_at` module) swaps it for that revision's fused loss and gallery."""
    name = "dart3" if method == "dart3-lite" else method
    own = dict(mode="full" if method == "dart3" else "lite", precision=precision) \
        if name == "dart3" else {}                  # DART3's own parameters
    cfg = AdaptConfig(name, batch_size=batch, device=device, **own)
    with contextlib.ExitStack() as stack:
        if images is not None:
            def feed(inputs_, plan, sel, runner, root, cfg_):
                return (images[:len(q) + len(g)] for q, g in zip(plan.query_pos,
                                                                 plan.ground_pos))
            stack.enter_context(mock.patch("reidcli.adapt.run._image_batches", feed))
        if reference:
            stack.enter_context(mock.patch("reidcli.adapt.dart3.dart3_loss", _reference_loss))
        if before is not None:
            stack.enter_context(mock.patch("reidcli.adapt.dart3.dart3_loss", before.dart3_loss))
            def gallery(*args, precision="fp32", **kwargs):   # its spelling: fp32 | bf16
                precision = {"float32": "fp32", "bfloat16": "bf16"}.get(precision, precision)
                return before.PreparedGallery(*args, precision=precision, **kwargs)
            stack.enter_context(mock.patch("reidcli.adapt.dart3.PreparedGallery", gallery))
        out = adapt_features(inputs, cfg, model=model)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return out.per_query_seconds


def _load() -> str:
    """The 1-minute load average (the timings depend on what else the cores run)."""
    return f"load average {os.getloadavg()[0]:.2f}" if hasattr(os, "getloadavg") else ""


def queries_for(batch: int, minimum: int) -> int:
    return max(minimum, 3 * batch)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gallery", type=int, default=82161)
    parser.add_argument("--dim", type=int, default=2048)
    parser.add_argument("--cameras", type=int, default=15)
    parser.add_argument("--batches", default="1,2,8,16,32,64")
    parser.add_argument("--ref-batches", default="8,64")
    parser.add_argument("--methods", default="none,norm,dart3-lite,dart3-lite/bf16,dart3,"
                        "tent,temp", help="methods; METHOD/bf16 runs DART3's gallery GEMMs in "
                        "bfloat16 (--precision bf16)")
    parser.add_argument("--before-methods", default="dart3-lite",
                        help="methods of --methods also timed, right after each current "
                        "timing, with DART3's fused loss of --before-rev: dart3-lite, "
                        "dart3-lite/bf16 or none (empty)")
    parser.add_argument("--before-rev", default=BEFORE_REV,
                        help="git revision of reidcli/adapt/losses.py timed as 'before' "
                        f"(default {BEFORE_REV}: before issue 32)")
    parser.add_argument("--repeats", type=int, default=1,
                        help="timings per cell (current and before alternately); medians")
    parser.add_argument("--min-queries", type=int, default=32,
                        help="queries per run (at least 3 batches)")
    parser.add_argument("--device", default="auto", help="auto (cpu, and cuda if present) | "
                        "cpu | cuda")
    parser.add_argument("--backbone", default=None, help="model of TENT/TEMP/full DART3 "
                        "(default: tiny on CPU, resnet50 on CUDA)")
    args = parser.parse_args(argv)
    batches = [int(b) for b in args.batches.split(",")]
    ref_batches = [int(b) for b in args.ref_batches.split(",") if b]
    methods = [m for m in args.methods.split(",") if m]
    before_methods = [m for m in args.before_methods.split(",") if m]
    if any(m.partition("/")[0] != "dart3-lite" for m in before_methods):
        parser.error("--before-methods takes dart3-lite and dart3-lite/bf16")
    previous = losses_at(args.before_rev) if before_methods else None
    devices = (["cpu"] + (["cuda"] if torch.cuda.is_available() else [])) \
        if args.device == "auto" else [args.device]
    n_max = queries_for(max(batches), args.min_queries)
    started = time.perf_counter()
    q, q_cams, g, g_cams = random_problem(args.gallery, args.dim, n_max, args.cameras)
    print(f"adapt speed: gallery {args.gallery:,} × {args.dim}, {args.cameras} cameras; "
          f"{platform.processor() or platform.machine()}, torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads; problem drawn in "
          f"{time.perf_counter() - started:.1f} s; {_load()}")
    for device in devices:
        backbone = args.backbone or ("resnet50" if device == "cuda" else "tiny")
        size = (256, 128) if backbone != "tiny" else (64, 32)
        rows: dict[str, list[float | None]] = {}
        before: dict[str, list[float]] = {}      # --before-rev (--before-methods)
        setup = time.perf_counter()
        base = inputs_from_arrays(q, q_cams, g, g_cams)
        adapt_features(inputs_from_arrays(q[:8], q_cams[:8], g, g_cams), AdaptConfig("norm"))
        setup = time.perf_counter() - setup
        for precision in ("fp32", "bf16"):      # one-time library set-up, outside the timings
            adapt_features(inputs_from_arrays(q[:4], q_cams[:4], g[:1024], g_cams[:1024]),
                           AdaptConfig("dart3", batch_size=2, device=device,
                                       precision=precision))
        model = images = model_inputs = None
        if any(m.partition("/")[0] in MODEL_METHODS for m in methods):
            model = make_model(backbone, size, device)
            with torch.no_grad():
                d_model = model.features(torch.zeros(2, 3, *size, device=device))["bnneck"]
            gen = torch.Generator().manual_seed(1)
            images = torch.randn(max(batches), 3, *size, generator=gen)
            mq, mq_cams, mg, mg_cams = random_problem(args.gallery, d_model.shape[1], n_max,
                                                      args.cameras, seed=2)
            model_inputs = inputs_from_arrays(mq, mq_cams, mg, mg_cams, feature="bnneck")
        for label in methods:
            method, _, precision = label.partition("/")
            rows[label] = []
            for b in batches:
                if method in ("tent", "dart3") and b < 2:
                    rows[label].append(None)        # batch-statistics BN: Tab 5's "–"
                    continue
                n = queries_for(b, args.min_queries)
                is_model = method in MODEL_METHODS
                src = model_inputs if is_model else base
                sub = inputs_from_arrays(src.queries[:n],
                                         src.cameras.cam_ids[src.query_codes[:n]],
                                         src.gallery, src.cameras.cam_ids[src.gallery_codes],
                                         feature=src.feature)
                now, then = [], []
                for _ in range(max(args.repeats, 1)):
                    fresh = make_model(backbone, size, device) if is_model else None
                    now.append(time_method(sub, method, b, device, fresh,
                                           images if is_model else None,
                                           precision=precision or "fp32"))
                    if label in before_methods and device == "cpu":  # right after: same load
                        then.append(time_method(sub, method, b, device,
                                                precision=precision or "fp32",
                                                before=previous))
                rows[label].append(statistics.median(now))
                if then:
                    before.setdefault(label, []).append(statistics.median(then))
        ref_row = []
        for b in batches:
            if b not in ref_batches:
                ref_row.append(None)
                continue
            n = queries_for(b, args.min_queries)
            sub = inputs_from_arrays(q[:n], q_cams[:n], g, g_cams)
            ref_row.append(time_method(sub, "dart3-lite", b, device, reference=True))
        print(f"\n{device}: ms per query (set-up of statistics + G̃: {setup:.1f} s; "
              f"model methods: BoT {backbone} {size[0]}x{size[1]}, d = "
              f"{model_inputs.dim if model_inputs else args.dim})")
        head = "method".ljust(26) + "".join(f"B={b}".rjust(10) for b in batches)
        print(head)
        for method, vals in rows.items():
            print(method.ljust(26) + "".join(("–" if v is None else f"{1e3 * v:.2f}").rjust(10)
                                             for v in vals))
        if before:
            print(f"before: DART3's loss of revision {args.before_rev} (--before-rev)")
        for label, vals in before.items():     # --before-rev, then before / now
            print(f"{label}, before".ljust(26) + "".join(
                f"{1e3 * v:.2f}".rjust(10) for v in vals))
            now = rows.get(label)
            if now:
                print("  before / now".ljust(26) + "".join(
                    ("" if o is None else f"{v / o:.2f}×").rjust(10)
                    for v, o in zip(vals, now)))
        if ref_batches:
            print("dart3-lite, autograd loss".ljust(26) + "".join(
                ("" if v is None else f"{1e3 * v:.2f}").rjust(10) for v in ref_row))
            lite = rows.get("dart3-lite")
            if lite:
                print("  speed-up (reference/ours)".ljust(26) + "".join(
                    ("" if r is None or o is None else f"{r / o:.2f}×").rjust(10)
                    for r, o in zip(ref_row, lite)))
        print("paper Tab 5 (A6000, ms)".ljust(26))
        for method in dict.fromkeys(m.partition("/")[0] for m in methods):
            ref = dict(zip(PAPER_BATCHES, PAPER_TABLE5.get(method, ())))
            print(f"  {method}".ljust(26) + "".join(
                ("–" if ref.get(b) is None else f"{1e3 * ref[b]:.1f}").rjust(10)
                for b in batches))
        for label in ("dart3-lite", "dart3-lite/bf16"):
            if device == "cpu" and label in rows and 64 in batches:
                ms = 1e3 * rows[label][batches.index(64)]
                verdict = "PASS" if ms <= TARGET_MS else "FAIL"
                print(f"{verdict}  {label} at B=64 on CPU: {ms:.2f} ms/query (target ≤ "
                      f"{TARGET_MS:.0f} ms; paper 43 ms on an RTX A6000)")
    print(f"finished; {_load()}")


if __name__ == "__main__":
    main()
