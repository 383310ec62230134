"""Shared pieces of train_speed.py / extract_speed.py: precision variants and timing."""
from __future__ import annotations

import argparse
import dataclasses
import platform
import time
from typing import Callable, Sequence

import torch

#: (label, autocast dtype or None, channels_last)
def variants(device: torch.device) -> list[tuple[str, torch.dtype | None, bool]]:
    """fp32 reference first; then channels_last and AMP variants the device supports."""
    out = [("fp32", None, False), ("fp32 + channels_last", None, True)]
    if device.type == "cuda":
        out.append(("AMP fp16 + channels_last", torch.float16, True))
        if torch.cuda.is_bf16_supported():
            out.append(("AMP bf16 + channels_last", torch.bfloat16, True))
    else:
        out.append(("AMP bf16 (CPU autocast) + channels_last", torch.bfloat16, True))
    return out


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def images_per_second(step: Callable[[], None], batch: int, iters: int, warmup: int,
                      device: torch.device) -> float:
    """Run ``step`` ``warmup`` times untimed, then ``iters`` times timed → images/s."""
    for _ in range(warmup):
        step()
    sync(device)
    start = time.perf_counter()
    for _ in range(iters):
        step()
    sync(device)
    return batch * iters / (time.perf_counter() - start)


def describe(device: torch.device) -> str:
    if device.type == "cuda":
        return f"{torch.cuda.get_device_name(device)} (torch {torch.__version__})"
    return f"CPU {platform.processor() or platform.machine()}, {torch.get_num_threads()} " \
           f"threads (torch {torch.__version__})"


def print_table(title: str, rows: list[tuple[str, float]]) -> None:
    ref = rows[0][1]
    print(title)
    print(f"{'variant':<42} {'images/s':>10} {'× fp32':>8}")
    for label, rate in rows:
        print(f"{label:<42} {rate:>10.1f} {rate / ref:>8.2f}")


@dataclasses.dataclass
class RunArgs:
    backbone: str
    input_size: tuple[int, int]
    batch: int
    iters: int
    warmup: int
    device: torch.device


def parse_run_args(doc: str, argv: Sequence[str] | None, cuda_batch: int,
                   cuda_warmup: int) -> RunArgs:
    """Common options; CUDA defaults are sized for an H100, CPU ones for a quick look."""
    from reidcli.data.transforms import parse_size
    from reidcli.device import resolve_device

    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--backbone", default="resnet50")
    ap.add_argument("--input-size", default="384x128")
    ap.add_argument("--batch-size", type=int, default=None,
                    help=f"{cuda_batch} on CUDA, 8 on CPU")
    ap.add_argument("--iters", type=int, default=None, help="20 on CUDA, 2 on CPU")
    ap.add_argument("--warmup", type=int, default=None)
    ap.add_argument("--device", default="auto")
    args = ap.parse_args(argv)
    device = resolve_device(args.device)
    cuda = device.type == "cuda"
    if cuda:
        torch.backends.cudnn.benchmark = True
    return RunArgs(backbone=args.backbone, input_size=parse_size(args.input_size),
                   batch=args.batch_size or (cuda_batch if cuda else 8),
                   iters=args.iters or (20 if cuda else 2),
                   warmup=args.warmup if args.warmup is not None else
                   (cuda_warmup if cuda else 1), device=device)
