#!/bin/bash
# (a) One GPU trains what the cpu trains: the MLP and the CNN example,
# single_device, --accelerator gpu --devices 1 against --accelerator cpu,
# 20 steps at batch 64, seed 1, SGD lr 0.05 momentum 0.9, dropout 0; the data
# order is the same on both (the sampler runs on the host from the seed).
# The parameters of the last checkpoints are compared with ckpt_compare.
#
# Tolerance: cuBLAS and OpenBLAS (or lt's own kernels) add the terms of each
# product in different orders, and CUDA's expf/logf differ from glibc's by an
# ulp or so, so float32 runs drift apart by rounding. Held to 1e-5 on the
# norm ratio ||gpu-cpu||/||cpu|| and 1e-2 elementwise (|a-b| / max(|b|,
# 1e-3)). For scale: merely adding two half-batch gradients in another order
# on the cpu gives, after 20 steps, ~1e-7 (MLP) and 5.5e-7 (CNN) on the norm
# ratio but up to 1.4e-4 elementwise (weights near zero carry the largest
# relative rounding), and here every operation rounds differently. A wrong
# kernel, a missed synchronisation or a stale buffer moves the norm ratio by
# 1e-3 and more and single elements by O(1); the last case shows that the
# comparison tells seed 2 from seed 1. In float64
# (64-true), where rounding is ~1e-16, both measures must stay under 1e-10
# (run only when the gpu accelerator has float64 kernels; said when not).
source "$(dirname "$0")/lib.sh"
gpu_init gpu_single "$@"
TOL=1e-5      # norm ratio, float32
TOL_MAX=1e-2  # elementwise, float32
TOL64=1e-10   # both, float64
SAME=(--seed 1 --set data.shuffle=true --set optimizer.name=sgd --set optimizer.lr=0.05
      --set optimizer.momentum=0.9 --set model.dropout=0 --max-epochs 1 --max-steps 20
      --batch-size 64 --strategy single_device --devices 1)
CNN=(--set model.name=fashion_mnist_cnn --set model.channels=8 --set model.hidden=32)

echo "gpu_single: MLP 784-64-64-10: gpu vs cpu, 20 steps, float32"
train mlpgpu --accelerator "$GPU"
summary_has mlpgpu "^lt: accelerator $GPU \(1 device\), strategy single_device"
train mlpcpu --accelerator cpu
compare mlpgpu mlpcpu
grep -h '^epoch 0 done' "$IT_TMP/mlpgpu.out" "$IT_TMP/mlpcpu.out" | sed 's/^/    /'

echo "gpu_single: CNN (conv3x3 8 - pool - conv3x3 16 - pool - 32 - 10): gpu vs cpu, 20 steps, float32"
train cnngpu "${CNN[@]}" --accelerator "$GPU"
summary_has cnngpu "^lt: accelerator $GPU \(1 device\), strategy single_device, .*model fashion_mnist_cnn"
train cnncpu "${CNN[@]}" --accelerator cpu
compare cnngpu cnncpu

echo "gpu_single: the same in float64 (64-true), where only rounding of 1e-16 may differ"
if f64_on_gpu; then
    train mlpgpu64 --accelerator "$GPU" --precision 64-true
    train mlpcpu64 --accelerator cpu --precision 64-true
    cmp_with mlpgpu64 mlpcpu64 $TOL64 both
    train cnngpu64 "${CNN[@]}" --accelerator "$GPU" --precision 64-true
    train cnncpu64 "${CNN[@]}" --accelerator cpu --precision 64-true
    cmp_with cnngpu64 cnncpu64 $TOL64 both
fi

echo "gpu_single: sanity: the comparison tells another run (seed 2 on the gpu) from the cpu's seed 1"
train seed2gpu --accelerator "$GPU" --seed 2
ckpt_differ "$(ckpt_of seed2gpu)" "$(ckpt_of mlpcpu)" $TOL norm "seed 2 (gpu) is told from seed 1 (cpu)"
it_finish
