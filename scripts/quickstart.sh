#!/usr/bin/env bash
# Quick start: install the packages, build (Release), then run the main job on
# the embedded default (SQLite): a project, three work items, two workers
# that claim and finish them, one stale report refused, and a verify of the
# whole ledger.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$(nproc)"
bash scripts/demo.sh build/cli/cplane build/demo.db
# And the same store under contention: four worker processes drain 1,000
# items; the probe checks every count exactly (PASS) and verifies the ledger.
rm -f build/probe-demo.db build/probe-demo.db-wal build/probe-demo.db-shm build/probe-demo.db-lock
build/probe/cplane-probe --store build/probe-demo.db --scenario concurrent-queue --workers 4 --items 1000
