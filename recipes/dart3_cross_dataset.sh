#!/usr/bin/env bash
# DART3 Table 2 — a new camera network (setting B, cross-dataset).
# For each pair SOURCE→TARGET of MSMT17, DukeMTMC-reID and Market-1501: a BoT (ResNet-50) is
# trained on the source's full training split, the target's test split (all queries, full
# gallery, standard protocol) is adapted with No-adapt, TENT, TEMP, Norm, DART3 and
# DART3 LITE, and printed beside the paper's TransReID / CLIP-ReID numbers
# (reidcli/paper/dart3_table2.csv). UPPER=1 (default) adds the upper bound: supervised
# training on the target.
# Env: REIDCLI_DATA (required), PAIRS (default: all six, e.g. "msmt17:dukemtmc"),
#      BACKBONE (bot | pcb), RUN_<dataset> (reuse a trained run, e.g. RUN_msmt17=runs/x),
#      UPPER (1 | 0), DART3_METHODS.
# usage: REIDCLI_DATA=/data bash recipes/dart3_cross_dataset.sh [WORKDIR] [reid train options...]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/_dart3_chain.sh"
: "${REIDCLI_DATA:?set REIDCLI_DATA to the folder holding msmt17, dukemtmc and market1501}"
work="${1:-runs/dart3_cross_dataset}"
shift || true
mkdir -p "$work"
declare -A short=([msmt17]=msmt17 [dukemtmc]=duke [market1501]=market)
pairs="${PAIRS:-msmt17:dukemtmc msmt17:market1501 dukemtmc:msmt17 dukemtmc:market1501 market1501:msmt17 market1501:dukemtmc}"

trained_run() {              # sets RUN_DIR: a run trained on the full training split of $1
  local ds="$1" var="RUN_$1"
  shift
  RUN_DIR="${!var:-$work/backbone_$ds}"
  if [ -z "${!var:-}" ] && [ ! -f "$RUN_DIR/model.pt" ]; then
    reid train "${BACKBONE:-bot}" --dataset "$ds" --out "$RUN_DIR" --force "$@"
  fi
}

for pair in $pairs; do
  src="${pair%%:*}" tgt="${pair##*:}"
  reid data check "$src" && reid data check "$tgt"
  dir="$work/${short[$src]}_to_${short[$tgt]}"
  mkdir -p "$dir"
  trained_run "$src" "$@"
  run="$RUN_DIR"
  reid extract --model "$run" --dataset "$tgt" --out "$dir/store.h5" --force
  UPPER_JSON=""
  if [ "${UPPER:-1}" = 1 ]; then
    trained_run "$tgt" "$@"
    reid extract --model "$RUN_DIR" --dataset "$tgt" --out "$dir/upper_store.h5" --force
    reid eval --store "$dir/upper_store.h5" --json "$dir/upper.json" --force --quiet
    UPPER_JSON="$dir/upper.json"
  fi
  UPPER_JSON="$UPPER_JSON" dart3_chain "$dir/store.h5" "$dir" "$run" 2 \
    "${short[$src]}_to_${short[$tgt]}"
done
