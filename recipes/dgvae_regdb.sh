#!/usr/bin/env bash
# DG-VAE Table 1 on RegDB: one full model per trial (trial k trains on that trial's 206 ids,
# --option trial=k), each extracted on its own trial (--trials k) visible→thermal (the
# paper's direction) and thermal→visible, then ONE reid eval over the trials' stores per direction (mean ± std)
# printed beside the paper (reidcli/paper/dgvae_table1.csv; the paper reports v2t only).
# Env: REGDB_ROOT (required: the folder holding RegDB), INIT (imagenet | PATH | scratch;
#      default imagenet), TRIALS (0 1 … 9), DGVAE_EPOCHS, DGVAE_ITERS (shrink the paper's
#      100,50,100 epochs × 129 iterations: the output says so).
# usage: REGDB_ROOT=/data INIT=imagenet bash recipes/dgvae_regdb.sh [WORKDIR] [reid train options...]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/_dgvae_chain.sh"
: "${REGDB_ROOT:?set REGDB_ROOT to the folder holding RegDB (see reid data info regdb)}"
dgvae_arguments "runs/dgvae_regdb" "$@"
RECIPE_KNOBS="TRIALS DGVAE_EPOCHS DGVAE_ITERS"
INIT="${INIT:-imagenet}"
DATA_ARGS=(--dataset regdb --root "$REGDB_ROOT")
reid data check regdb --root "$REGDB_ROOT"
v2t=() t2v=() runs=()
for k in ${TRIALS:-0 1 2 3 4 5 6 7 8 9}; do
  dgvae_train dgvae "$work/trial_$k" --option "trial=$k"
  for direction in v2t t2v; do
    dgvae_extract "$work/trial_$k" "$work/trial_${k}_$direction.h5" --trials "$k" \
      --option "direction=$direction"
  done
  v2t+=("$work/trial_${k}_v2t.h5")
  t2v+=("$work/trial_${k}_t2v.h5")
  runs+=("$work/trial_$k")
done
dgvae_eval "$work/v2t.json" "${v2t[@]}"
dgvae_eval "$work/t2v.json" "${t2v[@]}"
for direction in v2t t2v; do
  reid paper compare dgvae --dataset regdb --table 1 --protocol "$direction" \
    "DG-VAE=$work/$direction.json"
done
dgvae_notes "${runs[@]}"
