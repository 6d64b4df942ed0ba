#!/bin/sh
# The backend-hw differential (issue #13 item 5): every conformance script
# runs through backend-hw over the drop-in libibverbs.so.1 (with the
# devices the script asks for) and through backend-sim directly; the
# verdicts must agree, except for the scripts listed, with why, in
# shim/ci/hw-divergences.txt.
#   usage: shim/ci/differential.sh TARGET_DIR   (holding verbsim built with --features hw)
set -u
bin="$(cd "$1" && pwd)/verbsim"
root=$(cd "$(dirname "$0")/../.." && pwd)
known="$root/shim/ci/hw-divergences.txt"
agree=0; differ=0; documented=0; skipped=0; bad=""
for s in $(find "$root/conformance/scripts" -name '*.verbs' | sort); do
  rel=${s#"$root"/}
  devs=$(sed -n 's/^#! devices: *//p' "$s" | tr -s ' ' ',')
  [ -n "$devs" ] || devs=cx6,cx6
  sim=$("$bin" run --backend sim "$s" 2>&1 | tail -n 1)
  hw=$(timeout 120 "$bin" exec --devices "$devs" -- "$bin" run --backend hw "$s" 2>&1 | tail -n 1)
  case "$hw" in *"1 skipped"*|*"were skipped"*) skipped=$((skipped+1)); continue;; esac
  if [ "$sim" = "$hw" ]; then
    agree=$((agree+1))
    if grep -q "^$rel " "$known"; then
      echo "note: $rel agrees now; remove it from shim/ci/hw-divergences.txt"
    fi
  elif grep -q "^$rel " "$known"; then
    documented=$((documented+1))
  else
    differ=$((differ+1)); bad="$bad\n  $rel: sim [$sim] hw [$hw]"
  fi
done
echo "backend-hw differential: $agree agree, $documented documented divergences, $differ undocumented, $skipped skipped (sim-only scripts)"
if [ "$differ" -ne 0 ]; then
  printf "disagreements not in shim/ci/hw-divergences.txt:$bad\n"
  exit 1
fi
