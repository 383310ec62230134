"""DMG-Net step cost: seconds per iteration and peak memory of a BoT step vs first- and
second-order DMG-Net steps (docs/methods/dmgnet.md), on the present device.

* BoT: one batch of 2·P·K random images (P ids × 2K), L_soft + L_tri, backward, Adam step.
* DMG-Net order 1 / order 2: ``dmg_step_loss`` on P·K support + P·K query images (defaults:
  λ_MD = 1, inner SGD step with α = lr), backward, Adam step.

No data loading. Peak memory is ``torch.cuda.max_memory_allocated`` on CUDA and the peak
resident-set growth during the timed loop (sampled from /proc every millisecond) on CPU.
Ratios are against the BoT row measured in the same invocation. With ``--amp`` the BoT and
first-order steps run under autocast; the second-order step stays fp32 (decision D30 of
docs/methods/dmgnet.md) and a fp32 BoT row is added for the like-for-like ratio.

    python benchmarks/dmgnet_speed.py                      # tiny, 64x32, P=4, K=2, CPU
    python benchmarks/dmgnet_speed.py --backbone resnet50 --size 256x128 --p 16 --k 4 \\
        --device cuda --amp bf16
"""
from __future__ import annotations

import argparse
import contextlib
import os
import resource
import sys
import threading
import time
from typing import Callable, Sequence

import torch

sys.path.insert(0, os.path.dirname(__file__))
from _model_speed import describe, sync  # noqa: E402

from reidcli.data.transforms import parse_size  # noqa: E402
from reidcli.device import resolve_device  # noqa: E402
from reidcli.models.checkpoint import ModelSpec, build_model  # noqa: E402
from reidcli.training.dmgnet_meta import MetaConfig, dmg_step_loss  # noqa: E402
from reidcli.training.losses import batch_hard_triplet, label_smoothing_cross_entropy  # noqa: E402

LR = 3.5e-4
AMP_DTYPES = {"off": None, "bf16": torch.bfloat16, "fp16": torch.float16}


def _rss_bytes() -> int:
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:                                   # not Linux: peak RSS so far (KiB)
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class PeakMemory:
    """Peak bytes allocated during the ``with`` block: CUDA allocator, or RSS growth on CPU."""

    def __init__(self, device: torch.device):
        self.device = device
        self.peak = 0

    def __enter__(self):
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            return self
        self._base = _rss_bytes()
        self._top = self._base
        self._stop = threading.Event()

        def sample():
            while not self._stop.is_set():
                self._top = max(self._top, _rss_bytes())
                time.sleep(0.001)

        self._thread = threading.Thread(target=sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            self.peak = torch.cuda.max_memory_allocated(self.device)
        else:
            self._stop.set()
            self._thread.join()
            self.peak = max(self._top, _rss_bytes()) - self._base
        return False


def make_batch(p: int, k: int, size: tuple[int, int], num_ids: int, device: torch.device):
    """Random support and query sets of the same P ids: (xs, ys, xq, yq), x [P·K, 3, H, W]."""
    g = torch.Generator().manual_seed(0)
    ids = torch.randperm(num_ids, generator=g)[:p].repeat_interleave(k)
    xs = torch.randn(p * k, 3, *size, generator=g)
    xq = torch.randn(p * k, 3, *size, generator=g)
    return xs.to(device), ids.to(device), xq.to(device), ids.clone().to(device)


def measure(step: Callable[[], None], iters: int, warmup: int, device: torch.device
            ) -> tuple[float, int]:
    """(seconds per iteration, peak bytes) of ``step`` over ``iters`` timed iterations."""
    for _ in range(warmup):
        step()
    sync(device)
    with PeakMemory(device) as mem:
        start = time.perf_counter()
        for _ in range(iters):
            step()
        sync(device)
        seconds = (time.perf_counter() - start) / iters
    return seconds, mem.peak


def run_variant(kind: str, args, device: torch.device, amp: torch.dtype | None
                ) -> tuple[float, int]:
    torch.manual_seed(0)
    # DMG-Net's network is a BoT (docs/methods/dmgnet.md, D9): one classifier over all ids
    spec = ModelSpec(kind="bot", backbone=args.backbone, last_stride=1,
                     num_classes=args.num_ids, input_size=tuple(args.size))
    model = build_model(spec).to(device).train()
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=LR,
                                 weight_decay=5e-4)
    xs, ys, xq, yq = make_batch(args.p, args.k, args.size, args.num_ids, device)

    def autocast():
        if amp is None:
            return contextlib.nullcontext()
        return torch.autocast(device.type, dtype=amp)

    if kind == "bot":
        images, labels = torch.cat([xs, xq]), torch.cat([ys, yq])

        def step():
            with autocast():
                out = model(images)
                loss = label_smoothing_cross_entropy(out.logits, labels) + \
                    batch_hard_triplet(out.pool5, labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
    else:
        cfg = MetaConfig(meta_order=1 if kind == "order1" else 2)

        def step():
            with autocast():
                loss, _ = dmg_step_loss(model, xs, ys, xq, yq, LR, cfg)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()

    result = measure(step, args.iters, args.warmup, device)
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return result


def parse_args(argv: Sequence[str] | None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backbone", default="tiny")
    ap.add_argument("--size", default="64x32", help="HxW")
    ap.add_argument("--p", type=int, default=4, help="identities per set")
    ap.add_argument("--k", type=int, default=2, help="images per identity per set")
    ap.add_argument("--num-ids", type=int, default=100, help="classifier width")
    ap.add_argument("--iters", type=int, default=None, help="10 on CUDA, 5 on CPU")
    ap.add_argument("--warmup", type=int, default=None, help="3 on CUDA, 2 on CPU")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--amp", choices=sorted(AMP_DTYPES), default="off")
    args = ap.parse_args(argv)
    args.size = parse_size(args.size)
    return args


def main(argv: Sequence[str] | None = None) -> list[tuple[str, str, float, int]]:
    args = parse_args(argv)
    device = resolve_device(args.device)
    cuda = device.type == "cuda"
    args.iters = args.iters or (10 if cuda else 5)
    args.warmup = args.warmup if args.warmup is not None else (3 if cuda else 2)
    amp = AMP_DTYPES[args.amp]
    plan = [("BoT", "bot", amp), ("DMG-Net order 1", "order1", amp),
            ("DMG-Net order 2", "order2", None)]
    if amp is not None:
        plan.insert(1, ("BoT", "bot", None))
    rows = []
    for label, kind, dtype in plan:
        seconds, peak = run_variant(kind, args, device, dtype)
        precision = "fp32" if dtype is None else str(dtype).replace("torch.", "")
        rows.append((label, precision, seconds, peak))
    h, w = args.size
    print(f"DMG-Net step cost on {describe(device)}: {args.backbone} {h}x{w}, P={args.p}, "
          f"K={args.k} (support + query = {2 * args.p * args.k} images), {args.iters} timed "
          f"iterations after {args.warmup} warm-up")
    print(f"{'step':<18} {'precision':<10} {'s/iter':>9} {'× BoT':>7} {'peak MiB':>10} "
          f"{'× BoT':>7}")
    ref_s, ref_m = rows[0][2], rows[0][3]
    for label, precision, seconds, peak in rows:
        ratio_m = f"{peak / ref_m:.2f}" if ref_m > 0 else "n/a"
        print(f"{label:<18} {precision:<10} {seconds:>9.4f} {seconds / ref_s:>7.2f} "
              f"{peak / 2**20:>10.1f} {ratio_m:>7}")
    return rows


if __name__ == "__main__":
    main()
