#!/usr/bin/env bash
# DART3 Table 1, column market_5cam — a new camera in an existing network (setting A).
# Market-1501 trained on c1–c5 ([D] docs/methods/dart3.md item 12); unseen: c6.
# A BoT (ResNet-50, reid train bot) is trained on the seen cameras, the unseen cameras' queries
# are adapted with No-adapt, TENT, TEMP, Norm, DART3 and DART3 LITE (one stream per query
# camera) against the full gallery, scored per camera and weighted by valid queries, and
# printed beside the paper's TransReID / CLIP-ReID numbers (reidcli/paper/dart3_table1.csv).
# UPPER=1 (default) also trains the upper bound: all cameras, as many training images.
# Env: REIDCLI_DATA (required), BACKBONE_RUN (skip training: a run dir trained on these
#      cameras), BACKBONE (bot | pcb), UPPER (1 | 0), DART3_METHODS.
# usage: REIDCLI_DATA=/data bash recipes/dart3_market_5cam.sh [WORKDIR] [reid train options...]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/_dart3_chain.sh"
: "${REIDCLI_DATA:?set REIDCLI_DATA to the folder holding market1501 (see reid data info market1501)}"
work="${1:-runs/dart3_market_5cam}"
shift || true
reid data check market1501
dart3_setting_a market1501 0,1,2,3,4 "$work" market_5cam "$@"
