#!/usr/bin/env bash
# One command on a fresh machine: install serQ with its test and benchmark
# dependencies, install a Lean toolchain (native or the offline one), build the
# Lean package, and run the bundled example.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install --quiet --disable-pip-version-check -e '.[test,bench]'
python3 scripts/install_lean.py
serq lean build
serq run examples/single-turn/mg1.sq --arrivals 20000 --seed 1
