#!/bin/bash
# Elastic nodes (ltrun --nnodes MIN:MAX, core/ltrun/elastic.c): two ltruns
# as two nodes in two network namespaces joined by a veth pair when root
# (loopback otherwise), node A hosting the rendezvous (--rdzv-endpoint is
# its address), 1 worker each, ddp, a 64-wide MLP for EPOCHS epochs.
#   ref. the same job, both nodes up throughout: its test accuracy (10,000
#      test images) is the reference.
#   a. shrink and grow: kill -9 node B's ltrun (its worker dies with it)
#      after epoch 1's checkpoint. A's worker fails, A re-forms the job alone
#      once B's heartbeat is keepalive_timeout_s old (round 1, 1 node,
#      resuming from last.safetensors), then B is started again: A's worker
#      stops at a step boundary and saves, and the job goes on with 2 nodes
#      (round 2) to the end. Checks: both exit 0, each change of members is
#      one "elastic round" line on A (started; left; joined), round 1
#      resumed from the checkpoint, the 1-rank resume says the effective
#      batch went 128 -> 64 and the 2-rank one 64 -> 128 with the epoch's
#      batch converted, and the final test accuracy is within 1 pp of ref.
#   b. shrink only: kill B, nobody comes back: A finishes alone (exit 0,
#      round 1 with 1 node is its last line of membership).
#   c. --max-restarts 0: kill B: A gives up at once, exit 1, saying the job
#      has used its launcher.max_restarts.
#   d. bad input, refused before anything starts (exit 2, one line naming
#      the key): --nnodes 3:1 and 1:600, --nnodes 1:2 with --node-rank, a bad
#      endpoint, a node whose --rdzv-id differs from the job's, a node with
#      another worker count, a strategy that starts no workers; an
#      endpoint without a port uses 29400; one node of 1:2 starts alone
#      after last_call_s; fewer than MIN within join_timeout_s gives up.
# No worker is left behind in any case.
source "$(dirname "$0")/common.sh"
it_init elastic_nodes "$@"
if netns_pair 10.236.0; then
    echo "elastic_nodes: node A in netns $NS0 (10.236.0.1), node B in netns $NS1 (10.236.0.2)"
else
    echo "elastic_nodes: no network namespaces (not root, or ip netns is refused): both nodes on loopback"
    IN0=() IN1=() ADDR=127.0.0.1
fi
EPOCHS=12
# One shared root dir: rank 0 may be on either node, and a re-formed job
# resumes from the one last.safetensors (a shared file system, as on a cluster).
COMMON=(--strategy ddp --devices 1 --seed 3 --max-epochs $EPOCHS --batch-size 64
        --set data.shuffle=true --set launcher.last_call_s=2 --set launcher.keepalive_timeout_s=10
        --set trainer.log_every_n_steps=50 --max-restarts 3)
KEEP=()
for a in "${BASE[@]}"; do [ "$a" = --no-test ] || KEEP+=("$a"); done
BASE=("${KEEP[@]}") # the test stage gives the accuracy
# A fresh port and job id per case: another run of this test (the sanitizer
# suite) or anything else on a fixed port must not become a node of ours.
next_job() {
    PORT=$("$TCP_PORT" free)
    JOB="elastic$$-$PORT"
}

node() { # node NAME IN-ARRAY-NAME ROOT args...: one elastic node in the background -> its pid in NODE_PID
    local name=$1 ns=$2 root=$3; shift 3
    local -n pre=$ns
    "${pre[@]}" "$LTRUN" "${BASE[@]}" "${COMMON[@]}" --nnodes 1:2 --rdzv-endpoint "$ADDR:$PORT" \
        --rdzv-id "$JOB" --default-root-dir "$root" "$@" >"$IT_TMP/$name.out" 2>"$IT_TMP/$name.err" &
    NODE_PID=$!
    IT_PIDS+=($NODE_PID)
    # Ranks follow the order of joining: A (the store's host) joins first,
    # so rank 0 and its epoch lines are A's.
    wait_for "$IT_TMP/$name.out" "joining round" 20 && sleep 0.2
}

