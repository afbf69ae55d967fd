#!/bin/bash
# (e) ddp with 2 ranks over nccl, one GPU each (--devices 2 --strategy ddp
# --set strategy.process_group_backend=nccl), batch 32 per rank, must train
# what one process on one GPU trains at batch 64 (MLP and CNN, 20 steps,
# seed 1, shuffled data). NCCL refuses two ranks on one device, so this needs
# 2 GPUs and is skipped (exit 77, saying so) on a machine with one; the
# one-GPU machine runs 2 ranks through gloo instead (gpu_ddp_gloo.sh).
# Tolerance as tests/integration/ddp_equivalence.sh: float32 1e-5 on the
# norm ratio, 1e-4 elementwise.
source "$(dirname "$0")/lib.sh"
gpu_init gpu_nccl2 "$@"
need_gpus 2 "NCCL allows one rank per GPU"
if [ "$NCCL" = nccl ] && [ ! -e "$PLUGINS/liblt-backend-nccl.so" ]; then
    echo "gpu_nccl2: FAIL: $PLUGINS/liblt-backend-nccl.so was not built (configure with -DLT_WITH_NCCL=ON)"
    exit 1
fi
TOL=1e-5      # norm ratio, float32
TOL_MAX=1e-4  # elementwise, float32, the MLP
TOL_MAX_CNN=1e-3  # elementwise, float32, the CNN (see cnn_compare)
SAME=(--seed 1 --set data.shuffle=true --set optimizer.name=sgd --set optimizer.lr=0.05
      --set optimizer.momentum=0.9 --set model.dropout=0 --max-epochs 1 --max-steps 20
      --accelerator "$GPU")
NCCL2=(--strategy ddp --devices 2 --batch-size 32 --set strategy.process_group_backend="$NCCL")
CNN=(--set model.name=fashion_mnist_cnn --set model.channels=8 --set model.hidden=32)

echo "gpu_nccl2: case 1: MLP, 2 ranks x batch 32 on 2 GPUs over nccl vs 1 GPU batch 64, 20 steps"
train nccl2 "${NCCL2[@]}"
summary_has nccl2 "^lt: accelerator $GPU \(2 devices\), strategy ddp, .*backend $NCCL"
check "nccl2: ltrun started 2 workers" contains "$IT_TMP/nccl2.out" "starting 2 workers"
train single64 --strategy single_device --devices 1 --batch-size 64
compare nccl2 single64

echo "gpu_nccl2: case 2: the CNN, the same comparison"
train cnnnccl2 "${CNN[@]}" "${NCCL2[@]}"
train cnnsingle64 "${CNN[@]}" --strategy single_device --devices 1 --batch-size 64
cnn_compare cnnnccl2 cnnsingle64

echo "gpu_nccl2: sanity: the comparison tells lr 0.1 (gradients summed instead of averaged) from the run"
train single64lr --strategy single_device --devices 1 --batch-size 64 --set optimizer.lr=0.1
ckpt_differ "$(ckpt_of single64lr)" "$(ckpt_of nccl2)" $TOL norm "lr 0.1 is told from nccl 2 x 32"
it_finish
