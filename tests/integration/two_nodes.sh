#!/bin/bash
# Two ltrun instances as two nodes (--num-nodes 2 --node-rank R --devices 1)
# train what one process trains with the combined batch: 2 x 32 vs 64, 20
# steps; node 0's last checkpoint must match to 1e-5 (norm ratio; 1e-4
# elementwise, see ddp_equivalence.sh for why float32 needs both).
# As root, with network namespaces, the nodes run in two namespaces joined
# by a veth pair (10.231.0.1/24 and 10.231.0.2/24), so the rendezvous store
# and gloo really go between two hosts; otherwise both run on loopback.
#   a. seed fixed (--seed 1)
#   b. no seed: node 0 picks one and node 1 must fetch it from the store
#   c. (namespaces only) srun-style, one task per node, MASTER_ADDR unset:
#      the slurm environment takes the main address from SLURM_NODELIST and
#      gloo on node 1 must bind the address that routes to it, not loopback
source "$(dirname "$0")/common.sh"
it_init two_nodes "$@"
if netns_pair 10.231.0; then
    echo "two_nodes: node 0 in netns $NS0 (10.231.0.1), node 1 in netns $NS1 (10.231.0.2)"
    PORT=29500
    # A refused connection proves the other namespace answered.
    check "the namespaces reach each other over the veth pair" bash -c \
        "ip netns exec $NS1 timeout 3 bash -c 'exec 3<>/dev/tcp/10.231.0.1/9' 2>&1 | grep -q refused"
else
    echo "two_nodes: no network namespaces (not root, or ip netns is refused): both nodes on loopback"
    IN0=() IN1=() ADDR=127.0.0.1 PORT=$("$TCP_PORT" free)
fi
SAME=(--set data.shuffle=true --set optimizer.name=sgd --set optimizer.lr=0.05
      --set optimizer.momentum=0.9 --max-epochs 1 --max-steps 20)

two_nodes() { # two_nodes LABEL args...
    local label=$1; shift
    local NODES=(--strategy ddp --num-nodes 2 --devices 1 --master-addr $ADDR --master-port $PORT
                 --batch-size 32 --set launcher.rdzv_timeout_s=30)
    "${IN0[@]}" "$LTRUN" "${BASE[@]}" "${SAME[@]}" "${NODES[@]}" --node-rank 0 "$@" \
        --default-root-dir "$IT_TMP/$label-n0" >"$IT_TMP/$label-n0.out" 2>"$IT_TMP/$label-n0.err" &
    local n0=$!
    "${IN1[@]}" "$LTRUN" "${BASE[@]}" "${SAME[@]}" "${NODES[@]}" --node-rank 1 "$@" \
        --default-root-dir "$IT_TMP/$label-n1" >"$IT_TMP/$label-n1.out" 2>"$IT_TMP/$label-n1.err" &
    local n1=$!
    IT_PIDS+=($n0 $n1)
    wait $n0; local rc0=$?
    wait $n1; local rc1=$?
    for n in 0 1; do
        local rc=$rc0; [ $n = 1 ] && rc=$rc1
        [ $rc -ne 0 ] && { echo "  node $n exited $rc:"; show_tail "$IT_TMP/$label-n$n.err" 6; }
        check "$label: node $n exits 0" [ $rc -eq 0 ]
    done
    check "$label: node 0 ran rank 0 of 2" contains "$IT_TMP/$label-n0.out" "node 0 of 2.*ranks 0-0 of 2"
    check "$label: node 1 ran rank 1 of 2" contains "$IT_TMP/$label-n1.out" "node 1 of 2.*ranks 1-1 of 2"
    check "$label: node 0 wrote checkpoints/last.safetensors" [ -s "$IT_TMP/$label-n0/checkpoints/last.safetensors" ]
}

compare() { # compare A B: within 1e-5 in norm, 1e-4 elementwise
    local a="$IT_TMP/$1/checkpoints/last.safetensors" b="$IT_TMP/$2/checkpoints/last.safetensors"
    ckpt_equal "$a" "$b" 1e-5 norm "$1 equals $2"
    ckpt_equal "$a" "$b" 1e-4 max "$1 equals $2"
}

single() { # single LABEL SEED [args...]
    local label=$1 seed=$2; shift 2
    run_ltrun $label "${BASE[@]}" "${SAME[@]}" --strategy single_device --devices 1 --batch-size 64 \
        --seed $seed --default-root-dir "$IT_TMP/$label" "$@"
    check "$label: single process exits 0" [ "$RC" -eq 0 ]
}

echo "two_nodes: a. seed 1"
two_nodes a --seed 1
single single-1 1
compare a-n0 single-1

echo "two_nodes: b. no seed: node 0 chooses, node 1 fetches it"
# 2 steps: the seed decides the initial weights, so a wrong one shows at
# once. Over 20 steps the runs' rounding differences (OpenBLAS blocks the
# GEMMs differently with 1 and 2 threads) grow chaotically for some seeds
# (1224053735: 2.4e-3 after 20 steps, 3e-8 at 10), and this seed is random.
two_nodes b --set trainer.seed= --max-steps 2
SEED=$(sed -n 's/.*every rank uses \([0-9]*\).*/\1/p' "$IT_TMP/b-n0.out")
echo "  node 0 chose seed ${SEED:-none}"
check "b: node 0 announced the seed it chose" [ -n "$SEED" ]
check "b: node 1 did not choose one of its own" bash -c "! grep -q 'every rank uses' '$IT_TMP/b-n1.out'"
if [ -n "$SEED" ]; then
    single single-b $SEED --max-steps 2
    compare b-n0 single-b
fi
if [ ${#IN0[@]} -gt 0 ]; then
    echo "two_nodes: c. srun-style across the namespaces, no MASTER_ADDR"
    SL="SLURM_NTASKS=2 SLURM_NNODES=2 SLURM_JOB_NAME=lt SLURM_NODELIST=10.231.0.1,10.231.0.2 SLURM_LOCALID=0 MASTER_PORT=$((PORT + 7))"
    pids=()
    for n in 0 1; do
        IN=("${IN0[@]}"); [ $n = 1 ] && IN=("${IN1[@]}")
        "${IN[@]}" env -u MASTER_ADDR $SL SLURM_PROCID=$n SLURM_NODEID=$n "$LTRUN" "${BASE[@]}" "${SAME[@]}" \
            --strategy ddp --num-nodes 2 --devices 1 --batch-size 32 --seed 1 --set launcher.rdzv_timeout_s=30 \
            --default-root-dir "$IT_TMP/c" >"$IT_TMP/c-n$n.out" 2>"$IT_TMP/c-n$n.err" &
        pids+=($!)
    done
    IT_PIDS+=("${pids[@]}")
    rc0=0 rc1=0
    wait "${pids[0]}" || rc0=$?
    wait "${pids[1]}" || rc1=$?
    [ $rc0 -eq 0 ] && [ $rc1 -eq 0 ] || { show_tail "$IT_TMP/c-n0.err"; show_tail "$IT_TMP/c-n1.err"; }
    check "c: both srun-style tasks exit 0" bash -c "[ $rc0 -eq 0 ] && [ $rc1 -eq 0 ]"
    compare c single-1
fi
it_finish
