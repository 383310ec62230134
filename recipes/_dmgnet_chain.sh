# Shared DMG-Net chain (sourced by recipes/dmgnet_*.sh): train the paper's variants with
# reid train dmgnet under ONE budget, extract their BNNeck feature on the targets, evaluate
# (one reid eval over a target's trial stores: mean ± std), print ours beside the paper's
# table, then say how the training budget departs from the paper's.
# Variants (DMG-Net paper Table 6): dmgnet (DMG-Net), bot (the paper's baseline BoT: reid train
# bot on the same merged sources, BoT's own P×K sampler and schedule), metagen
# (Meta-generalization: --md-weight 0), metadisc (Meta-discrimination: --no-meta), and the
# control paired (reid train dmgnet --no-meta --md-weight 0: BoT's losses on the camera-split
# paired batches, one BN forward per half — not in the paper, printed under its own name).
# One budget: the same epochs and the same images per epoch (BoT draws P×K images a step,
# DMG-Net 2·P·K, so BoT runs 2 × DMG_ITERS iterations when DMG_ITERS is set); for --preset
# tiny BoT gets --preset dmgnet_tiny, DMG-Net's tiny sizes.
# Env: INIT (imagenet | PATH | scratch; the recipe sets its default), DMG_EPOCHS (paper 120),
#      DMG_ITERS (iterations per epoch; paper ⌊N/(2PK)⌋), DMG_VARIANTS (the recipe's default).
#      RECIPE_KNOBS names the calling recipe's shrink variables for the SHRUNK notice.
source "$(dirname "${BASH_SOURCE[0]}")/_shrunk.sh"
source "$(dirname "${BASH_SOURCE[0]}")/_ablation.sh"

#: the training data arguments, set by the recipe (e.g. --sources mixed_b --root D)
SOURCE_ARGS=()
#: extra reid train arguments (the recipe's own arguments after WORKDIR, e.g. --device cpu)
TRAIN_ARGS=()

# The recipe's arguments: WORKDIR (default $1 here) then reid train options. Sets `work`
# (created) and TRAIN_ARGS. usage: dmgnet_arguments DEFAULT_WORKDIR "$@"
dmgnet_arguments() {
  work="${2:-$1}"
  TRAIN_ARGS=("${@:3}")
  mkdir -p "$work"
}

# The reid train switches of a variant. usage: dmgnet_variant_flags VARIANT
dmgnet_variant_flags() {
  case "$1" in
    dmgnet|bot) echo "" ;;
    paired) echo "--no-meta --md-weight 0" ;;
    metagen) echo "--md-weight 0" ;;
    metadisc) echo "--no-meta" ;;
    *) echo "unknown DMG-Net variant '$1' (use dmgnet, bot, paired, metagen or metadisc)" >&2
       return 2 ;;
  esac
}

# Refuse an unknown variant before anything runs. usage: dmgnet_check_variants VARIANT...
dmgnet_check_variants() {
  local variant
  for variant in "$@"; do dmgnet_variant_flags "$variant" >/dev/null; done
}

# The paper's name of a variant (the label of reidcli.paper.compare dmgnet)
dmgnet_label() {
  case "$1" in
    dmgnet) echo "DMG-Net" ;; bot) echo "BoT" ;;
    paired) echo "DMG-Net w/o meta, w/o L_MD (paired batches)" ;;
    metagen) echo "Meta-generalization" ;; metadisc) echo "Meta-discrimination" ;;
    *) echo "$1" ;;
  esac
}

# The reid train options of the BoT row: DMG-Net's --preset tiny becomes BoT's dmgnet_tiny
# (the same sizes; BoT's own tiny is larger). usage: dmgnet_bot_options OPTION... (one a line)
dmgnet_bot_options() {
  local prev="" arg
  for arg in "$@"; do
    [ "$prev" = --preset ] && [ "$arg" = tiny ] && arg=dmgnet_tiny
    printf -- '%s\n' "$arg"
    prev="$arg"
  done
}

# usage: dmgnet_train VARIANT RUN_DIR [reid train options...]
dmgnet_train() {
  local variant="$1" run="$2"; shift 2
  local budget=() flags
  flags="$(dmgnet_variant_flags "$variant")"
  [ -n "${DMG_EPOCHS:-}" ] && budget+=(--epochs "$DMG_EPOCHS")
  if [ "$variant" = bot ]; then
    # the paper's BoT: the same sources (DMG-Net's --source-split is BoT's --train-split)
    local sources=() options=() arg
    for arg in "${SOURCE_ARGS[@]}"; do
      [ "$arg" = --source-split ] && arg=--train-split
      sources+=("$arg")
    done
    mapfile -t options < <(dmgnet_bot_options "$@" "${TRAIN_ARGS[@]}")
    [ -n "${DMG_ITERS:-}" ] && budget+=(--iters-per-epoch "$((2 * DMG_ITERS))")
    reid train bot "${sources[@]}" --init "${INIT:?set INIT}" --out "$run" --force --quiet \
      "${budget[@]}" "${options[@]}"
    return
  fi
  [ -n "${DMG_ITERS:-}" ] && budget+=(--iters-per-epoch "$DMG_ITERS")
  # shellcheck disable=SC2086
  reid train dmgnet "${SOURCE_ARGS[@]}" $flags --init "${INIT:?set INIT}" --out "$run" \
    --force --quiet "${budget[@]}" "$@" "${TRAIN_ARGS[@]}"
}

