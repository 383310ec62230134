"""PCB training throughput (images/s): fp32 vs channels_last vs AMP, on the present device.

One training step = forward of PCB (6 stripes, 1×1 reduction, 6 classifiers) on a batch of
random 384×128 images, the summed part cross-entropies, backward and an SGD step — the
engine's own model, loss and optimiser (pcb.md §2), without image decoding (data loading is
measured by ``--with-loader``, which adds the synthetic dataset through the real loader).
Ratios are against the fp32 run measured in the same invocation.

    python benchmarks/train_speed.py [--backbone resnet50] [--batch-size 64] [--iters 20]
        [--input-size 384x128] [--device auto]
"""
from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from _model_speed import describe, images_per_second, print_table, variants  # noqa: E402

from reidcli.data.transforms import parse_size  # noqa: E402
from reidcli.models.checkpoint import build_model  # noqa: E402
from reidcli.training.config import make_config  # noqa: E402
from reidcli.training.engine import resolve_device  # noqa: E402
from reidcli.training.pcb_trainer import PCBTrainer  # noqa: E402


def train_rate(cfg, device, batch, iters, warmup, amp, channels_last) -> float:
    trainer = PCBTrainer()
    torch.manual_seed(0)
    model = build_model(trainer.model_spec(cfg, 751)).to(device)
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    model = model.to(memory_format=fmt).train()
    opt = trainer.optimizer(trainer.phases(cfg)[0].groups(model, cfg), cfg)
    scaler = torch.amp.GradScaler("cuda", enabled=amp == torch.float16)
    x = torch.randn(batch, 3, *cfg.input_size, device=device).contiguous(memory_format=fmt)
    y = torch.randint(0, 751, (batch,), device=device)

    def step():
        with torch.autocast(device.type, dtype=amp or torch.float32, enabled=amp is not None):
            out = model(x)
        loss, _ = trainer.loss(out, y, cfg)
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()

    return images_per_second(step, batch, iters, warmup, device)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backbone", default="resnet50")
    ap.add_argument("--input-size", default="384x128")
    ap.add_argument("--batch-size", type=int, default=None, help="64 on CUDA, 8 on CPU")
    ap.add_argument("--iters", type=int, default=None, help="20 on CUDA, 2 on CPU")
    ap.add_argument("--warmup", type=int, default=None)
    ap.add_argument("--device", default="auto")
    args = ap.parse_args(argv)
    device = resolve_device(args.device)
    cuda = device.type == "cuda"
    batch = args.batch_size or (64 if cuda else 8)
    iters = args.iters or (20 if cuda else 2)
    warmup = args.warmup if args.warmup is not None else (5 if cuda else 1)
    cfg = make_config("pcb", backbone=args.backbone, input_size=parse_size(args.input_size),
                      init="scratch", batch_size=batch)
    if cuda:
        torch.backends.cudnn.benchmark = True
    rows = [(label, train_rate(cfg, device, batch, iters, warmup, amp, cl))
            for label, amp, cl in variants(device)]
    print_table(f"PCB training, {args.backbone} {args.input_size}, batch {batch}, {iters} "
                f"timed steps on {describe(device)}", rows)


if __name__ == "__main__":
    main()
