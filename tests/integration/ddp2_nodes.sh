#!/bin/bash
# ddp2: dp inside each node, ddp across nodes, one process per node. Two
# ltrun instances as two nodes (network namespaces joined by a veth pair when
# root, as two_nodes.sh does; loopback otherwise), 2 replicas each:
#   a. 2 nodes x 2 replicas at batch 32 train what one process trains at
#      batch 64, Lightning's effective batch for ddp2 (batch x num_nodes):
#      float32 to 1e-5 (norm ratio; 1e-4 elementwise, see
#      ddp_equivalence.sh), float64 to 1e-10, after 20 steps;
#   b. a run stopped mid-epoch (10 steps) and resumed from its
#      last.safetensors ends bit for bit where an uninterrupted run ends;
#   c. kill -9 node 1 while training: node 0 ends within 5 s, non-zero,
#      naming the peer it lost;
#   d. --max-restarts on one node: its worker (2 replicas) killed in epoch 2
#      restarts from last.safetensors and ends bit for bit where an
#      uninterrupted run ends.
source "$(dirname "$0")/common.sh"
it_init ddp2_nodes "$@"
if netns_pair 10.232.0; then
    echo "ddp2_nodes: node 0 in netns $NS0 (10.232.0.1), node 1 in netns $NS1 (10.232.0.2)"
    PORT=29510
else
    echo "ddp2_nodes: no network namespaces (not root, or ip netns is refused): both nodes on loopback"
    IN0=() IN1=() ADDR=127.0.0.1 PORT=$("$TCP_PORT" free)
fi
SAME=(--seed 1 --set data.shuffle=true --set optimizer.name=sgd --set optimizer.lr=0.05
      --set optimizer.momentum=0.9 --max-epochs 1)
DDP2=(--strategy ddp2 --num-nodes 2 --devices 2 --master-addr $ADDR --batch-size 32
      --set launcher.rdzv_timeout_s=30)

start_nodes() { # start_nodes LABEL args...: both nodes in the background -> N0 N1
    PORT=$((PORT + 1))
    NODES=("${DDP2[@]}" --master-port $PORT)
    launch_nodes "$@"
}

two_nodes() { # two_nodes LABEL args...: node 0's checkpoint is $(ckpt_of LABEL)
    local label=$1
    start_nodes "$@"
    wait_nodes "$label"
    check "$label: node 0 started one worker for its 2 devices" contains "$IT_TMP/$label-n0.out" "node 0 of 2.*starting 1 worker, ranks 0-0 of 2"
    check "$label: node 1 started one worker for its 2 devices" contains "$IT_TMP/$label-n1.out" "node 1 of 2.*starting 1 worker, ranks 1-1 of 2"
    check "$label: node 0 wrote last.safetensors" [ -s "$(ckpt_of $label)" ]
}

single() { # single LABEL args...
    local label=$1; shift
    run_ltrun $label "${BASE[@]}" "${SAME[@]}" --strategy single_device --devices 1 --batch-size 64 \
        --default-root-dir "$IT_TMP/$label" "$@"
    check "$label: single process exits 0" [ "$RC" -eq 0 ]
}

echo "ddp2_nodes: a. 2 nodes x 2 replicas x batch 32 vs one process at batch 64, 20 steps"
two_nodes a32 --max-steps 20
check "a32: effective batch 64 = 32 x 2 nodes printed" contains "$IT_TMP/a32-n0.out" "effective batch size 64 = 32 per process x 2 (ddp2)"
single s32 --max-steps 20
ckpt_equal "$(ckpt_of a32)" "$(ckpt_of s32)" 1e-5 norm "ddp2 float32 equals one process (norm)"
ckpt_equal "$(ckpt_of a32)" "$(ckpt_of s32)" 1e-4 max "ddp2 float32 equals one process (elementwise)"
two_nodes a64 --max-steps 20 --precision 64-true
single s64 --max-steps 20 --precision 64-true
ckpt_equal "$(ckpt_of a64)" "$(ckpt_of s64)" 1e-10 both "ddp2 float64 equals one process"
single other --max-steps 20 --precision 64-true --set optimizer.lr=0.1
ckpt_differ "$(ckpt_of a64)" "$(ckpt_of other)" 1e-10 both "the comparison tells lr 0.1 from lr 0.05"

echo "ddp2_nodes: b. stopped after 10 steps mid-epoch, resumed to 20 == 20 straight (bit for bit)"
two_nodes half --max-steps 10 --precision 64-true
cp "$(ckpt_of half)" "$IT_TMP/half10.safetensors"
two_nodes resumed --max-steps 20 --precision 64-true --ckpt-path "$IT_TMP/half10.safetensors"
ckpt_equal "$(ckpt_of resumed)" "$(ckpt_of a64)" 0 max "resumed ddp2 equals the uninterrupted run"

echo "ddp2_nodes: c. kill -9 node 1 while it trains"
start_nodes kill --set model.hidden=512 --set trainer.limit_train_batches=2000 --max-epochs 20
for i in $(seq 1 300); do
    [ -d "$IT_TMP/kill/lt_logs" ] && break
    sleep 0.1
done
check "kill: training started (node 0's lt_logs appeared)" [ -d "$IT_TMP/kill/lt_logs" ]
sleep 1
W1=$(children_of $N1)
kill -9 $W1 $N1 2>/dev/null
wait_exit $N0 5000
echo "  node 0 ended $MS ms after the kill, status $RC"
show_tail "$IT_TMP/kill-n0.err" 4
check "kill: node 0 ended within 5 s ($MS ms)" [ "$RC" -ne -1 -a "$MS" -le 5000 ]
check "kill: node 0's exit status is non-zero ($RC)" [ "$RC" -gt 0 ]
check "kill: node 0 names rank 1, the peer it lost" contains "$IT_TMP/kill-n0.err" "rank 1"

echo "ddp2_nodes: d. --max-restarts 1: the node's worker killed in epoch 2, restarted from its checkpoint"
ONE=(--strategy ddp2 --num-nodes 1 --devices 2 --seed 1 --batch-size 32 --set trainer.limit_train_batches=150
     --max-epochs 2 --precision 64-true)
run_ltrun ref "${BASE[@]}" "${ONE[@]}" --default-root-dir "$IT_TMP/ref"
check "d: the uninterrupted run exits 0" [ "$RC" -eq 0 ]
"$LTRUN" "${BASE[@]}" "${ONE[@]}" --max-restarts 1 --default-root-dir "$IT_TMP/restart" \
    >"$IT_TMP/restart.out" 2>"$IT_TMP/restart.err" &
LT=$!
IT_PIDS+=($LT)
CK="$IT_TMP/restart/checkpoints/last.safetensors"
for i in $(seq 1200); do [ -e "$CK" ] && break; alive $LT || break; sleep 0.025; done
W=$(worker_with_rank $LT 0)
check "d: epoch 1's checkpoint appeared while the worker (${W:-none}) runs" [ -e "$CK" -a -n "$W" ]
[ -n "$W" ] && kill -9 $W
IT_PIDS+=($(children_of $LT))
wait $LT
RC=$?
show_tail "$IT_TMP/restart.err" 3
check "d: ltrun exits 0 after the restart" [ "$RC" -eq 0 ]
check "d: it restarted from the last checkpoint" contains "$IT_TMP/restart.err" "restart 1 of 1, LT_RESTART_COUNT=1), resuming from .*last.safetensors"
ckpt_equal "$CK" "$IT_TMP/ref/checkpoints/last.safetensors" 0 both "d: the restarted run equals the uninterrupted one exactly"
it_finish