wait_for() { # wait_for FILE PATTERN SECONDS: 0 once FILE holds PATTERN
    local t=0
    while ! grep -q -- "$2" "$1" 2>/dev/null; do
        sleep 0.1
        t=$((t + 1))
        [ $t -ge $(($3 * 10)) ] && return 1
    done
    return 0
}

test_acc() { sed -n 's/.*test results:.*test_acc \([0-9.]*\).*/\1/p' "$1" | tail -1; }

finish_node() { # finish_node NAME PID WANT_RC
    local rc=0
    wait "$2" || rc=$?
    [ $rc -ne "$3" ] && show_tail "$IT_TMP/$1.err"
    check "$1 exits $3 (got $rc)" [ $rc -eq "$3" ]
}

rounds() { grep -c '^ltrun: elastic round' "$1"; }

echo "elastic_nodes: ref. two nodes throughout, $EPOCHS epochs"
next_job
node refA IN0 "$IT_TMP/ref"; A=$NODE_PID
node refB IN1 "$IT_TMP/ref"; B=$NODE_PID
finish_node refA $A 0
finish_node refB $B 0
check "ref: one round, 2 nodes" contains "$IT_TMP/refA.out" "elastic round 0: 2 nodes (1..2)"
REF=$(test_acc "$IT_TMP/refA.out")
echo "    ref test_acc $REF"

echo "elastic_nodes: a. kill node B after epoch 1, start it again once A trains alone"
next_job
node a_A IN0 "$IT_TMP/a"; A=$NODE_PID
node a_B IN1 "$IT_TMP/a"; B=$NODE_PID
if wait_for "$IT_TMP/a_A.out" "epoch 1 done" 60; then
    WB=$(children_of $B)
    kill -9 $B
    T0=$(now_ms)
    if wait_for "$IT_TMP/a_A.out" "elastic round 1: 1 node" 60; then
        echo "    A re-formed alone $(( $(now_ms) - T0 )) ms after the kill (keepalive 10 s + last call 2 s)"
        # B comes back once A's lone worker trains (resumed), so the join is
        # a stop at a step boundary, not a worker stopped in its setup.
        wait_for "$IT_TMP/a_A.out" "lt: resumed from" 60
        node a_B2 IN1 "$IT_TMP/a"; B2=$NODE_PID
        finish_node a_A $A 0
        finish_node a_B2 $B2 0
    else
        check "a: A re-forms the job alone within 60 s of the kill" false
        kill -9 $A 2>/dev/null
    fi
    check "a: B's worker died with its ltrun" none_alive $WB
else
    check "a: epoch 1 ends within 60 s" false
fi
grep '^ltrun: elastic round' "$IT_TMP/a_A.out" | sed 's/^/    /' | cut -c1-150
check "a: A logs three rounds, one line each" [ "$(rounds "$IT_TMP/a_A.out")" -eq 3 ]
check "a: round 0 started with 2 nodes" contains "$IT_TMP/a_A.out" "elastic round 0: 2 nodes (1..2) .*started"
check "a: round 1 has 1 node, B left" contains "$IT_TMP/a_A.out" "elastic round 1: 1 node (1..2) .*left: "
check "a: round 2 has 2 nodes, B joined" contains "$IT_TMP/a_A.out" "elastic round 2: 2 nodes (1..2) .*joined: "
check "a: the restarted B logs round 2 only" [ "$(rounds "$IT_TMP/a_B2.out")" -eq 1 ]
check "a: round 1 resumed from last.safetensors" contains "$IT_TMP/a_A.err" "round 1 resumes from .*/a/checkpoints/last.safetensors"
check "a: A's worker was asked to stop at a step boundary" contains "$IT_TMP/a_A.err" "a node is waiting to join"
check "a: it stopped and saved" contains "$IT_TMP/a_A.out" "lt: stopped at step [0-9]* for a change of nodes: saved"
check "a: 1-rank resume: effective batch 128 -> 64" contains "$IT_TMP/a_A.out" "saved on 2 ranks, this run has 1: effective batch 128 -> 64"
check "a: 2-rank resume: effective batch 64 -> 128, the epoch's batch converted" \
    contains "$IT_TMP/a_A.out" "saved on 1 rank, this run has 2: effective batch 64 -> 128 .*the epoch resumes at batch"
