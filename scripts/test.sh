#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test: the suite, then the
# suite again under ASan, UBSan and LSan (scripts/test-sanitizers.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh --test
bash scripts/build.sh
ctest --test-dir build --output-on-failure -j2 "$@"
bash scripts/test-sanitizers.sh
