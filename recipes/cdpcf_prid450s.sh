#!/usr/bin/env bash
# C-DPCF Table I / Fig. 3 on prid450s: PCB trained on MSMT17 (reid train pcb) → conv maps of
# conv2_x..conv5_x pooled to 24×8 → fit-pooling (C-DPCF, DPCF, AvgP+XQDA, AvgP+pad.+XQDA)
# → eval over the 10 trials, printed beside the paper (reidcli/paper/cdpcf_table1.csv).
# usage: REIDCLI_DATA=/data PCB_CKPT=runs/pcb_msmt17 bash recipes/cdpcf_prid450s.sh [WORKDIR]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/_cdpcf_chain.sh"
: "${REIDCLI_DATA:?set REIDCLI_DATA to the folder holding prid450s (see reid data info prid450s)}"
: "${PCB_CKPT:?set PCB_CKPT to a PCB run dir trained on MSMT17 (reid train pcb)}"
work="${1:-runs/cdpcf_prid450s}"
mkdir -p "$work"
reid data check prid450s
reid extract --model "$PCB_CKPT" --dataset prid450s --option protocol=half --features pcb_g \
  --maps conv2_x,conv3_x,conv4_x,conv5_x --map-size 24x8 --out "$work/store.h5" --force
cdpcf_chain "$work/store.h5" "$work" prid450s pcb_g --K 10 --E 64 --G 6
