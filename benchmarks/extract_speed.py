"""PCB extraction throughput (images/s): embeddings + the four pooled conv maps, fp32 vs
channels_last vs AMP, on the present device — through ``reidcli.features.model_extract
.embed_batch``, the function ``reid extract --model`` runs per batch (host copies included).
A second table times embeddings only. Ratios are against fp32 in the same run.

    python benchmarks/extract_speed.py [--backbone resnet50] [--batch-size 128] [--iters 20]

``--ranks N`` times instead a whole ``reid extract --model`` extraction (model loading, image
decoding, the store written; embeddings only) of a synthetic dataset (``--ids K`` train and
test identities, about 8·K images) on the CPU: one process using every core, against N gloo
ranks under the torchrun environment (``reidcli.features.distributed``; cores / N threads each;
rendezvous, shards and rank 0's merge included), and checks that both stores agree. Ranks are
forked from this process, so interpreter start-up (several seconds per process under torchrun)
is not counted.

    python benchmarks/extract_speed.py --ranks 2 [--backbone resnet50] [--ids 25] [--batch-size 32]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

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


def _free_port() -> int:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _rank(rank: int, world: int, port: int, threads: int, kwargs: dict) -> None:
    """One forked rank: torchrun's environment variables, then the library call."""
    from reidcli.features.distributed import distributed_extract_model_store

    os.environ.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
                       "WORLD_SIZE": str(world), "RANK": str(rank), "LOCAL_RANK": str(rank)})
    torch.set_num_threads(threads)
    code = 0
    try:
        distributed_extract_model_store(**kwargs)
    except BaseException as exc:                      # noqa: BLE001 - shown, exit code set
        print(f"rank {rank}: {exc.__class__.__name__}: {exc}", file=sys.stderr)
        code = 1
    os._exit(code)


def ranks_benchmark(ranks: int, argv) -> None:
    """1 process vs ``ranks`` gloo ranks on the CPU, whole extractions of the same records."""
    import multiprocessing

    import numpy as np

    from reidcli.data.synthetic import generate
    from reidcli.features.layout import dataset_layout
    from reidcli.features.model_extract import extract_model_store
    from reidcli.models.checkpoint import save_model
    from reidcli.store.reader import open_store

    ap = argparse.ArgumentParser(description="extraction: 1 process vs N gloo ranks (CPU)")
    ap.add_argument("--backbone", default="resnet50")
    ap.add_argument("--input-size", default="384x128")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--ids", type=int, default=25, help="train and test identities")
    args = ap.parse_args(argv)
    from reidcli.data.transforms import parse_size

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    torch.set_num_threads(1)       # no intra-op pool in this process before the ranks fork
    with tempfile.TemporaryDirectory() as tmp:
        generate(tmp, "tiny", name="bench", overrides={"num_train_ids": args.ids,
                                                       "num_test_ids": args.ids},
                 progress=False)
        layout = dataset_layout("synthetic", tmp, progress=False, name="bench")
        torch.manual_seed(0)
        spec = ModelSpec(kind="pcb", backbone=args.backbone, num_classes=0,
                         input_size=parse_size(args.input_size))
        model = os.path.join(tmp, "model.pt")
        save_model(model, build_model(spec), spec)
        common = dict(features=["pcb_g"], batch_size=args.batch_size, device="cpu",
                      workers=0)
        # the ranks first: forking after this process ran a parallel region can hang a child
        port, threads = _free_port(), max(1, cores // ranks)
        kwargs = dict(layout=layout, out=os.path.join(tmp, "ranks.h5"), model_path=model,
                      progress=False, timeout=3600, **common)
        ctx = multiprocessing.get_context("fork")
        start = time.perf_counter()
        procs = [ctx.Process(target=_rank, args=(r, ranks, port, threads, kwargs))
                 for r in range(ranks)]
        for p in procs:
            p.start()
        for p in procs:
            p.join()
        ranks_s = time.perf_counter() - start
        if any(p.exitcode for p in procs):
            raise SystemExit(f"a rank failed (exit codes {[p.exitcode for p in procs]})")
        torch.set_num_threads(cores)
        extract_model_store(layout, os.path.join(tmp, "warm.h5"), model, shard=(0, 20),
                            progress=False, **common)                   # untimed warm-up
        start = time.perf_counter()
        extract_model_store(layout, os.path.join(tmp, "one.h5"), model, progress=False,
                            **common)
        one_s = time.perf_counter() - start
        with open_store(os.path.join(tmp, "one.h5")) as a, \
                open_store(os.path.join(tmp, "ranks.h5")) as b:
            same = a.records.equals(b.records)
            diff = float(np.abs(a.features("pcb_g") - b.features("pcb_g")).max())
        n = len(layout.records)
    print(f"whole extraction of {n} synthetic images, {args.backbone} {args.input_size}, "
          f"batch {args.batch_size}, pcb_g only, CPU with {cores} cores (torch "
          f"{torch.__version__})")
    print(f"{'run':<42} {'seconds':>8} {'images/s':>10} {'× 1 proc':>9}")
    print(f"{f'1 process, {cores} threads':<42} {one_s:>8.2f} {n / one_s:>10.1f} {1.0:>9.2f}")
    print(f"{f'{ranks} gloo ranks, {threads} thread(s) each, merged':<42} {ranks_s:>8.2f} "
          f"{n / ranks_s:>10.1f} {one_s / ranks_s:>9.2f}")
    print(f"same records: {same}; largest |pcb_g difference|: {diff:.2e}")


def main(argv=None) -> None:
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--ranks", type=int, default=None)
    known, rest = pre.parse_known_args(argv)
    if known.ranks is not None:
        if known.ranks < 2:
            raise SystemExit("--ranks needs at least 2")
        ranks_benchmark(known.ranks, rest)
        return
    run = parse_run_args(__doc__, rest, cuda_batch=128, cuda_warmup=3)
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
