#!/usr/bin/env bash
# WARCA Table 2 on PRID450s: HistLBP-2580 descriptors → WARCA (χ², linear) and the baselines
# (rPCCA, LFDA, KISSME) over the protocol's trials, printed beside the paper's mean ± std.
# usage: REIDCLI_DATA=/data bash recipes/warca_prid450s.sh [WORKDIR]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/_warca_chain.sh"
: "${REIDCLI_DATA:?set REIDCLI_DATA to the folder holding prid450s (see reid data info prid450s)}"
work="${1:-runs/warca_prid450s}"
mkdir -p "$work"
reid data check prid450s --option protocol=warca 
reid extract --dataset prid450s --option protocol=warca --features hist-lbp --out "$work/store.h5" --force
warca_chain "$work/store.h5" "$work" prid450s 40
