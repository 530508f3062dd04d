#!/usr/bin/env bash
# One command on a fresh machine: install serQ with its test and benchmark dependencies, run
# the bundled example (seconds after the install), install Graphviz's `dot` for `serq draw`
# where it can, install a Lean toolchain (native or the offline one), build the Lean package
# (10-30 minutes: a line per module with what is left), and say what was set up and what to try.
#
# SERQ_SETUP_DRY_RUN=1 prints the commands instead of running them (tests/test_setup_script.py).
set -euo pipefail
cd "$(dirname "$0")/.."

DRY="${SERQ_SETUP_DRY_RUN:-}"
START=$SECONDS
run() {  # a step's command, shown; in a dry run only shown
  echo "+ $*"
  if [ -z "$DRY" ]; then "$@"; fi
}
step() { printf '\n== [%s/5] %s\n' "$1" "$2"; }
elapsed() { local s=$((SECONDS - START)); printf '%dm%02ds' $((s / 60)) $((s % 60)); }

step 1 "installing serQ and its Python dependencies"
run python3 -m pip install --quiet --disable-pip-version-check -e '.[test,bench]'

step 2 "what serQ does: simulating the bundled M/G/1 example (20 000 arrivals, seed 1)"
run serq run examples/single-turn/mg1.sq --arrivals 20000 --seed 1

step 3 "Graphviz's dot, which serq draw renders svg and png with"
DOT="no"
if command -v dot >/dev/null 2>&1; then
  DOT="yes ($(command -v dot))"
  echo "dot is installed"
elif [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  # the package lists may be empty on a fresh machine: update them once if the install fails
  export DEBIAN_FRONTEND=noninteractive
  if run apt-get install -y -qq graphviz || { run apt-get update -qq && run apt-get install -y -qq graphviz; }; then
    DOT="yes (apt-get install graphviz)"
  else
    echo "apt-get could not install graphviz: serq draw will write .dot files only"
  fi
else
  echo "dot is not installed and this is not a root shell with apt-get: serq draw writes .dot files;"
  echo "install Graphviz to render them (sudo apt-get install graphviz, brew install graphviz)"
fi
if [ -n "$DRY" ] || command -v dot >/dev/null 2>&1; then
  run mkdir -p build/setup
  run serq draw examples/pd-disaggregation/llmd_nixl_pull.sq -o build/setup/llmd_nixl_pull.svg
fi

step 4 "a Lean toolchain (native lean and lake, or the offline one)"
run python3 scripts/install_lean.py

step 5 "building the Lean proofs: 10-30 minutes on two cores, a line per module with what is left"
if ! run serq lean build; then
  echo "serq lean build failed (above): serQ itself is installed; the proofs are not built" >&2
  exit 1
fi

LEAN="$(python3 -c 'import json; t = json.load(open(".serq/toolchain.json")); print(t.get("version") or t.get("kind", "?"))' 2>/dev/null || echo "see .serq/toolchain.json")"
cat <<EOF

== set up in $(elapsed)
  serQ          $(if [ -z "$DRY" ]; then serq --version; else echo "(dry run)"; fi), installed editable with its test and benchmark extras
  Graphviz dot  $DOT
  Lean          $LEAN; the proofs built (serq lean build)
  a drawing     build/setup/llmd_nixl_pull.svg (when dot is installed)

== what to try next
  serq draw examples/pd-disaggregation/llmd_nixl_pull.sq -o pd.svg      # a deployment as a picture
  serq sweep examples/multi-turn/vllm.sq --set rate=0.5,1,2 --seeds 1..10 \\
      --instance examples/multi-turn/instances/vllm/default.sq -o sweep-vllm   # load × replications
  serq plot sweep-vllm --x rate --y ttft.p99                              # p99 TTFT against load, 95% CIs
  serq run examples/multi-turn/vllm.sq --horizon 300 --dump run-vllm && serq plot run-vllm
  serq lean check                                                          # no sorry, every claim proved
  python3 -m pytest -q                                                     # the tests (what CI runs)
EOF
