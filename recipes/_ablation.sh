# Shared ablation call (sourced by recipes/_dgvae_chain.sh and _dmgnet_chain.sh): one
# reid paper ablation over the rows and seeds the recipe's environment knobs name.
# Knobs (PREFIX is the recipe's, e.g. DGVAE or DMG): PREFIX_VARIANTS (rows, space or comma
# separated; default every row), PREFIX_SEEDS (default 0,1,2), PREFIX_EPOCHS and PREFIX_ITERS
# (the budget; default DEFAULT_EPOCHS / DEFAULT_ITERS, set by the recipe, else the preset's).
# usage: paper_ablation PAPER PREFIX OUT [reid paper ablation / reid train options...]
paper_ablation() {
  local paper="$1" prefix="$2" out="$3"; shift 3
  local knob_epochs="${prefix}_EPOCHS" knob_iters="${prefix}_ITERS"
  local knob_variants="${prefix}_VARIANTS" knob_seeds="${prefix}_SEEDS"
  local epochs="${!knob_epochs:-${DEFAULT_EPOCHS:-}}" iters="${!knob_iters:-${DEFAULT_ITERS:-}}"
  local budget=() variants=()
  [ -n "$epochs" ] && budget+=(--epochs "$epochs")
  [ -n "$iters" ] && budget+=(--iters-per-epoch "$iters")
  # shellcheck disable=SC2086
  [ -n "${!knob_variants:-}" ] && variants=(--variants "$(echo ${!knob_variants} | tr ' ' ,)")
  reid paper ablation "$paper" --init "${INIT:?set INIT}" --out "$out" --force \
    --seeds "${!knob_seeds:-0,1,2}" "${variants[@]}" "${budget[@]}" "$@" "${TRAIN_ARGS[@]}"
}
