#!/bin/bash
# A cut link between two nodes ends both within seconds, each saying what it
# lost: ddp on 2 nodes in two network namespaces joined by a veth pair,
# launcher.stall_timeout_s = 3; while they train, node 1's end of the link
# goes down. Node 1 (whose rendezvous store is on node 0) names the store's
# address that stopped answering and says the link is cut; node 0 names
# rank 1 as the one that made no progress. Both end long before the 60 s
# collective timeout. Needs root for the namespaces (skipped otherwise).
source "$(dirname "$0")/common.sh"
it_init cut_link "$@"
netns_pair 10.233.0 || it_skip "needs root and network namespaces (ip netns)"
PORT=29530
NODES=(--strategy ddp --num-nodes 2 --devices 1 --master-addr 10.233.0.1 --master-port $PORT
       --set launcher.rdzv_timeout_s=30 --set launcher.stall_timeout_s=3 --set model.hidden=256
       --set trainer.limit_train_batches=3000 --max-epochs 20)
for n in 0 1; do
    IN=("${IN0[@]}"); [ $n = 1 ] && IN=("${IN1[@]}")
    "${IN[@]}" "$LTRUN" "${BASE[@]}" "${NODES[@]}" --node-rank $n --default-root-dir "$IT_TMP/n$n" \
        >"$IT_TMP/n$n.out" 2>"$IT_TMP/n$n.err" &
    eval N$n=$!
done
IT_PIDS+=($N0 $N1)
for i in $(seq 1 300); do [ -d "$IT_TMP/n0/lt_logs" ] && break; sleep 0.1; done
check "training started (node 0's lt_logs appeared)" [ -d "$IT_TMP/n0/lt_logs" ]
sleep 1
ip -n $NS1 link set $V1 down
T0=$(now_ms)
wait_exit $N1 25000; RC1=$RC
wait_exit $N0 25000; RC0=$RC
MS=$(( $(now_ms) - T0 ))
echo "  both nodes ended within $MS ms of the cut: node 0 status $RC0, node 1 status $RC1"
show_tail "$IT_TMP/n0.err" 3
show_tail "$IT_TMP/n1.err" 3
check "both ended, non-zero, long before the 60 s timeout ($MS ms)" [ "$RC0" -gt 0 -a "$RC1" -gt 0 ]
check "node 1 names the store address it lost and says the link is cut" \
    grep -q "error:.*10.233.0.1:$((PORT)).*link to that host is cut" "$IT_TMP/n1.err"
check "node 0 names rank 1 as the one cut off" grep -q "error:.*rank 1 made no progress" "$IT_TMP/n0.err"
it_finish
