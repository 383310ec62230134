# Shared WARCA chain (sourced by recipes/warca_*.sh): fit WARCA and the baselines of Table 2 on
# a feature store, evaluate over the protocol's trials, print ours beside the paper.
# usage: warca_chain STORE WORKDIR DATASET DIM [TABLE] [KERNELS]
# TABLE 2 (default) or 3 (LOMO); KERNELS=no skips the χ² kernel methods (the paper ran none on
# Market-1501: a 12,936² kernel and an O(N³) solve). RECIPE_KNOBS names the calling recipe's
# shrink variables for the notice after the table.
source "$(dirname "${BASH_SOURCE[0]}")/_shrunk.sh"
warca_chain() {
  local store="$1" work="$2" dataset="$3" dim="$4" table="${5:-2}" kernels="${6:-yes}"
  local results=()
  # WARCA_TRIALS (e.g. 0,1) and WARCA_ITERATIONS shorten a run (CI); defaults = the paper's
  local trials="${WARCA_TRIALS:-all}" iters=()
  [ -n "${WARCA_ITERATIONS:-}" ] && iters=(--iterations "$WARCA_ITERATIONS")
  run() {   # label method [options...]
    local label="$1" method="$2"; shift 2
    local slug; slug="$(echo "$label" | tr -c 'A-Za-z0-9\n' '_')"
    local extra=()
    case "$method" in warca|rpcca) extra=("${iters[@]}") ;; esac
    reid train "$method" --store "$store" --out "$work/$slug.h5" --force --quiet \
      --trials "$trials" "$@" "${extra[@]}"
    reid eval --store "$store" --model "$work/$slug.h5" --full-cmc --trials "$trials" \
      --json "$work/$slug.json" --force --quiet
    results+=("$label=$work/$slug.json")
  }
  if [ "$table" = "3" ]; then
    run "WARCA" warca --dim "$dim" --kernel chi2rbf
  else
    if [ "$kernels" = "yes" ]; then
      run "WARCA-χ²" warca --dim "$dim" --kernel chi2rbf
      run "rPCCA-χ²" rpcca --dim "$dim" --kernel chi2rbf
      run "rPCCA-L" rpcca --dim "$dim" --kernel linear
      run "LFDA-χ²" klfda --dim "$dim" --kernel chi2rbf
    fi
    run "WARCA-L" warca --dim "$dim"
    run "LFDA-L" lfda --dim "$dim"
    # [8]'s code reduces to a fixed PCA dimension (95 % variance can exceed the pair count)
    run "KISSME" kissme --dim "$dim"
  fi
  reid eval --store "$store" --full-cmc --trials "$trials" --json "$work/euclidean.json" \
    --force --quiet
  results+=("Euclidean=$work/euclidean.json")
  python -m reidcli.paper.compare warca --dataset "$dataset" --table "$table" "${results[@]}"
  # shellcheck disable=SC2086
  shrunk_notice WARCA_TRIALS WARCA_ITERATIONS ${RECIPE_KNOBS:-}
}
