#!/usr/bin/env bash
# DG-VAE end to end on the built-in `vi` synthetic preset (6 cameras, 3 and 6 infrared) — no
# downloads, CPU, minutes: the full model and the baseline (tiny preset, from scratch) are
# trained, their IDI features extracted and evaluated (infrared queries, visible gallery),
# and printed side by side with the paper's Table 2 rows (its real-data numbers, for scale).
# Env: DGVAE_VARIANTS (dgvae baseline), DGVAE_EPOCHS (tiny preset: 3,3,3), DGVAE_ITERS
#      (tiny preset: 20), DGVAE_TOY_SEEDS (0,1,2; "none" skips the toy table),
#      DGVAE_TOY_ITERS (60). CI shrinks the run with DGVAE_TRAIN_IDS (200) and DGVAE_TEST_IDS
#      (100) persons, DGVAE_EPOCHS, DGVAE_ITERS and the toy knobs; a shrunk run says so after
#      its table.
# usage: bash recipes/dgvae_synthetic.sh [WORKDIR] [reid train options...]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/_dgvae_chain.sh"
dgvae_arguments "runs/dgvae_synthetic" "$@"
RECIPE_KNOBS="DGVAE_TRAIN_IDS DGVAE_TEST_IDS DGVAE_EPOCHS DGVAE_ITERS DGVAE_TOY_SEEDS DGVAE_TOY_ITERS"
INIT="${INIT:-scratch}"
synth=()
[ -n "${DGVAE_TRAIN_IDS:-}" ] && synth+=(--option "num_train_ids=$DGVAE_TRAIN_IDS")
[ -n "${DGVAE_TEST_IDS:-}" ] && synth+=(--option "num_test_ids=$DGVAE_TEST_IDS")
# always: it keeps a matching folder and refuses one rendered with other parameters
reid data synth --out "$work/data" --preset vi "${synth[@]}"
DATA_ARGS=(--dataset synthetic --root "$work/data" --option name=vi)
results=() runs=()
for variant in ${DGVAE_VARIANTS:-dgvae baseline}; do
  dgvae_train "$variant" "$work/$variant" --preset tiny --device cpu
  dgvae_extract "$work/$variant" "$work/$variant.h5" --device cpu
  dgvae_eval "$work/$variant.json" "$work/$variant.h5"
  results+=("$(dgvae_label "$variant")=$work/$variant.json")
  runs+=("$work/$variant")
done
reid paper compare dgvae --dataset synthetic --table 2 "${results[@]}"
# The vi preset shares only coarse cues across modalities (body shape, clothing texture, bag;
# infrared shows per-person emissivities, visible shows colours), so small models stay near
# chance on it; the toy below shares each identity's pattern across modalities by
# construction, where the variants can be told apart.
echo "note: the vi preset carries little cross-modality identity signal (shared cues: body" \
  "shape, clothing texture, bag): rows near chance (R-1 ≈ 100 / test identities %) mean the" \
  "chain ran, not that a method won or failed, and PASS/FAIL lines on them say nothing —" \
  "see the toy below, where the identity signal is shared by construction"
if [ "${DGVAE_TOY_SEEDS:-0,1,2}" != none ]; then
  reid paper dgvae-toy --variants "$(echo ${DGVAE_VARIANTS:-dgvae baseline} | tr ' ' ,)" \
    --seeds "${DGVAE_TOY_SEEDS:-0,1,2}" --iterations "${DGVAE_TOY_ITERS:-60}"
fi
dgvae_notes "${runs[@]}"
