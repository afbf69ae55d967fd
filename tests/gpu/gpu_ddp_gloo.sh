#!/bin/bash
# (c) ddp with 2 ranks on ONE GPU through gloo: gloo moves host memory only,
# so the core stages each bucket of GPU gradients through pinned host memory
# and back. Two ltruns as two "nodes" on loopback (--num-nodes 2 --devices 1
# --node-rank 0/1), each one rank on GPU 0, --set
# strategy.process_group_backend=gloo, batch 32 per rank, must train what one
# process on the same GPU trains at batch 64 (20 steps, seed 1, shuffled
# data; the distributed sampler gives each rank half of each batch of 64).
# Tolerance as tests/integration/ddp_equivalence.sh: the two halves'
# gradients are added in another order, float32 held to 1e-5 on the norm
# ratio and 1e-4 elementwise; a missed copy back from the staging buffer, a
# sum for an average or a stale bucket is far outside (ddp_equivalence.sh
# shows a gradient off by 2x lands at ~0.2-0.4). The CNN too, and float64
# (1e-10) where the gpu accelerator has float64 kernels.
source "$(dirname "$0")/lib.sh"
gpu_init gpu_ddp_gloo "$@"
TOL=1e-5      # norm ratio, float32
TOL_MAX=1e-4  # elementwise, float32, the MLP
TOL_MAX_CNN=1e-3  # elementwise, float32, the CNN (see cnn_compare)
TOL64=1e-10   # both, float64
SAME=(--seed 1 --set data.shuffle=true --set optimizer.name=sgd --set optimizer.lr=0.05
      --set optimizer.momentum=0.9 --set model.dropout=0 --max-epochs 1 --max-steps 20
      --accelerator "$GPU")
CNN=(--set model.name=fashion_mnist_cnn --set model.channels=8 --set model.hidden=32)

two_ranks() { # two_ranks LABEL args...: 2 ranks x batch 32 on GPU 0 over gloo, both must exit 0
    local label=$1; shift
    start_loopback_nodes "$label" --batch-size 32 --set strategy.process_group_backend=gloo "$@"
    local rc0=0 rc1=0
    wait $N0 || rc0=$?
    wait $N1 || rc1=$?
    [ $rc0 -ne 0 ] && { echo "  $label node 0 exited $rc0:"; show_tail "$IT_TMP/$label-n0.err" 6; }
    [ $rc1 -ne 0 ] && { echo "  $label node 1 exited $rc1:"; show_tail "$IT_TMP/$label-n1.err" 6; }
    check "$label: both ranks exit 0 ($rc0, $rc1)" [ $rc0 -eq 0 -a $rc1 -eq 0 ]
    check "$label: rank 0 wrote checkpoints/last.safetensors" [ -s "$(ckpt_of "$label")" ]
}

echo "gpu_ddp_gloo: case 1: MLP, 2 ranks x batch 32 on one GPU (gloo, staged) vs 1 process batch 64, 20 steps"
two_ranks ddp2x32
summary_has ddp2x32 "^lt: accelerator $GPU \(1 device\), strategy ddp, .*backend gloo"
check "ddp2x32: node 0 ran rank 0 of 2" contains "$IT_TMP/ddp2x32-n0.out" "ranks 0-0 of 2"
check "ddp2x32: node 1 ran rank 1 of 2" contains "$IT_TMP/ddp2x32-n1.out" "ranks 1-1 of 2"
train single64 --strategy single_device --devices 1 --batch-size 64
compare ddp2x32 single64

echo "gpu_ddp_gloo: case 2: the CNN, the same comparison, 20 steps"
two_ranks cnnddp2x32 "${CNN[@]}"
train cnnsingle64 "${CNN[@]}" --strategy single_device --devices 1 --batch-size 64
cnn_compare cnnddp2x32 cnnsingle64

echo "gpu_ddp_gloo: case 3: MLP in float64 (64-true), both measures within $TOL64"
if f64_on_gpu; then
    two_ranks ddp2x32f64 --precision 64-true
    train single64f64 --strategy single_device --devices 1 --batch-size 64 --precision 64-true
    cmp_with ddp2x32f64 single64f64 $TOL64 both
fi

echo "gpu_ddp_gloo: sanity: the comparison tells lr 0.1 (as if gradients were summed, not averaged) from the run"
train single64lr --strategy single_device --devices 1 --batch-size 64 --set optimizer.lr=0.1
ckpt_differ "$(ckpt_of single64lr)" "$(ckpt_of ddp2x32)" $TOL norm "lr 0.1 is told from ddp 2 x 32"
it_finish
