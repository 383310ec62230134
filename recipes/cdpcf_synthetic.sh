#!/usr/bin/env bash
# C-DPCF chain on the built-in `cdpcf` synthetic preset — no downloads, runs in CI.
# As in the paper: "PCB (source)" is trained on the source domain d0 (6 cameras, 300 persons;
# here the `tiny` PCB backbone at 384×128 on CPU), its conv2_x..conv5_x maps of the target
# domain d1 (2 cameras, 200 persons, strong camera-specific spatial bias) are pooled to 24×8,
# and the four pooling methods are fitted and evaluated over 10 seeded half/half trials.
# Env: PCB_EPOCHS (4), PCB_MAX_IMAGES (all 3,732 source images), CDPCF_MAPS=color-grid to use
# hand-crafted 16-channel maps + HSV stripes instead of a trained network. CI shrinks the run
# with CDPCF_SOURCE_IDS (source persons, 300), PCB_EPOCHS, PCB_MAX_IMAGES and CDPCF_TRIALS
# (e.g. 0: one of the 10 trials); a shrunk run says so after its table.
# usage: bash recipes/cdpcf_synthetic.sh [WORKDIR]   (reid must be on PATH)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/_cdpcf_chain.sh"
work="${1:-runs/cdpcf_synthetic}"
mkdir -p "$work"
RECIPE_KNOBS="CDPCF_SOURCE_IDS PCB_EPOCHS PCB_MAX_IMAGES"
synth=()
[ -n "${CDPCF_SOURCE_IDS:-}" ] && synth=(--option "num_train_ids=$CDPCF_SOURCE_IDS")
[ -d "$work/data/synthetic/cdpcf" ] || reid data synth --out "$work/data" --preset cdpcf \
  "${synth[@]}"
target=(--dataset synthetic --root "$work/data" --option name=cdpcf
        --option protocol=single_shot_half --option domain=synthetic/d1)
if [ "${CDPCF_MAPS:-pcb}" = "color-grid" ]; then
  reid extract "${target[@]}" --features hsv-stripes --maps color-grid \
    --out "$work/store.h5" --force
  cdpcf_chain "$work/store.h5" "$work" synthetic hsv-stripes --K 10 --E 64 --G 6
  exit 0
fi
limit=()
[ -n "${PCB_MAX_IMAGES:-}" ] && limit=(--max-images "$PCB_MAX_IMAGES")
reid train pcb --dataset synthetic --root "$work/data" --option name=cdpcf --preset tiny \
  --input-size 384x128 --epochs "${PCB_EPOCHS:-4}" "${limit[@]}" --out "$work/pcb_source" \
  --force --quiet
reid extract --model "$work/pcb_source" "${target[@]}" --features pcb_g \
  --maps conv2_x,conv3_x,conv4_x,conv5_x --map-size 24x8 --out "$work/store.h5" --force
cdpcf_chain "$work/store.h5" "$work" synthetic pcb_g --K 10 --E 64 --G 6