# Every variant of DMG_VARIANTS (default: the Table 6 rows bot metadisc metagen dmgnet and the
# control paired) at every seed of DMG_SEEDS (default 0,1,2) in ONE process: reid paper
# ablation dmgnet trains each run with reid train's code under the one budget above (BoT:
# twice the iterations per epoch, dmgnet_tiny for tiny), extracts it on the one held-out
# target and evaluates it as dmgnet_extract / dmgnet_eval do (OUT/VARIANT/seedS/,
# OUT/VARIANT/seedS.h5, OUT/VARIANT.json: mean ± std over the seeds), and prints ours with
# the claims' PASS/FAIL (a verdict inside the seeds' spread says so).
# DEFAULT_EPOCHS / DEFAULT_ITERS: the recipe's budget when DMG_EPOCHS / DMG_ITERS are unset
# (recipes/_ablation.sh).
# usage: dmgnet_ablation OUT [reid train options...]   (SOURCE_ARGS name the data)
dmgnet_ablation() {
  local out="$1"; shift
  paper_ablation dmgnet DMG "$out" "${SOURCE_ARGS[@]}" "$@"
}

# usage: dmgnet_extract RUN_DIR STORE [reid extract options, e.g. --dataset viper --root D]
dmgnet_extract() {
  local run="$1" store="$2"; shift 2
  reid extract --model "$run" --out "$store" --force "$@"
}

# usage: dmgnet_eval JSON STORE [STORE...]   (several stores: their mean ± std)
dmgnet_eval() {
  local json="$1"; shift
  local stores=() store
  for store in "$@"; do stores+=(--store "$store"); done
  reid eval "${stores[@]}" --json "$json" --force --quiet
}

# The --option flags of a dataset from a list of NAME.KEY=VALUE words (e.g. TARGET_OPTIONS).
# usage: dmgnet_options NAME "NAME.KEY=VALUE ..."   (prints one flag and value per line)
dmgnet_options() {
  local name="$1" item
  for item in ${2:-}; do
    if [ "${item%%.*}" = "$name" ]; then printf -- '--option\n%s\n' "${item#*.}"; fi
  done
}

# Extract every trial of a small target (one store per trial), then ONE reid eval over them.
# usage: dmgnet_target RUN_DIR TARGET ROOT JSON   (env TRIALS, TARGET_OPTIONS)
dmgnet_target() {
  local run="$1" target="$2" root="$3" json="$4" k
  local opts=() stores=()
  mapfile -t opts < <(dmgnet_options "$target" "${TARGET_OPTIONS:-}")
  for k in ${TRIALS:-0 1 2 3 4 5 6 7 8 9}; do
    dmgnet_extract "$run" "${json%.json}_t$k.h5" --dataset "$target" --root "$root" \
      --option "trial=$k" "${opts[@]}"
    stores+=("${json%.json}_t$k.h5")
  done
  dmgnet_eval "$json" "${stores[@]}"
}

# The notes after a recipe's tables. usage: dmgnet_notes RUN_DIR|ABLATION_OUT...
dmgnet_notes() {
  reid paper budget dmgnet "$@"
  # shellcheck disable=SC2086
  shrunk_notice ${RECIPE_KNOBS:-}
}

# Table 5 end to end: train every variant of DMG_VARIANTS on a Mixed setting's sources (colour
# jitter on, DMG-Net paper §5), then for each target extract every trial and evaluate the
# trials' stores in ONE reid eval, and print ours beside Table 5.
# usage: dmgnet_mixed SETTING   (mixed_a | mixed_b; env ROOT, TARGETS, TRIALS, TARGET_OPTIONS,
#        SOURCE_OPTIONS, DMG_VARIANTS)
dmgnet_mixed() {
  local setting="$1" variant target item
  local targets="${TARGETS:-prid2011 grid viper ilids}"
  SOURCE_ARGS=(--sources "$setting" --root "$ROOT" --color-jitter on
               --targets "$(echo $targets | tr ' ' ,)")
  for item in ${SOURCE_OPTIONS:-}; do SOURCE_ARGS+=(--source-option "$item"); done
  local runs=()
  # shellcheck disable=SC2086
  dmgnet_check_variants ${DMG_VARIANTS:-dmgnet bot}
  for variant in ${DMG_VARIANTS:-dmgnet bot}; do
    dmgnet_train "$variant" "$work/$variant"
    runs+=("$work/$variant")
  done
  for target in $targets; do
    local results=()
    for variant in ${DMG_VARIANTS:-dmgnet bot}; do
      dmgnet_target "$work/$variant" "$target" "$ROOT" "$work/${variant}_$target.json"
      results+=("$(dmgnet_label "$variant")=$work/${variant}_$target.json")
    done
    reid paper compare dmgnet --table 5 --setting "$setting" --dataset "$target" \
      "${results[@]}"
  done
  dmgnet_notes "${runs[@]}"
}
