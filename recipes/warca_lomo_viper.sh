#!/usr/bin/env bash
# WARCA Table 3 on viper with LOMO (26,960-d) descriptors, printed beside the paper.
# usage: REIDCLI_DATA=/data bash recipes/warca_lomo_viper.sh [WORKDIR]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/_warca_chain.sh"
: "${REIDCLI_DATA:?set REIDCLI_DATA to the folder holding viper (see reid data info viper)}"
work="${1:-runs/warca_lomo_viper}"
mkdir -p "$work"
reid extract --dataset viper "${WARCA_PROTOCOL_OPTIONS[@]}" --features lomo \
  --out "$work/store.h5" --force
warca_chain "$work/store.h5" "$work" viper 100 3
