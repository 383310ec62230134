# Shared WARCA chain (sourced by recipes/warca_*.sh): fit WARCA and the baselines of Table 2 on
# a feature store, evaluate over the protocol's trials, print ours beside the paper.
# usage: warca_chain STORE WORKDIR DATASET DIM [TABLE]
warca_chain() {
  local store="$1" work="$2" dataset="$3" dim="$4" table="${5:-2}"
  local results=()
  run() {   # label method [options...]
    local label="$1" method="$2"; shift 2
    local slug; slug="$(echo "$label" | tr -c 'A-Za-z0-9\n' '_')"
    reid train "$method" --store "$store" --out "$work/$slug.h5" --force --quiet "$@"
    reid eval --store "$store" --model "$work/$slug.h5" --full-cmc \
      --json "$work/$slug.json" --force --quiet
    results+=("$label=$work/$slug.json")
  }
  if [ "$table" = "3" ]; then
    run "WARCA" warca --dim "$dim" --kernel chi2rbf
  else
    run "WARCA-χ²" warca --dim "$dim" --kernel chi2rbf
    run "WARCA-L" warca --dim "$dim"
    run "rPCCA-χ²" rpcca --dim "$dim" --kernel chi2rbf
    run "LFDA-χ²" klfda --dim "$dim" --kernel chi2rbf
    run "LFDA-L" lfda --dim "$dim"
    run "KISSME" kissme
  fi
  reid eval --store "$store" --full-cmc --json "$work/euclidean.json" --force --quiet
  results+=("Euclidean=$work/euclidean.json")
  python -m reidcli.paper.compare warca --dataset "$dataset" --table "$table" "${results[@]}"
}
