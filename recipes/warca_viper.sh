#!/usr/bin/env bash
# WARCA Table 2 on VIPeR: HistLBP-2580 descriptors → WARCA (χ², linear) and the baselines
# (rPCCA, LFDA, KISSME) over the protocol's trials, printed beside the paper's mean ± std.
# usage: REIDCLI_DATA=/data bash recipes/warca_viper.sh [WORKDIR]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/_warca_chain.sh"
: "${REIDCLI_DATA:?set REIDCLI_DATA to the folder holding viper (see reid data info viper)}"
work="${1:-runs/warca_viper}"
mkdir -p "$work"
reid data check viper --option protocol=warca 
reid extract --dataset viper --option protocol=warca --features hist-lbp --out "$work/store.h5" --force
warca_chain "$work/store.h5" "$work" viper 100
