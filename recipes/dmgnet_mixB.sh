#!/usr/bin/env bash
# DMG-Net Table 5, Mixed B: DMG-Net and BoT (reid train bot on the same sources, same budget)
# trained on the train splits of MSMT17, CUHK03, Market-1501 and DukeMTMC-reID (--sources
# mixed_b) with colour jitter, then every trial (10) of PRID2011, GRID, VIPeR and i-LIDS
# extracted and evaluated in ONE reid eval per target (mean ± std), printed beside the paper's
# Table 5 and its claim (DMG-Net > BoT on every target); then how the budget departs from the
# paper's.
# Env: ROOT (required: the data root holding the sources and targets), INIT (imagenet | PATH
#      to a local ResNet-50 state dict | scratch; default imagenet), TRIALS (0 1 … 9), TARGETS
#      (prid2011 grid viper ilids), DMG_VARIANTS (dmgnet bot; also paired, metagen, metadisc),
#      DMG_EPOCHS, DMG_ITERS (shrink the paper's 120 epochs × ⌊N/(2PK)⌋ iterations: the output
#      says so), TARGET_OPTIONS / SOURCE_OPTIONS ("NAME.KEY=VALUE ...": loader options of a
#      target / a source, e.g. prid2011.test_ids=50 — they change the protocol).
# usage: ROOT=/data INIT=imagenet bash recipes/dmgnet_mixB.sh [WORKDIR] [reid train options...]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/_dmgnet_chain.sh"
: "${ROOT:?set ROOT to the data root holding the Mixed B sources and the four targets}"
dmgnet_arguments "runs/dmgnet_mixB" "$@"
RECIPE_KNOBS="TRIALS TARGETS TARGET_OPTIONS SOURCE_OPTIONS DMG_EPOCHS DMG_ITERS DMG_VARIANTS"
INIT="${INIT:-imagenet}"
dmgnet_mixed mixed_b
