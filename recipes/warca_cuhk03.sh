#!/usr/bin/env bash
# WARCA Table 2 on CUHK03: HistLBP-2580 descriptors → WARCA (χ², linear) and the baselines
# (rPCCA, LFDA, KISSME) over the protocol's trials, printed beside the paper's mean ± std.
# usage: REIDCLI_DATA=/data bash recipes/warca_cuhk03.sh [WORKDIR]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/_warca_chain.sh"
: "${REIDCLI_DATA:?set REIDCLI_DATA to the folder holding cuhk03 (see reid data info cuhk03)}"
work="${1:-runs/warca_cuhk03}"
mkdir -p "$work"
reid data check cuhk03 --option protocol=classic --option subset=labeled 
reid extract --dataset cuhk03 --option protocol=classic --option subset=labeled --features hist-lbp --out "$work/store.h5" --force
warca_chain "$work/store.h5" "$work" cuhk03 40
