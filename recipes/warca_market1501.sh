#!/usr/bin/env bash
# WARCA Table 2 on Market-1501: HistLBP-2580 descriptors → WARCA (χ², linear) and the baselines
# (rPCCA, LFDA, KISSME) over the protocol's trials, printed beside the paper's mean ± std.
# usage: REIDCLI_DATA=/data bash recipes/warca_market1501.sh [WORKDIR]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/_warca_chain.sh"
: "${REIDCLI_DATA:?set REIDCLI_DATA to the folder holding market1501 (see reid data info market1501)}"
work="${1:-runs/warca_market1501}"
mkdir -p "$work"
reid data check market1501 
reid extract --dataset market1501 --features hist-lbp --out "$work/store.h5" --force
warca_chain "$work/store.h5" "$work" market1501 200 2 no
