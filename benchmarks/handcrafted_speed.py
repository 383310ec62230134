"""Hand-crafted descriptor throughput (images/s) of HistLBP-2580 and LOMO-26960
(``reidcli.features.handcrafted``) on random 128×48 RGB images, through the registry's
``compute`` (what ``reid extract --features`` runs per batch).

    python -m benchmarks.handcrafted_speed [--images 256] [--repeats 3]

Prints the best of ``repeats`` runs per descriptor and the load average (timings on a shared
machine are noisy). The test suite checks the vectorisation these figures rest on
(tests/features/test_handcrafted.py), not the figures.
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np

from reidcli.features.extract import HANDCRAFTED


def images_per_second(name: str, images: np.ndarray, repeats: int) -> float:
    """Best-of-``repeats`` throughput of descriptor ``name`` on images uint8 [n, H, W, 3]."""
    compute = HANDCRAFTED[name].compute
    compute(images[:2])                                   # warm-up (imports, caches)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        compute(images)
        best = min(best, time.perf_counter() - start)
    return len(images) / best


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--images", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"{args.images} images of 128×48, best of {args.repeats}; load average {load:.2f}")
    print(f"{'descriptor':<10} {'dim':>6} {'images/s':>9}")
    for name in ("hist-lbp", "lomo"):
        desc = HANDCRAFTED[name]
        h, w = desc.size
        images = np.random.default_rng(0).integers(0, 256, (args.images, h, w, 3), np.uint8)
        dim = desc.compute(images[:1]).shape[1]
        print(f"{name:<10} {dim:>6} {images_per_second(name, images, args.repeats):>9.1f}")


if __name__ == "__main__":
    main()
