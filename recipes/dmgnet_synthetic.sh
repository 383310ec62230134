#!/usr/bin/env bash
# DMG-Net Table 6 (ablation) on the built-in `dg` synthetic preset (4 domains) — no
# downloads, CPU: BoT (reid train bot on the merged sources, the paper's baseline),
# Meta-discrimination (--no-meta), Meta-generalization (--md-weight 0), DMG-Net and the
# paired-batch control (--no-meta --md-weight 0, not in the paper) are trained on domains
# d0–d2 under ONE budget (tiny sizes, from scratch) at seeds 0, 1 and 2, extracted on the
# held-out domain d3 and evaluated in ONE process (reid paper ablation dmgnet), and printed
# mean ± std over the seeds with the paper's Table 6 orderings as PASS/FAIL lines (the paper
# has no synthetic numbers; its claims are checked against the BoT row).
# Env: DMG_VARIANTS (bot metadisc metagen dmgnet paired), DMG_SEEDS (0,1,2), DMG_EPOCHS (16),
#      DMG_ITERS (iterations per epoch; 330 = ⌊N/(2PK)⌋ at the preset's size, else the
#      trainer's ⌊N/(2PK)⌋ with BoT on its own pass per epoch). CI shrinks the
#      run with DMG_TRAIN_IDS (150) and DMG_TEST_IDS (100) persons per domain, DMG_SEEDS,
#      DMG_EPOCHS and DMG_ITERS; a shrunk run says so after its table.
# Writes WORKDIR/data (the images), WORKDIR/VARIANT/seedS/ (runs), WORKDIR/VARIANT/seedS.h5
# (stores on d3), WORKDIR/VARIANT.json (reid eval over the seeds) and WORKDIR/ablation.json.
# usage: bash recipes/dmgnet_synthetic.sh [WORKDIR] [reid train options...]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/_dmgnet_chain.sh"
dmgnet_arguments "runs/dmgnet_synthetic" "$@"
RECIPE_KNOBS="DMG_TRAIN_IDS DMG_TEST_IDS DMG_SEEDS DMG_EPOCHS DMG_ITERS DMG_VARIANTS"
INIT="${INIT:-scratch}"
# shellcheck disable=SC2086
dmgnet_check_variants ${DMG_VARIANTS:-bot metadisc metagen dmgnet paired}
synth=()
[ -n "${DMG_TRAIN_IDS:-}" ] && synth+=(--option "num_train_ids=$DMG_TRAIN_IDS")
[ -n "${DMG_TEST_IDS:-}" ] && synth+=(--option "num_test_ids=$DMG_TEST_IDS")
# always: it keeps a matching folder and refuses one rendered with other parameters
reid data synth --out "$work/data" --preset dg "${synth[@]}"
SOURCE_ARGS=(--sources synthetic --source-option synthetic.name=dg --root "$work/data"
             --domains synthetic/d0,synthetic/d1,synthetic/d2 --targets synthetic/d3)
# the budget of docs/methods/dmgnet.md "Ablation on synthetic data": 16 epochs of
# ⌊N/(2PK)⌋ = 330 iterations on the preset's 5,280 source images (BoT: 660, P×K batches)
DEFAULT_EPOCHS=16
[ -z "${DMG_TRAIN_IDS:-}" ] && DEFAULT_ITERS=330
dmgnet_ablation "$work" --preset tiny --device cpu
dmgnet_notes "$work"
