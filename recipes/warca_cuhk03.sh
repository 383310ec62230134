#!/usr/bin/env bash
# WARCA Table 2 on CUHK03 (labelled boxes, the standard test splits 1–10 of cuhk-03.mat):
# HistLBP-2580 descriptors → WARCA (χ², linear) and the baselines (rPCCA, LFDA, KISSME) over
# the paper's protocol (10 splits × 10 draws of one probe per person), (λ, η) cross-validated
# once on split 1, printed beside the paper's mean ± std.
# usage: REIDCLI_DATA=/data bash recipes/warca_cuhk03.sh [WORKDIR]   (knobs: _warca_chain.sh)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/_warca_chain.sh"
: "${REIDCLI_DATA:?set REIDCLI_DATA to the folder holding cuhk03 (see reid data info cuhk03)}"
work="${1:-runs/warca_cuhk03}"
mkdir -p "$work"
reid data check cuhk03 "${WARCA_PROTOCOL_OPTIONS[@]}" --option subset=labeled
reid extract --dataset cuhk03 "${WARCA_PROTOCOL_OPTIONS[@]}" --option subset=labeled \
  --features hist-lbp --out "$work/store.h5" --force
warca_chain "$work/store.h5" "$work" cuhk03 40
