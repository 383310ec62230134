# Shared C-DPCF chain (sourced by recipes/cdpcf_*.sh): fit every method of Table I / Fig. 3
# on a conv-map store, evaluate over the protocol's trials and print ours beside the paper.
# usage: cdpcf_chain STORE WORKDIR DATASET_COLUMN [PCB_FEATURE] [fit-pooling options...]
# CDPCF_TRIALS (e.g. 0) fits and evaluates only those protocol trials (CI; default: all);
# RECIPE_KNOBS names the calling recipe's own shrink variables for the notice after the table.
source "$(dirname "${BASH_SOURCE[0]}")/_shrunk.sh"
cdpcf_chain() {
  local store="$1" work="$2" column="$3" pcb_feature="$4"; shift 4
  local results=() trials=()
  [ -n "${CDPCF_TRIALS:-}" ] && trials=(--trials "$CDPCF_TRIALS")
  local -A labels=([cdpcf]="C-DPCF" [dpcf]="DPCF" [avgp]="AvgP+XQDA" [avgp-pad]="AvgP+pad.+XQDA")
  for method in cdpcf dpcf avgp avgp-pad; do
    reid fit-pooling "$method" --store "$store" --out "$work/$method.h5" --force \
      "${trials[@]}" "$@"
    reid eval --store "$store" --model "$work/$method.h5" --json "$work/$method.json" \
      --force --quiet "${trials[@]}"
    results+=("${labels[$method]}=$work/$method.json")
    rm -f "$work/$method.h5"      # fitted files are large on real data (docs/methods/cdpcf.md)
  done
  if [ -n "$pcb_feature" ]; then   # PCB (source): cosine on the whole raw PCB-g vector
    reid eval --store "$store" --feature "$pcb_feature" --feat-norm global \
      --json "$work/pcb_source.json" --force --quiet "${trials[@]}"
    results+=("PCB (source)=$work/pcb_source.json")
  fi
  reid paper compare cdpcf --dataset "$column" "${results[@]}"
  # shellcheck disable=SC2086
  shrunk_notice CDPCF_TRIALS ${RECIPE_KNOBS:-}
}
