"""DG-VAE's CPU sanity scenario on seeds 0–4: the staged loss ratios (T8) and IR→visible
retrieval on the toy (T9) that ``tests/training/test_dgvae_trainer.py`` asserts on seed 0.

    python -m benchmarks.dgvae_toy_seeds [--seeds 0,1,2,3,4] [--iterations 60]

Prints one row per seed and the worst value over the seeds next to each test bound, so the
bounds can be recalibrated (every seed must pass). Also prints the seconds per seed.
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from reidcli.paper.dgvae_toy import (STAGE_RATIO_BOUNDS, ir_to_visible_scores, stage_ratio,
                                     toy_features, train_on_toy)
from reidcli.synthetic.vi_toy import make_vi_toy

RATIOS = STAGE_RATIO_BOUNDS


def seed_figures(seed: int, iterations: int) -> dict[str, float]:
    run = train_on_toy(seed=seed, iterations=iterations)
    out = {f"s{s}.{t}": stage_ratio(run.history[s][t]) for s, t, _ in RATIOS}
    for name, toy in (("closed", make_vi_toy(num_ids=8, per_id=4, pattern_seed=0,
                                             seed=100 + seed)),
                      ("open", make_vi_toy(num_ids=8, per_id=4, pattern_seed=1,
                                           seed=101 + seed))):
        labels, ir = toy.labels.numpy(), toy.infrared.numpy()
        trained = toy_features(run.model, toy)
        for kind in ("idi", "iai", "pixels"):
            mAP, r1 = ir_to_visible_scores(trained[kind], labels, ir)
            out[f"{name}.{kind}.mAP"] = mAP
            if kind == "idi":
                out[f"{name}.idi.R1"] = r1
        out[f"{name}.untrained.mAP"] = ir_to_visible_scores(
            toy_features(run.untrained, toy)["idi"], labels, ir)[0]
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0,1,2,3,4")
    parser.add_argument("--iterations", type=int, default=60)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    rows = {}
    for seed in (int(s) for s in args.seeds.split(",")):
        start = time.perf_counter()
        rows[seed] = seed_figures(seed, args.iterations)
        print(f"seed {seed}: {time.perf_counter() - start:.1f} s", flush=True)
    keys = list(next(iter(rows.values())))
    print(f"{'figure':26s}" + "".join(f"{'seed ' + str(s):>10s}" for s in rows))
    for key in keys:
        print(f"{key:26s}" + "".join(f"{rows[s][key]:10.3f}" for s in rows))
    print("\nstaged ratios: worst over seeds vs the test bound")
    for s, t, bound in RATIOS:
        worst = max(rows[seed][f"s{s}.{t}"] for seed in rows)
        print(f"  stage {s} {t:6s} worst {worst:.3f}  bound {bound}  "
              f"{'ok' if worst <= bound else 'FAIL'}")
    margins = {
        "closed IDI mAP (≥ 0.80)": min(r["closed.idi.mAP"] for r in rows.values()),
        "closed IDI R1 (≥ 0.85)": min(r["closed.idi.R1"] for r in rows.values()),
        "closed IDI − pixels (≥ 0.5)": min(r["closed.idi.mAP"] - r["closed.pixels.mAP"]
                                           for r in rows.values()),
        "closed IDI − IAI (≥ 0.3)": min(r["closed.idi.mAP"] - r["closed.iai.mAP"]
                                        for r in rows.values()),
        "closed IDI − untrained (≥ 0.4)": min(r["closed.idi.mAP"] - r["closed.untrained.mAP"]
                                              for r in rows.values()),
        "open IDI − max(pixels, IAI) (≥ 0.15)": min(
            r["open.idi.mAP"] - max(r["open.pixels.mAP"], r["open.iai.mAP"])
            for r in rows.values()),
    }
    print("\nretrieval: worst over seeds")
    for name, value in margins.items():
        print(f"  {name:40s} {value:.3f}")
    print(f"\nmean closed IDI mAP {np.mean([r['closed.idi.mAP'] for r in rows.values()]):.3f}")


if __name__ == "__main__":
    main()
