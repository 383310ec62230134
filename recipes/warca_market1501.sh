#!/usr/bin/env bash
# WARCA Table 2 on Market-1501 as the paper ran it: the protocol and Bag-of-Words descriptor of
# the Market-1501 paper (751 training ids, 3,368 single queries, the fixed split; colour names
# on local patches, a learned codebook), WARCA-L and the linear baselines with D' = 200 (no
# kernel methods, as in the paper), (λ, η) cross-validated on the training ids, printed beside
# the paper's Table 2 row. usage: REIDCLI_DATA=/data bash recipes/warca_market1501.sh [WORKDIR]
# BOW_W2C=/path/w2c.mat uses the real Colour Names table (else the built-in approximation,
# which the extraction says).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/_warca_chain.sh"
: "${REIDCLI_DATA:?set REIDCLI_DATA to the folder holding market1501 (see reid data info market1501)}"
work="${1:-runs/warca_market1501}"
mkdir -p "$work"
reid data check market1501
reid extract --dataset market1501 --features bow ${BOW_W2C:+--color-names "$BOW_W2C"} \
  --out "$work/store.h5" --force
warca_chain "$work/store.h5" "$work" market1501 200 2 no
