#!/usr/bin/env bash
# DG-VAE Table 2 (ablation) on RegDB or SYSU-MM01: every variant (the --variant values of
# reid train dgvae, one per Table 2 row) trained, extracted and evaluated with the paper's
# protocol (RegDB: one model per trial, visible→thermal, mean over the trials' stores;
# SYSU-MM01: single-shot all-search over 10 gallery draws), printed beside Table 2 with the
# paper's ordering claims as PASS/FAIL lines.
# Env: DATASET (regdb | sysu; required), REGDB_ROOT or SYSU_ROOT (required for it), INIT
#      (imagenet | PATH | scratch; default imagenet), VARIANTS (all 12 rows), TRIALS (RegDB:
#      0 1 … 9), DRAWS (SYSU gallery draws), DGVAE_EPOCHS, DGVAE_ITERS (shrink the budget: the
#      output says so).
# usage: DATASET=regdb REGDB_ROOT=/data bash recipes/dgvae_ablation.sh [WORKDIR] [reid train options...]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/_dgvae_chain.sh"
: "${DATASET:?set DATASET to regdb or sysu}"
all_variants="baseline mog mog_lmc ae_tsr ae_tsr_idc ae_tsr_idc_cyc vae1_tsr vae1_tsr_idc
vae1_tsr_idc_cyc vae2_tsr dgvae_nolmc dgvae"
dgvae_arguments "runs/dgvae_ablation_$DATASET" "$@"
RECIPE_KNOBS="VARIANTS TRIALS DGVAE_EPOCHS DGVAE_ITERS"
INIT="${INIT:-imagenet}"
results=() runs=()
case "$DATASET" in
  regdb)
    : "${REGDB_ROOT:?set REGDB_ROOT to the folder holding RegDB}"
    DATA_ARGS=(--dataset regdb --root "$REGDB_ROOT")
    for variant in ${VARIANTS:-$all_variants}; do
      stores=()
      for k in ${TRIALS:-0 1 2 3 4 5 6 7 8 9}; do
        dgvae_train "$variant" "$work/$variant/trial_$k" --option "trial=$k"
        dgvae_extract "$work/$variant/trial_$k" "$work/$variant/trial_$k.h5" --trials "$k"
        stores+=("$work/$variant/trial_$k.h5")
        runs+=("$work/$variant/trial_$k")
      done
      dgvae_eval "$work/$variant.json" "${stores[@]}"
      results+=("$(dgvae_label "$variant")=$work/$variant.json")
    done ;;
  sysu)
    : "${SYSU_ROOT:?set SYSU_ROOT to the folder holding SYSU-MM01}"
    DATA_ARGS=(--dataset sysu_mm01 --root "$SYSU_ROOT")
    draws=()
    [ -n "${DRAWS:-}" ] && draws=(--option "draws=$DRAWS")
    for variant in ${VARIANTS:-$all_variants}; do
      dgvae_train "$variant" "$work/$variant"
      dgvae_extract "$work/$variant" "$work/$variant.h5" --option mode=all --option shots=1 \
        "${draws[@]}"
      dgvae_eval "$work/$variant.json" "$work/$variant.h5"
      results+=("$(dgvae_label "$variant")=$work/$variant.json")
      runs+=("$work/$variant")
    done
    echo "gallery draws: ${DRAWS:-seeded} (DRAWS=seeded|official|agw)" ;;
  *) echo "DATASET=$DATASET: use regdb or sysu" >&2; exit 2 ;;
esac
reid paper compare dgvae --dataset "$DATASET" --table 2 "${results[@]}"
dgvae_notes "${runs[@]}"
