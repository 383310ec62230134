#!/usr/bin/env bash
# DART3 setting A end to end on the built-in `dart3` synthetic preset — no downloads, CI.
# 8 cameras with a strong camera bias; a tiny BoT is trained on cameras 0–4 (CPU), the
# queries of the unseen cameras 5–7 are adapted with every method (one stream per query
# camera) against the full gallery and scored per camera (Table 1 protocol).
# Env: BOT_EPOCHS (6), BOT_MAX_IMAGES (all), UPPER=1 adds the upper-bound backbone,
#      DART3_METHODS to run a subset. CI shrinks the run with DART3_TRAIN_IDS (300) and
#      DART3_TEST_IDS (100) persons, BOT_EPOCHS and BOT_MAX_IMAGES; a shrunk run says so
#      after its table.
# usage: bash recipes/dart3_synthetic.sh [WORKDIR]   (reid must be on PATH)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/_dart3_chain.sh"
work="${1:-runs/dart3_synthetic}"
mkdir -p "$work"
RECIPE_KNOBS="DART3_TRAIN_IDS DART3_TEST_IDS BOT_EPOCHS BOT_MAX_IMAGES"
synth=()
[ -n "${DART3_TRAIN_IDS:-}" ] && synth+=(--option "num_train_ids=$DART3_TRAIN_IDS")
[ -n "${DART3_TEST_IDS:-}" ] && synth+=(--option "num_test_ids=$DART3_TEST_IDS")
[ -d "$work/data/synthetic/dart3" ] || reid data synth --out "$work/data" --preset dart3 \
  "${synth[@]}"
limit=()
[ -n "${BOT_MAX_IMAGES:-}" ] && limit=(--max-images "$BOT_MAX_IMAGES")
DATA_ARGS=(--root "$work/data" --option name=dart3)
UPPER="${UPPER:-0}" dart3_setting_a synthetic 0,1,2,3,4 "$work" synthetic \
  --preset tiny --epochs "${BOT_EPOCHS:-6}" "${limit[@]}" --quiet