ACC=$(test_acc "$IT_TMP/a_A.out")
echo "    test_acc $ACC (ref $REF)"
check "a: final test accuracy within 1 pp of ref ($ACC vs $REF)" \
    awk -v a="${ACC:-0}" -v b="${REF:-1}" 'BEGIN { d = a - b; exit !(d <= 0.01 && d >= -0.01 && a > 0.5) }'

echo "elastic_nodes: b. kill node B after epoch 1; A finishes alone"
next_job
node b_A IN0 "$IT_TMP/b"; A=$NODE_PID
node b_B IN1 "$IT_TMP/b"; B=$NODE_PID
if wait_for "$IT_TMP/b_A.out" "epoch 1 done" 60; then
    WB=$(children_of $B)
    kill -9 $B
    finish_node b_A $A 0
    check "b: B's worker died with its ltrun" none_alive $WB
else
    check "b: epoch 1 ends within 60 s" false
fi
check "b: A logs two rounds" [ "$(rounds "$IT_TMP/b_A.out")" -eq 2 ]
check "b: round 1 has 1 node" contains "$IT_TMP/b_A.out" "elastic round 1: 1 node (1..2)"
check "b: A trained to the last epoch" contains "$IT_TMP/b_A.out" "epoch $((EPOCHS - 1)) done"

echo "elastic_nodes: c. --max-restarts 0: kill node B; A gives up"
next_job
node c_A IN0 "$IT_TMP/c" --max-restarts 0; A=$NODE_PID
node c_B IN1 "$IT_TMP/c" --max-restarts 0; B=$NODE_PID
if wait_for "$IT_TMP/c_A.out" "epoch 0 done" 60; then
    kill -9 $B
    WA=$(children_of $A)
    wait_exit $A 20000
    check "c: A exits 1 within 20 s (got $RC after $MS ms)" [ "$RC" -eq 1 ]
    check "c: A says why it gives up" contains "$IT_TMP/c_A.err" "not re-forming the job .*launcher.max_restarts"
    check "c: A's worker is gone" none_alive $WA
else
    check "c: epoch 0 ends within 60 s" false
fi

echo "elastic_nodes: d. bad input"
refused() { # refused LABEL PATTERN args...: exit 2 and PATTERN on stderr
    local label=$1 pat=$2; shift 2
    run_ltrun "$label" "${BASE[@]}" --strategy ddp --devices 1 --max-epochs 1 --default-root-dir "$IT_TMP/$label" "$@"
    check "$label: exit 2 (got $RC)" [ "$RC" -eq 2 ]
    check "$label: says '$pat'" contains "$IT_TMP/$label.err" "$pat"
    head -n 1 "$IT_TMP/$label.err" | sed 's/^/    /' | cut -c1-200
}
refused d_range "launcher.nnodes = '3:1' (--nnodes): expected MIN:MAX" --nnodes 3:1 --rdzv-endpoint 127.0.0.1:29799
refused d_rank "launcher.node_rank is set (--node-rank).*drop --node-rank" --nnodes 1:2 --node-rank 1 \
    --rdzv-endpoint 127.0.0.1:29799
