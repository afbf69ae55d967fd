#!/bin/bash
# (b) dp on the gpu: one process, the batch split over trainer.devices
# replicas, each on its own GPU, equals single_device on the same GPU with
# the whole batch (20 steps, seed 1, batch 64 and an uneven 7):
#   1. dp over 1 GPU (one replica: the dp code path with the device's
#      buffers) vs single_device on the gpu
#   2. with 2 GPUs or more: dp over 2 GPUs vs single_device (skipped, and
#      said so, on a one-GPU machine)
# Tolerances as tests/integration/dp_equivalence.sh: the replicas' gradients
# are added in another order, so float32 is held to 1e-5 on the norm ratio
# and 1e-4 elementwise. A lost replica, a wrong slice or a wrong weight gives
# differences far above that (the sanity case at the end).
source "$(dirname "$0")/lib.sh"
gpu_init gpu_dp "$@"
[ -e "$PLUGINS/liblt-strategy-dp.so" ] || { echo "gpu_dp: FAIL: $PLUGINS/liblt-strategy-dp.so is missing"; exit 1; }
TOL=1e-5      # norm ratio, float32
TOL_MAX=1e-4  # elementwise, float32
SAME=(--seed 1 --set data.shuffle=true --set optimizer.name=sgd --set optimizer.lr=0.05
      --set optimizer.momentum=0.9 --set model.dropout=0 --max-epochs 1 --max-steps 20
      --accelerator "$GPU")

echo "gpu_dp: case 1: dp over 1 GPU vs single_device on the gpu, batch 64 and 7, 20 steps"
for b in 64 7; do
    train single$b --strategy single_device --devices 1 --batch-size $b
    train dp1x$b --strategy dp --devices 1 --batch-size $b
    compare dp1x$b single$b
done
summary_has dp1x64 "^lt: accelerator $GPU \(1 device\), strategy dp"
check "dp1x64: effective batch 64 (one optimizer step per batch)" \
    contains "$IT_TMP/dp1x64.out" "effective batch size 64 = 64 per process x 1 (dp)"

echo "gpu_dp: case 2: dp over 2 GPUs vs single_device, batch 64 and 7, 20 steps"
if [ "$NGPU" -ge 2 ]; then
    for b in 64 7; do
        train dp2x$b --strategy dp --devices 2 --batch-size $b
        compare dp2x$b single$b
    done
    summary_has dp2x64 "^lt: accelerator $GPU \(2 devices\), strategy dp"
else
    echo "  not run: dp over 2 GPUs needs 2 GPUs; nvidia-smi lists $NGPU"
fi

echo "gpu_dp: sanity: the comparison tells seed 2 from seed 1"
train other --strategy dp --devices 1 --batch-size 64 --seed 2
ckpt_differ "$(ckpt_of other)" "$(ckpt_of single64)" $TOL norm "seed 2 (dp) is told from seed 1 (single_device)"
it_finish
