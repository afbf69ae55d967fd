#!/usr/bin/env bash
# Configures and builds into ./build (LT_WITH_CUDA=AUTO: GPU parts only where a toolkit is).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)"
