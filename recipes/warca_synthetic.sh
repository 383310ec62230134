#!/usr/bin/env bash
# WARCA chain on the built-in `warca` synthetic preset (2 cameras, 316 + 316 persons, strong
# background nuisance) with the HistLBP-2580 descriptor and WARCA's protocol (P = 316 test
# ids, 10 splits × 10 draws of one probe per person, (λ, η) cross-validated once on split 1)
# — no downloads. CI runs it shrunk: WARCA_SYNTH_IDS (persons per split half), WARCA_TEST_IDS,
# WARCA_TRIALS, WARCA_ITERATIONS, WARCA_DRAWS and the cv grid (WARCA_CV_LAMS / _LRS); a
# shrunk run says so after its table.
# usage: bash recipes/warca_synthetic.sh [WORKDIR]   (reid must be on PATH)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/_warca_chain.sh"
work="${1:-runs/warca_synthetic}"
mkdir -p "$work"
RECIPE_KNOBS="WARCA_SYNTH_IDS"
if [ ! -d "$work/data/synthetic/warca" ]; then
  if [ -n "${WARCA_SYNTH_IDS:-}" ]; then
    reid data synth --out "$work/data" --preset warca --option "num_train_ids=$WARCA_SYNTH_IDS" \
      --option "num_test_ids=$WARCA_SYNTH_IDS"
  else
    reid data synth --out "$work/data" --preset warca
  fi
fi
paper_p=(--option test_ids=316)                # P = 316, as VIPeR; WARCA_TEST_IDS shrinks it
[ -n "${WARCA_TEST_IDS:-}" ] && paper_p=()
reid extract --dataset synthetic --root "$work/data" --option name=warca \
  "${WARCA_PROTOCOL_OPTIONS[@]}" "${paper_p[@]}" --features hist-lbp --out "$work/store.h5" \
  --force
warca_chain "$work/store.h5" "$work" synthetic 40
