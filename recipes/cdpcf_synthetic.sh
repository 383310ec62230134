#!/usr/bin/env bash
# C-DPCF chain on the built-in `cdpcf` synthetic preset — no downloads, runs in CI.
# Target domain d1 (2 cameras, 200 persons, strong camera-specific spatial bias), 10 seeded
# half/half trials; conv maps = the hand-crafted 16-channel `color-grid` maps (24×8), since
# this release has no trained PCB yet; PCB (source) is replaced by HSV-stripe cosine.
# usage: bash recipes/cdpcf_synthetic.sh [WORKDIR]   (reid must be on PATH)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/_cdpcf_chain.sh"
work="${1:-runs/cdpcf_synthetic}"
mkdir -p "$work"
[ -d "$work/data/synthetic/cdpcf" ] || reid data synth --out "$work/data" --preset cdpcf
reid extract --dataset synthetic --root "$work/data" --option name=cdpcf \
  --option protocol=single_shot_half --option domain=synthetic/d1 \
  --features hsv-stripes --maps color-grid --out "$work/store.h5" --force
cdpcf_chain "$work/store.h5" "$work" synthetic hsv-stripes --K 10 --E 64 --G 6
