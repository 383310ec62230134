# Shared WARCA chain (sourced by recipes/warca_*.sh): print the protocol the store holds (and
# whether it is the paper's), cross-validate (λ, η) once on split 1's training ids, fit WARCA
# and the baselines of Table 2 over the protocol's trials, print ours beside the paper.
# usage: warca_chain STORE WORKDIR DATASET DIM [TABLE] [KERNELS]
# TABLE 2 (default) or 3 (LOMO); KERNELS=no skips the χ² kernel methods (the paper ran none on
# Market-1501: a 12,936² kernel and an O(N³) solve). RECIPE_KNOBS names the calling recipe's
# shrink variables for the notice after the table.
# Knobs: WARCA_TRIALS (e.g. 0,1) and WARCA_ITERATIONS shorten a run (CI); WARCA_CV=no skips
# the cross-validation (then λ = 1e-3, η = 0.1, the toolkit defaults); WARCA_CV_LAMS /
# WARCA_CV_LRS shrink its grid (default: the paper's 9 × 4); WARCA_GAMMA = auto (default,
# 1 / median χ²) | inv_dim (1 / D, the authors' code) | a number, for every χ² kernel.
# WARCA_SKIP="rPCCA-χ²,LFDA-χ²" leaves methods out (the kernel baselines are the slow ones).
# WARCA_DRAWS (default 10) and WARCA_DRAW (probe_single: the paper's one probe per person;
# gallery_single: Xiong et al.'s one gallery image per person) set the probe/gallery draws.
source "$(dirname "${BASH_SOURCE[0]}")/_shrunk.sh"
# the WARCA protocol's loader options (docs/datasets.md), for reid data check / reid extract
# (WARCA_TEST_IDS=P shrinks the test persons per split, e.g. for a partial copy)
WARCA_PROTOCOL_OPTIONS=(--option protocol=warca --option "draws=${WARCA_DRAWS:-10}"
                        --option "warca_draw=${WARCA_DRAW:-probe_single}"
                        ${WARCA_TEST_IDS:+--option "test_ids=$WARCA_TEST_IDS"})
warca_chain() {
  local store="$1" work="$2" dataset="$3" dim="$4" table="${5:-2}" kernels="${6:-yes}"
  local results=()
  local trials="${WARCA_TRIALS:-all}" iters=() gamma="${WARCA_GAMMA:-auto}"
  [ -n "${WARCA_ITERATIONS:-}" ] && iters=(--iterations "$WARCA_ITERATIONS")
  reid paper warca-protocol header "$store" --dim "$dim" --table "$table"
  echo "χ² bandwidth: gamma=$gamma (auto = 1 / median χ² of the training rows; the authors'" \
       "code uses 1 / D: WARCA_GAMMA=inv_dim)"
  slug_of() { echo "$1" | tr -c 'A-Za-z0-9\n' '_'; }
  # (λ, η) of one WARCA variant: cross-validated on trial 0 (split 1, draw 1) — its training
  # ids are split 1's — on the paper's grid, then reused for every split (WARCA Sect. 4.2)
  select_hyper() {   # label [train options...]; sets $lam $lr
    local label="$1"; shift
    lam=0.001 lr=0.1
    skipped "$label" && return
    if [ "${WARCA_CV:-yes}" = "no" ]; then
      echo "$label: no cross-validation (WARCA_CV=no): λ = $lam, η = $lr (toolkit defaults)"
      return
    fi
    local cv_file; cv_file="$work/cv_$(slug_of "$label").h5"
    local grid=()
    [ -n "${WARCA_CV_LAMS:-}" ] && grid+=(--param "cv_lams=$WARCA_CV_LAMS")
    [ -n "${WARCA_CV_LRS:-}" ] && grid+=(--param "cv_lrs=$WARCA_CV_LRS")
    reid train warca --store "$store" --out "$cv_file" --force --quiet --trials 0 \
      --dim "$dim" --param cv=true "${grid[@]}" "$@" "${iters[@]}"
    local lines
    mapfile -t lines < <(reid paper warca-protocol cv "$cv_file" --with-values)
    [ "${#lines[@]}" -eq 2 ] || { echo "error: cannot read the cv selection of $cv_file" >&2
                                  exit 2; }
    echo "$label: ${lines[0]}"
    read -r lam lr <<< "${lines[1]}"
  }
  skipped() { [[ ",${WARCA_SKIP:-}," == *",$1,"* ]]; }
  run() {   # label method [options...]
    local label="$1" method="$2"; shift 2
    if skipped "$label"; then echo "$label: skipped (WARCA_SKIP)"; return; fi
    local slug; slug="$(slug_of "$label")"
    local extra=()
    case "$method" in warca|rpcca) extra=("${iters[@]}") ;; esac
    reid train "$method" --store "$store" --out "$work/$slug.h5" --force --quiet \
      --trials "$trials" "$@" "${extra[@]}"
    reid eval --store "$store" --model "$work/$slug.h5" --full-cmc --trials "$trials" \
      --json "$work/$slug.json" --force --quiet
    results+=("$label=$work/$slug.json")
  }
  local chi2=(--kernel chi2rbf --param "gamma=$gamma")
  if [ "$table" = "3" ]; then
    select_hyper "WARCA" "${chi2[@]}"
    run "WARCA" warca --dim "$dim" "${chi2[@]}" --reg "$lam" --lr "$lr" \
      --param holdout_check=0
  else
    if [ "$kernels" = "yes" ]; then
      select_hyper "WARCA-χ²" "${chi2[@]}"
      run "WARCA-χ²" warca --dim "$dim" "${chi2[@]}" --reg "$lam" --lr "$lr" \
        --param holdout_check=0
      run "rPCCA-χ²" rpcca --dim "$dim" "${chi2[@]}"
      run "rPCCA-L" rpcca --dim "$dim" --kernel linear
      run "LFDA-χ²" klfda --dim "$dim" "${chi2[@]}"
    fi
    select_hyper "WARCA-L"
    run "WARCA-L" warca --dim "$dim" --reg "$lam" --lr "$lr" --param holdout_check=0
    run "LFDA-L" lfda --dim "$dim"
    # [8]'s code reduces to a fixed PCA dimension (95 % variance can exceed the pair count)
    run "KISSME" kissme --dim "$dim"
  fi
  reid eval --store "$store" --full-cmc --trials "$trials" --json "$work/euclidean.json" \
    --force --quiet
  results+=("Euclidean=$work/euclidean.json")
  reid paper compare warca --dataset "$dataset" --table "$table" "${results[@]}"
  # shellcheck disable=SC2086
  shrunk_notice WARCA_SKIP WARCA_TEST_IDS WARCA_TRIALS WARCA_ITERATIONS WARCA_DRAWS \
    WARCA_DRAW WARCA_CV WARCA_CV_LAMS WARCA_CV_LRS ${RECIPE_KNOBS:-}
}
