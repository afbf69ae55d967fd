#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test: the suite, the cpu
# kernel tests on the baseline (non-AVX2) loops (scripts/test-baseline.sh),
# then the suite again under ASan, UBSan and LSan (scripts/test-sanitizers.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh --test
bash scripts/build.sh
ctest --test-dir build --output-on-failure -j2 "$@"
bash scripts/test-baseline.sh
bash scripts/test-sanitizers.sh
