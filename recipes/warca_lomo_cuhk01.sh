#!/usr/bin/env bash
# WARCA Table 3 on cuhk01 with LOMO (26,960-d) descriptors, printed beside the paper.
# usage: REIDCLI_DATA=/data bash recipes/warca_lomo_cuhk01.sh [WORKDIR]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/_warca_chain.sh"
: "${REIDCLI_DATA:?set REIDCLI_DATA to the folder holding cuhk01 (see reid data info cuhk01)}"
work="${1:-runs/warca_lomo_cuhk01}"
mkdir -p "$work"
reid extract --dataset cuhk01 "${WARCA_PROTOCOL_OPTIONS[@]}" --features lomo \
  --out "$work/store.h5" --force
warca_chain "$work/store.h5" "$work" cuhk01 40 3
