#!/usr/bin/env bash
# The cpu accelerator's hot loops are compiled twice (CPU_HOT in
# plugins/accelerators/cpu/cpu_internal.h): an x86-64-v3 clone, which an
# ifunc picks on a CPU with AVX2 and FMA, and the baseline loops any other
# x86-64 runs. The main build tests only the one this CPU picks. This builds
# the plugin with the baseline loops alone (-DCPU_HOT=) and runs the kernel
# tests on it, so both clones are tested on every x86-64 machine. (Kernels
# that pick a path at run time by CPU feature, F16C's casts and lt's GEMM
# variants, keep their own choice; `accelerator.isa` reaches the GEMM ones.)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(uname -m)" != x86_64 ]; then
    echo "test-baseline: $(uname -m) builds one variant of the loops, tested by the main build: skipped"
    exit 0
fi
tests=(test_nn_grad test_cpu_gemm test_cpu_kernels test_cpu_kernels_lowp test_cpu_lowp
       test_cpu_quantize test_cpu_replicas test_kernel_ops)
cmake -S . -B build-baseline -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_FLAGS=-DCPU_HOT= >/dev/null
cmake --build build-baseline -j"$(nproc)" --target lt-accelerator-cpu "${tests[@]}"
pattern=$(IFS='|'; echo "${tests[*]}")
ctest --test-dir build-baseline --output-on-failure -j2 -R "^(${pattern})\$" "$@"
