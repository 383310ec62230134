# Shared DG-VAE chain (sourced by recipes/dgvae_*.sh): train a variant with reid train dgvae,
# extract its IDI feature (dgvae_idi), evaluate, print ours beside the paper's table, then
# say how the training budget departs from the paper's and the stage-1 λ_ambi note.
# Env: INIT (imagenet | PATH | scratch; the recipe sets its default), DGVAE_EPOCHS (a,b,c:
#      epochs of stages 1,2,3; paper 100,50,100), DGVAE_ITERS (iterations per epoch; paper
#      ⌈max(N_vis, N_ir)/16⌉). RECIPE_KNOBS names the calling recipe's shrink variables for
#      the SHRUNK notice.
source "$(dirname "${BASH_SOURCE[0]}")/_shrunk.sh"
source "$(dirname "${BASH_SOURCE[0]}")/_ablation.sh"

#: the training/extraction data arguments, set by the recipe (e.g. --dataset regdb --root D)
DATA_ARGS=()
#: extra reid train arguments (the recipe's own arguments after WORKDIR, e.g. --device cpu)
TRAIN_ARGS=()

# The recipe's arguments: WORKDIR (default $1 here) then reid train options. Sets `work`
# (created) and TRAIN_ARGS. usage: dgvae_arguments DEFAULT_WORKDIR "$@"
dgvae_arguments() {
  work="${2:-$1}"
  TRAIN_ARGS=("${@:3}")
  mkdir -p "$work"
}

# usage: dgvae_train VARIANT RUN_DIR [reid train options...]
dgvae_train() {
  local variant="$1" run="$2"; shift 2
  local budget=()
  [ -n "${DGVAE_EPOCHS:-}" ] && budget+=(--epochs "$DGVAE_EPOCHS")
  [ -n "${DGVAE_ITERS:-}" ] && budget+=(--iters-per-epoch "$DGVAE_ITERS")
  reid train dgvae "${DATA_ARGS[@]}" --variant "$variant" --init "${INIT:?set INIT}" \
    --out "$run" --force --quiet "${budget[@]}" "$@" "${TRAIN_ARGS[@]}"
}

# Every Table 2 row (DGVAE_VARIANTS, default all 12) at every seed (DGVAE_SEEDS, default
# 0,1,2) in ONE process: reid paper ablation dgvae trains each run with reid train's code,
# extracts and evaluates it as dgvae_extract / dgvae_eval do (OUT/VARIANT/seedS/,
# OUT/VARIANT/seedS.h5, OUT/VARIANT.json: mean ± std over the seeds) and prints ours beside
# Table 2 with the claims' PASS/FAIL (a verdict inside the seeds' spread says so).
# DEFAULT_EPOCHS / DEFAULT_ITERS: the recipe's budget when DGVAE_EPOCHS / DGVAE_ITERS are unset
# (recipes/_ablation.sh).
# usage: dgvae_ablation OUT [reid train options...]
dgvae_ablation() {
  local out="$1"; shift
  paper_ablation dgvae DGVAE "$out" "${DATA_ARGS[@]}" "$@"
}

# usage: dgvae_extract RUN_DIR STORE [reid extract options, e.g. --option trial=3...]
dgvae_extract() {
  local run="$1" store="$2"; shift 2
  reid extract --model "$run" "${DATA_ARGS[@]}" --out "$store" --force "$@"
}

# usage: dgvae_eval JSON STORE [STORE...]   (several stores: their mean ± std)
dgvae_eval() {
  local json="$1"; shift
  local stores=() store
  for store in "$@"; do stores+=(--store "$store"); done
  reid eval "${stores[@]}" --json "$json" --force --quiet
}

# The notes after a recipe's tables. usage: dgvae_notes RUN_DIR|ABLATION_OUT...
dgvae_notes() {
  reid paper budget dgvae "$@"
  # shellcheck disable=SC2086
  shrunk_notice ${RECIPE_KNOBS:-}
}

# "DG-VAE" for the full model, else the variant's own name (Table 2's labels)
dgvae_label() {
  if [ "$1" = dgvae ]; then echo "DG-VAE"; else echo "$1"; fi
}
