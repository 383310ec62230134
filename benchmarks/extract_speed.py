"""PCB extraction throughput (images/s): embeddings + the four pooled conv maps, fp32 vs
channels_last vs AMP, on the present device — through ``reidcli.features.model_extract
.embed_batch``, the function ``reid extract --model`` runs per batch (host copies included).
A second table times embeddings only. Ratios are against fp32 in the same run.

    python benchmarks/extract_speed.py [--backbone resnet50] [--batch-size 128] [--iters 20]
"""
from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from _model_speed import (describe, images_per_second, parse_run_args, print_table,  # noqa: E402
                          variants)

from reidcli.features.model_extract import embed_batch  # noqa: E402
from reidcli.models.checkpoint import LoadedModel, ModelSpec, build_model  # noqa: E402

MAPS = ["conv2_x", "conv3_x", "conv4_x", "conv5_x"]


def extract_rate(spec, device, batch, iters, warmup, amp, channels_last, maps) -> float:
    torch.manual_seed(0)
    module = build_model(spec).to(device).eval()
    if channels_last:
        module = module.to(memory_format=torch.channels_last)
    model = LoadedModel(module=module, spec=spec, meta={}, path="benchmark", device=device)
    x = torch.randn(batch, 3, *spec.input_size)
    if device.type == "cuda":
        x = x.pin_memory()
    size = (spec.input_size[0] // 16, spec.input_size[1] // 16)
    return images_per_second(lambda: embed_batch(model, x, maps, size, False, amp,
                                                 channels_last), batch, iters, warmup, device)


def main(argv=None) -> None:
    run = parse_run_args(__doc__, argv, cuda_batch=128, cuda_warmup=3)
    spec = ModelSpec(kind="pcb", backbone=run.backbone, num_classes=0,
                     input_size=run.input_size)
    where = f"{run.backbone} {run.input_size[0]}x{run.input_size[1]}, batch {run.batch}, " \
            f"{run.iters} timed batches on {describe(run.device)}"
    for title, maps in (("PCB extraction, pcb_g/pcb_h + conv2_x..conv5_x maps", MAPS),
                        ("PCB extraction, embeddings only", [])):
        rows = [(label, extract_rate(spec, run.device, run.batch, run.iters, run.warmup, amp,
                                     cl, maps)) for label, amp, cl in variants(run.device)]
        print_table(f"{title}, {where}", rows)
        print()


if __name__ == "__main__":
    main()
