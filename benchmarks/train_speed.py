"""PCB training throughput (images/s): fp32 vs channels_last vs AMP, on the present device.

One training step = forward of PCB (6 stripes, 1×1 reduction, 6 classifiers) on a batch of
random 384×128 images, the summed part cross-entropies, backward and an SGD step — the
engine's own model, loss and optimiser (docs/methods/pcb.md), without image decoding or data loading
(``reid train`` reports the end-to-end images/s, loader included, in its summary line and
metrics.csv). Ratios are against the fp32 run measured in the same invocation.

    python benchmarks/train_speed.py [--backbone resnet50] [--batch-size 64] [--iters 20]
        [--input-size 384x128] [--device auto]
"""
from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from _model_speed import (describe, images_per_second, parse_run_args, print_table,  # noqa: E402
                          variants)

from reidcli.models.checkpoint import build_model  # noqa: E402
from reidcli.training.config import make_config  # noqa: E402
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
    run = parse_run_args(__doc__, argv, cuda_batch=64, cuda_warmup=5)
    cfg = make_config("pcb", backbone=run.backbone, input_size=run.input_size,
                      init="scratch", batch_size=run.batch)
    rows = [(label, train_rate(cfg, run.device, run.batch, run.iters, run.warmup, amp, cl))
            for label, amp, cl in variants(run.device)]
    size = f"{run.input_size[0]}x{run.input_size[1]}"
    print_table(f"PCB training, {run.backbone} {size}, batch {run.batch}, {run.iters} "
                f"timed steps on {describe(run.device)}", rows)


if __name__ == "__main__":
    main()
