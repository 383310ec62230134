# Shrunk-run notice (sourced by recipes/_*_chain.sh): a recipe run with environment knobs that
# shrink it below the paper's protocol (fewer persons, images, epochs, trials, iterations) says
# so after its table; a run with none of them set prints nothing.
# usage: shrunk_notice VAR...   (one line naming every VAR that is set, when any is)
shrunk_notice() {
  local knobs=() knob
  for knob in "$@"; do
    if [ -n "${!knob:-}" ]; then knobs+=("$knob=${!knob}"); fi
  done
  if [ "${#knobs[@]}" -gt 0 ]; then
    echo "SHRUNK run (${knobs[*]}): departs from the paper's protocol — the figures and" \
         "PASS/FAIL lines above check the chain, not the paper's claims"
  fi
}
