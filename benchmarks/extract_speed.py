"""PCB extraction throughput (images/s): embeddings + the four pooled conv maps, fp32 vs
channels_last vs AMP, on the present device — through ``reidcli.features.model_extract
.embed_batch``, the function ``reid extract --model`` runs per batch (host copies included).
A second table times embeddings only. Ratios are against fp32 in the same run.

    python benchmarks/extract_speed.py [--backbone resnet50] [--batch-size 128] [--iters 20]
"""
from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from _model_speed import describe, images_per_second, print_table, variants  # noqa: E402

from reidcli.data.transforms import parse_size  # noqa: E402
from reidcli.features.model_extract import embed_batch  # noqa: E402
from reidcli.models.checkpoint import LoadedModel, ModelSpec, build_model  # noqa: E402
from reidcli.training.engine import resolve_device  # noqa: E402

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
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backbone", default="resnet50")
    ap.add_argument("--input-size", default="384x128")
    ap.add_argument("--batch-size", type=int, default=None, help="128 on CUDA, 8 on CPU")
    ap.add_argument("--iters", type=int, default=None, help="20 on CUDA, 2 on CPU")
    ap.add_argument("--warmup", type=int, default=None)
    ap.add_argument("--device", default="auto")
    args = ap.parse_args(argv)
    device = resolve_device(args.device)
    cuda = device.type == "cuda"
    batch = args.batch_size or (128 if cuda else 8)
    iters = args.iters or (20 if cuda else 2)
    warmup = args.warmup if args.warmup is not None else (3 if cuda else 1)
    spec = ModelSpec(kind="pcb", backbone=args.backbone, num_classes=0,
                     input_size=parse_size(args.input_size))
    if cuda:
        torch.backends.cudnn.benchmark = True
    where = f"{args.backbone} {args.input_size}, batch {batch}, {iters} timed batches on " \
            f"{describe(device)}"
    for title, maps in (("PCB extraction, pcb_g/pcb_h + conv2_x..conv5_x maps", MAPS),
                        ("PCB extraction, embeddings only", [])):
        rows = [(label, extract_rate(spec, device, batch, iters, warmup, amp, cl, maps))
                for label, amp, cl in variants(device)]
        print_table(f"{title}, {where}", rows)
        print()


if __name__ == "__main__":
    main()