refused d_endpoint "launcher.rdzv_endpoint = '127.0.0.1:x'" --nnodes 1:2 --rdzv-endpoint 127.0.0.1:x
refused d_max "launcher.nnodes = '1:600' (--nnodes): expected MIN:MAX with 1 <= MIN <= MAX <= 512" --nnodes 1:600 \
    --rdzv-endpoint 127.0.0.1:29799
refused d_single "strategy 'single_device' starts none" --strategy single_device --nnodes 1:2 \
    --rdzv-endpoint 127.0.0.1:29799
# MIN nodes start the job once last_call_s passed without more.
P=$("$TCP_PORT" free)
run_ltrun d_alone "${BASE[@]}" --strategy ddp --devices 1 --max-steps 3 --no-test --nnodes 1:2 \
    --rdzv-endpoint 127.0.0.1:$P --rdzv-id "alone$$" --set launcher.last_call_s=1 --default-root-dir "$IT_TMP/d_alone"
check "d_alone: MIN = 1 node trains alone (got $RC)" [ "$RC" -eq 0 ]
check "d_alone: round 0 had 1 node of 1..2" contains "$IT_TMP/d_alone.out" "elastic round 0: 1 node (1..2)"
# Fewer than MIN within join_timeout_s: the node gives up, saying so.
P=$("$TCP_PORT" free)
run_ltrun d_timeout "${BASE[@]}" --strategy ddp --devices 1 --max-steps 3 --nnodes 2:2 \
    --rdzv-endpoint 127.0.0.1:$P --rdzv-id "late$$" --set launcher.join_timeout_s=2 --default-root-dir "$IT_TMP/d_timeout"
check "d_timeout: exit 1 (got $RC)" [ "$RC" -eq 1 ]
check "d_timeout: names launcher.join_timeout_s" contains "$IT_TMP/d_timeout.err" "waited 2 s (launcher.join_timeout_s)"
# No port in the endpoint: torchrun's default, 29400 (when free here).
if ! (exec 3<>/dev/tcp/127.0.0.1/29400) 2>/dev/null; then
    run_ltrun d_noport "${BASE[@]}" --strategy ddp --devices 1 --max-steps 3 --no-test --nnodes 1:1 \
        --rdzv-endpoint 127.0.0.1 --rdzv-id "noport$$" --set launcher.last_call_s=0 --default-root-dir "$IT_TMP/d_noport"
    check "d_noport: an endpoint without a port trains (got $RC)" [ "$RC" -eq 0 ]
    check "d_noport: on port 29400" contains "$IT_TMP/d_noport.out" "rendezvous at 127.0.0.1:29400"
fi
P=$("$TCP_PORT" free)
"$LTRUN" "${BASE[@]}" "${COMMON[@]}" --nnodes 2:2 --rdzv-endpoint 127.0.0.1:$P --rdzv-id one \
    --set launcher.join_timeout_s=30 --default-root-dir "$IT_TMP/d_one" >"$IT_TMP/d_one.out" 2>"$IT_TMP/d_one.err" &
ONE=$!
IT_PIDS+=($ONE)
wait_for "$IT_TMP/d_one.out" "joining round 0" 20
refused d_id "belongs to elastic job 'one', this node was started for 'two'" --nnodes 2:2 \
    --rdzv-endpoint 127.0.0.1:$P --rdzv-id two
# The job's worker count is the first node's: another is refused before it joins.
run_ltrun d_nproc "${BASE[@]}" --strategy ddp --devices 2 --max-epochs 1 --nnodes 2:2 --rdzv-endpoint 127.0.0.1:$P \
    --rdzv-id one --default-root-dir "$IT_TMP/d_nproc"
check "d_nproc: exit 2 (got $RC)" [ "$RC" -eq 2 ]
check "d_nproc: says the job runs 1 worker per node" contains "$IT_TMP/d_nproc.err" "runs 1 worker per node, this node 2"
kill $ONE
wait_exit $ONE 5000
check "d: the waiting node ends on SIGTERM (got $RC)" [ "$RC" -eq 143 ]
it_finish
