#!/usr/bin/env bash
# WARCA Table 2 on CUHK01: HistLBP-2580 descriptors → WARCA (χ², linear) and the baselines
# (rPCCA, LFDA, KISSME) over the protocol's trials, printed beside the paper's mean ± std.
# usage: REIDCLI_DATA=/data bash recipes/warca_cuhk01.sh [WORKDIR]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/_warca_chain.sh"
: "${REIDCLI_DATA:?set REIDCLI_DATA to the folder holding cuhk01 (see reid data info cuhk01)}"
work="${1:-runs/warca_cuhk01}"
mkdir -p "$work"
reid data check cuhk01 --option protocol=warca 
reid extract --dataset cuhk01 --option protocol=warca --features hist-lbp --out "$work/store.h5" --force
warca_chain "$work/store.h5" "$work" cuhk01 40
