#!/usr/bin/env bash
# DMG-Net Tables 4 and 6 on Person30K: DMG-Net, BoT (reid train bot), Meta-generalization (no
# L_MD) and Meta-discrimination (no meta step) trained on the Person30K train rows under
# ONE budget (colour jitter off, DMG-Net paper §5), each evaluated on Test-A, Test-B and
# Test-C, printed beside the paper. "protocol assumed": the paper gives no query/gallery rule
# inside a test subset; the query rule and the manifest format are reidcli's (docs/datasets.md, Person30K).
# Env: ROOT (required: the data root holding person30k/manifest.csv), INIT (imagenet | PATH |
#      scratch; default imagenet), SUBSETS (A B C), DMG_VARIANTS (dmgnet bot metagen
#      metadisc; also paired), DMG_EPOCHS, DMG_ITERS (shrink the paper's 120 epochs × ⌊N/(2PK)⌋
#      iterations: the output says so).
# usage: ROOT=/data INIT=imagenet bash recipes/dmgnet_person30k.sh [WORKDIR] [reid train options...]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/_dmgnet_chain.sh"
: "${ROOT:?set ROOT to the data root holding person30k/manifest.csv (see reid data info person30k)}"
dmgnet_arguments "runs/dmgnet_person30k" "$@"
RECIPE_KNOBS="SUBSETS DMG_EPOCHS DMG_ITERS DMG_VARIANTS"
INIT="${INIT:-imagenet}"
variants="${DMG_VARIANTS:-dmgnet bot metagen metadisc}"
# shellcheck disable=SC2086
dmgnet_check_variants $variants
SOURCE_ARGS=(--sources person30k --root "$ROOT" --source-split train --color-jitter off)
runs=()
for variant in $variants; do
  dmgnet_train "$variant" "$work/$variant"
  runs+=("$work/$variant")
done
for subset in ${SUBSETS:-A B C}; do
  results=()
  for variant in $variants; do
    dmgnet_extract "$work/$variant" "$work/${variant}_$subset.h5" --dataset person30k \
      --root "$ROOT" --option "test_subset=$subset"
    dmgnet_eval "$work/${variant}_$subset.json" "$work/${variant}_$subset.h5"
    results+=("$(dmgnet_label "$variant")=$work/${variant}_$subset.json")
  done
  reid paper compare dmgnet --table 6 --subset "$subset" "${results[@]}"
done
dmgnet_notes "${runs[@]}"
