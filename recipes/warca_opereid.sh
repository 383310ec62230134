#!/usr/bin/env bash
# WARCA Table 2 on OpeReid: HistLBP-2580 descriptors → WARCA (χ², linear) and the baselines
# (rPCCA, LFDA, KISSME) over the paper's protocol (10 splits × 10 draws of one probe per
# person), (λ, η) cross-validated once on split 1, printed beside the paper's mean ± std.
# usage: REIDCLI_DATA=/data bash recipes/warca_opereid.sh [WORKDIR]   (knobs: _warca_chain.sh)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/_warca_chain.sh"
: "${REIDCLI_DATA:?set REIDCLI_DATA to the folder holding opereid (see reid data info opereid)}"
work="${1:-runs/warca_opereid}"
mkdir -p "$work"
reid data check opereid "${WARCA_PROTOCOL_OPTIONS[@]}"
reid extract --dataset opereid "${WARCA_PROTOCOL_OPTIONS[@]}" --features hist-lbp \
  --out "$work/store.h5" --force
warca_chain "$work/store.h5" "$work" opereid 40
