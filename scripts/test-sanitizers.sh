#!/usr/bin/env bash
# The unit tests again, built with AddressSanitizer, UndefinedBehaviorSanitizer
# and LeakSanitizer (gcc): a memory error, undefined behaviour or a leak fails
# the test that hit it. Into ./build-sanitize; scripts/test.sh runs it after
# the suite. Integration and fuzz tests are left out here (the fuzz targets
# have their own sanitizers; the integration runs are timed for a plain build).
set -euo pipefail
cd "$(dirname "$0")/.."
flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
cmake -S . -B build-sanitize -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" \
      -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
      -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
cmake --build build-sanitize -j"$(nproc)"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1
ctest --test-dir build-sanitize --output-on-failure -j2 -LE 'integration|fuzz' "$@"
