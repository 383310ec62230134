#!/usr/bin/env bash
# DMG-Net end to end on the built-in `dg` synthetic preset (4 domains) — no downloads, CPU,
# minutes: BoT (reid train bot on the merged sources, the paper's baseline), the paired-batch
# control (reid train dmgnet --no-meta --md-weight 0), DMG-Net and DMG-Net without L_MD
# (--md-weight 0) are trained on domains d0–d2 under ONE budget (tiny sizes, from scratch),
# extracted on the held-out domain d3, evaluated, and printed side by side (the paper has no
# synthetic numbers; its claims are checked against the BoT row).
# Env: DMG_VARIANTS (bot paired dmgnet metagen), DMG_EPOCHS (tiny preset default), DMG_ITERS
#      (iterations per epoch; default ⌊N/(2PK)⌋). CI shrinks the run with DMG_TRAIN_IDS (150)
#      and DMG_TEST_IDS (100) persons per domain, DMG_EPOCHS and DMG_ITERS; a shrunk run says
#      so after its table.
# usage: bash recipes/dmgnet_synthetic.sh [WORKDIR] [reid train options...]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/_dmgnet_chain.sh"
dmgnet_arguments "runs/dmgnet_synthetic" "$@"
RECIPE_KNOBS="DMG_TRAIN_IDS DMG_TEST_IDS DMG_EPOCHS DMG_ITERS DMG_VARIANTS"
INIT="${INIT:-scratch}"
# shellcheck disable=SC2086
dmgnet_check_variants ${DMG_VARIANTS:-bot paired dmgnet metagen}
synth=()
[ -n "${DMG_TRAIN_IDS:-}" ] && synth+=(--option "num_train_ids=$DMG_TRAIN_IDS")
[ -n "${DMG_TEST_IDS:-}" ] && synth+=(--option "num_test_ids=$DMG_TEST_IDS")
# always: it keeps a matching folder and refuses one rendered with other parameters
reid data synth --out "$work/data" --preset dg "${synth[@]}"
SOURCE_ARGS=(--sources synthetic --source-option synthetic.name=dg --root "$work/data"
             --domains synthetic/d0,synthetic/d1,synthetic/d2 --targets synthetic/d3)
results=() runs=()
for variant in ${DMG_VARIANTS:-bot paired dmgnet metagen}; do
  dmgnet_train "$variant" "$work/$variant" --preset tiny --device cpu
  dmgnet_extract "$work/$variant" "$work/$variant.h5" --dataset synthetic --root "$work/data" \
    --option name=dg --option domains=3 --device cpu
  dmgnet_eval "$work/$variant.json" "$work/$variant.h5"
  results+=("$(dmgnet_label "$variant")=$work/$variant.json")
  runs+=("$work/$variant")
done
reid paper compare dmgnet --dataset synthetic "${results[@]}"
dmgnet_notes "${runs[@]}"
