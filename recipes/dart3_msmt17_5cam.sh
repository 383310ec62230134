#!/usr/bin/env bash
# DART3 Table 1, column msmt17_5cam — a new camera in an existing network (setting A).
# MSMT17 trained on file cameras 2–6 (0-based 1–5; docs/methods/dart3.md, the paper's 8,245 images); unseen: 1, 7–15.
# A BoT (ResNet-50, reid train bot) is trained on the seen cameras, the unseen cameras' queries
# are adapted with No-adapt, TENT, TEMP, Norm, DART3 and DART3 LITE (one stream per query
# camera) against the full gallery, scored per camera and weighted by valid queries, and
# printed beside the paper's TransReID / CLIP-ReID numbers (reidcli/paper/dart3_table1.csv).
# UPPER=1 (default) also trains the upper bound: all cameras, as many training images.
# Env: REIDCLI_DATA (required), BACKBONE_RUN (skip training: a run dir trained on these
#      cameras), BACKBONE (bot | pcb), UPPER (1 | 0), DART3_METHODS.
# usage: REIDCLI_DATA=/data bash recipes/dart3_msmt17_5cam.sh [WORKDIR] [reid train options...]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/_dart3_chain.sh"
: "${REIDCLI_DATA:?set REIDCLI_DATA to the folder holding msmt17 (see reid data info msmt17)}"
work="${1:-runs/dart3_msmt17_5cam}"
shift || true
reid data check msmt17
dart3_setting_a msmt17 1,2,3,4,5 "$work" msmt17_5cam "$@"
