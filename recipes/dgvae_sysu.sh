#!/usr/bin/env bash
# DG-VAE Table 1 on SYSU-MM01: the full model trained on the 395 train + val ids (both
# modalities, all 6 cameras), its IDI feature extracted, then single-shot all-search
# (the paper's protocol) and indoor-search evaluated over the 10 gallery draws and printed
# beside the paper (reidcli/paper/dgvae_table1.csv; the paper reports all-search only).
# Env: SYSU_ROOT (required: the folder holding SYSU-MM01), INIT (imagenet | PATH to a local
#      ResNet-50 state dict | scratch; default imagenet), DRAWS (seeded | official | agw:
#      the gallery draws of the sysu_mm01 loader; default: the loader's), DGVAE_EPOCHS,
#      DGVAE_ITERS (shrink the paper's 100,50,100 epochs × 1392 iterations: the output says so),
#      SYSU_MODES (all indoor).
# usage: SYSU_ROOT=/data INIT=imagenet bash recipes/dgvae_sysu.sh [WORKDIR] [reid train options...]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/_dgvae_chain.sh"
: "${SYSU_ROOT:?set SYSU_ROOT to the folder holding SYSU-MM01 (see reid data info sysu_mm01)}"
dgvae_arguments "runs/dgvae_sysu" "$@"
RECIPE_KNOBS="DGVAE_EPOCHS DGVAE_ITERS SYSU_MODES"
INIT="${INIT:-imagenet}"
draws=()
[ -n "${DRAWS:-}" ] && draws=(--option "draws=$DRAWS")
DATA_ARGS=(--dataset sysu_mm01 --root "$SYSU_ROOT")
reid data check sysu_mm01 --root "$SYSU_ROOT" "${draws[@]}"
dgvae_train dgvae "$work/dgvae"
for mode in ${SYSU_MODES:-all indoor}; do
  dgvae_extract "$work/dgvae" "$work/$mode.h5" --option "mode=$mode" --option shots=1 \
    "${draws[@]}"
  dgvae_eval "$work/$mode.json" "$work/$mode.h5"
  reid paper compare dgvae --dataset sysu --table 1 --protocol "$mode" \
    "DG-VAE=$work/$mode.json"
done
echo "gallery draws: ${DRAWS:-seeded} (DRAWS=seeded|official|agw)"
dgvae_notes "$work/dgvae"
