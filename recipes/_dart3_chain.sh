# Shared DART3 chain (sourced by recipes/dart3_*.sh): adapt a store with every method of
# DART3's Tables 1–2, evaluate each adapted store and print ours beside the paper.
# usage: dart3_chain STORE WORKDIR MODEL_RUN TABLE COLUMN [extra reid adapt options...]
#   TABLE 1 (new camera: camera-split protocol, per-camera streams) | 2 (cross-dataset)
#   UPPER_JSON=path adds an "Upper Bound" row (a reid eval --json of the upper-bound model)
#   DART3_METHODS overrides the list (default: none tent temp norm dart3 dart3-lite)
#   RECIPE_KNOBS names the calling recipe's shrink variables for the notice after the table
source "$(dirname "${BASH_SOURCE[0]}")/_shrunk.sh"
dart3_chain() {
  local store="$1" work="$2" model="$3" table="$4" column="$5"; shift 5
  local eval_args=() adapt_args=()
  if [ "$table" = 1 ]; then
    eval_args=(--protocol camera-split --per-camera)
    adapt_args=(--split-by-query-camera)
  fi
  local -A labels=([none]="No-adapt" [tent]="TENT" [temp]="TEMP" [norm]="Norm"
                   [dart3]="DART3" [dart3-lite]="DART3 LITE")
  local results=() method args
  for method in ${DART3_METHODS:-none tent temp norm dart3 dart3-lite}; do
    case "$method" in
      dart3) args=(dart3 --mode full --model "$model") ;;
      tent|temp) args=("$method" --model "$model") ;;
      *) args=("$method") ;;
    esac
    reid adapt "${args[@]}" --store "$store" --out "$work/$method.h5" --drop-convmaps \
      --force --quiet "${adapt_args[@]}" "$@"
    reid eval --store "$work/$method.h5" "${eval_args[@]}" --nmi --json "$work/$method.json" \
      --force --quiet
    results+=("${labels[$method]}=$work/$method.json")
  done
  [ -n "${UPPER_JSON:-}" ] && results+=("Upper Bound=$UPPER_JSON")
  reid paper compare dart3 --table "$table" --dataset "$column" "${results[@]}"
  # shellcheck disable=SC2086
  shrunk_notice ${RECIPE_KNOBS:-}
}

# Setting A (new camera, Table 1): train on TRAIN_CAMS, extract the camera-held-out split
# (queries of the unseen cameras, full gallery), run the chain; with UPPER=1 also train the
# upper bound (all cameras, as many images as the restricted run, seeded) and evaluate it.
# usage: dart3_setting_a DATASET TRAIN_CAMS WORKDIR COLUMN [reid train options...]
#   the array DATA_ARGS (e.g. --root DIR --option name=dart3) goes to train and extract
DATA_ARGS=()
dart3_setting_a() {
  local dataset="$1" cams="$2" work="$3" column="$4"; shift 4
  mkdir -p "$work"
  local run="${BACKBONE_RUN:-$work/backbone}"
  if [ -z "${BACKBONE_RUN:-}" ]; then
    reid train "${BACKBONE:-bot}" --dataset "$dataset" "${DATA_ARGS[@]}" --train-cams "$cams" \
      --out "$run" --force "$@"
  fi
  local split=(--dataset "$dataset" "${DATA_ARGS[@]}" --option protocol=camera_holdout
               --option "train_cams=$cams" --option gallery_cams=all)
  reid extract --model "$run" "${split[@]}" --out "$work/store.h5" --force
  if [ "${UPPER:-1}" = 1 ]; then
    local n
    n=$(python -c "import json,sys; print(json.load(open(sys.argv[1]))['num_images'])" \
        "$run/config.json")
    reid train "${BACKBONE:-bot}" --dataset "$dataset" "${DATA_ARGS[@]}" \
      --max-images "$n" --subsample-seed 0 --out "$work/upper" --force "$@"
    reid extract --model "$work/upper" "${split[@]}" --out "$work/upper_store.h5" --force
    reid eval --store "$work/upper_store.h5" --protocol camera-split --per-camera \
      --json "$work/upper.json" --force --quiet
    UPPER_JSON="$work/upper.json"
  fi
  UPPER_JSON="${UPPER_JSON:-}" dart3_chain "$work/store.h5" "$work" "$run" 1 "$column"
}
