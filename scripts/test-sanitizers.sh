#!/usr/bin/env bash
# The suite again, built with AddressSanitizer, UndefinedBehaviorSanitizer and
# LeakSanitizer (gcc): a memory error, undefined behaviour or a leak, in a
# test program or in any ltrun worker of an integration test, fails the test
# that hit it. Into ./build-sanitize; scripts/test.sh runs it after the suite.
# The fuzz targets are left out (they carry their own sanitizers), and so is
# precision_accuracy (label accuracy: long training, no path of its own). Two ASan
# defaults are changed for what the tests check: handle_segv=0, since
# ltrun_signals kills a rank with SIGSEGV and expects it to die by the signal;
# verify_asan_link_order=0, since install_sdk builds a program of its own,
# uninstrumented, against the instrumented liblt.
set -euo pipefail
cd "$(dirname "$0")/.."
flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
cmake -S . -B build-sanitize -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" \
      -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
      -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
cmake --build build-sanitize -j"$(nproc)"
export ASAN_OPTIONS=detect_leaks=1:handle_segv=0:verify_asan_link_order=0
export UBSAN_OPTIONS=print_stacktrace=1
ctest --test-dir build-sanitize --output-on-failure -j2 -LE "fuzz|accuracy" "$@"
