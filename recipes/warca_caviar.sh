#!/usr/bin/env bash
# WARCA Table 2 on CAVIAR (CAVIAR4REID): HistLBP-2580 descriptors → WARCA (χ², linear) and
# the baselines (rPCCA, LFDA, KISSME) over the paper's protocol (10 splits × 10 draws of one
# probe per person), (λ, η) cross-validated once on split 1, printed beside the paper's
# mean ± std.
# usage: REIDCLI_DATA=/data bash recipes/warca_caviar.sh [WORKDIR]   (knobs: _warca_chain.sh)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/_warca_chain.sh"
: "${REIDCLI_DATA:?set REIDCLI_DATA to the folder holding caviar4reid (see reid data info caviar4reid)}"
work="${1:-runs/warca_caviar}"
mkdir -p "$work"
reid data check caviar4reid "${WARCA_PROTOCOL_OPTIONS[@]}"
reid extract --dataset caviar4reid "${WARCA_PROTOCOL_OPTIONS[@]}" --features hist-lbp \
  --out "$work/store.h5" --force
warca_chain "$work/store.h5" "$work" caviar4reid 40
