# Sourced by the launcher integration tests. Usage in a test:
#   source "$(dirname "$0")/common.sh"; it_init NAME "$@"
# Arguments every test gets (tests/integration/CMakeLists.txt passes them):
#   $1 ltrun   $2 plugin dir   $3 source dir
#   $4 where ckpt_compare and tcp_port are   $5 the test plugins (mismatch_probe)
set -u

it_init() {
    IT_NAME=$1
    LTRUN=$2
    PLUGINS=$3
    SRC=$4
    ITBIN=$5
    CKPT_COMPARE=$ITBIN/ckpt_compare
    TCP_PORT=$ITBIN/tcp_port
    IT_PLUGINS=$6
    DATA=/usr/share/datasets/fashion-mnist
    IT_TMP=$(mktemp -d "${TMPDIR:-/tmp}/lt-$IT_NAME.XXXXXX")
    IT_FAILS=0
    IT_PIDS=()
    trap it_cleanup EXIT
    it_private_cache
    for f in "$LTRUN" "$PLUGINS/liblt-strategy-ddp.so" "$PLUGINS/liblt-backend-gloo.so"; do
        [ -e "$f" ] || { echo "$IT_NAME: FAIL: $f is missing (build it first)"; exit 1; }
    done
    if [ ! -e "$DATA/train-images-idx3-ubyte.gz" ]; then
        it_skip "no Fashion-MNIST in $DATA (install dataset-fashion-mnist)"
    fi
    # Small, quick runs: a 64-wide MLP, a few validation batches, no test stage.
    BASE=(--plugin-dir "$PLUGINS" --config "$SRC/examples/fashion_mnist/train.ini"
          --set model.hidden=64 --set trainer.limit_val_batches=5
          --set trainer.num_sanity_val_steps=0 --no-test
          --set trainer.enable_progress_bar=false --set launcher.rdzv_timeout_s=60
          --set strategy.timeout_s=60)
}

# data.cache_dir's default ("auto": $XDG_CACHE_HOME/lt) inside $IT_TMP, so
# a test's runs share decoded images but never write the user's own cache
# (every source a test makes in its temporary folders would leave an entry
# there for good); a test that sets data.cache_dir itself is not affected.
it_private_cache() {
    export XDG_CACHE_HOME=$IT_TMP/xdg-cache
}

it_cleanup() {
    local p
    for p in "${IT_PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
    if [ -n "${NS0:-}" ]; then ip netns del "$NS0" 2>/dev/null; ip netns del "$NS1" 2>/dev/null; fi
    if [ -n "${IT_KEEP:-}" ]; then echo "kept $IT_TMP"; else rm -rf "$IT_TMP"; fi
}

check() { # check "what" command...
    local what=$1; shift
    if "$@"; then echo "  ok: $what"; else echo "  FAILED: $what"; IT_FAILS=$((IT_FAILS + 1)); fi
}

contains() { grep -q -- "$2" "$1"; }

# A run's stdout/stderr go to files in $IT_TMP; shows the tail when it fails.
run_ltrun() { # run_ltrun LABEL args...  -> sets RC
    local label=$1; shift
    "$LTRUN" "$@" >"$IT_TMP/$label.out" 2>"$IT_TMP/$label.err"
    RC=$?
    if [ $RC -ne 0 ]; then
        echo "  ($label exited $RC; last lines of its output:)"
        tail -n 8 "$IT_TMP/$label.out" "$IT_TMP/$label.err" | sed 's/^/    /'
    fi
    return 0
}

show_tail() { tail -n "${2:-6}" "$1" | sed 's/^/    /'; }

now_ms() { date +%s%3N; }

# Waits up to MAX_MS for PID (a child of this shell) to exit; sets RC (its
# exit status, or -1 when it still runs) and MS (how long this waited).
wait_exit() { # wait_exit PID MAX_MS -> RC, MS
    local t0=$(now_ms)
    RC=-1
    while [ $(( $(now_ms) - t0 )) -lt "$2" ]; do
        if ! alive "$1"; then wait "$1"; RC=$?; break; fi
        sleep 0.05
    done
    MS=$(( $(now_ms) - t0 ))
}

# ckpt_compare on the parameters of two checkpoints (B is the reference;
# METRIC: max, norm or both): shows its summary line and verdict, then checks
# "LABEL (... <= TOL)". ckpt_differ checks the opposite: over TOL (exit 1;
# files that cannot be compared, exit 2, prove nothing).
ckpt_equal() { _ckpt_cmp 0 "$@"; }  # ckpt_equal A_PATH B_PATH TOL METRIC LABEL
ckpt_differ() { _ckpt_cmp 1 "$@"; } # ckpt_differ A_PATH B_PATH TOL METRIC LABEL
_ckpt_cmp() {
    local want=$1 a=$2 b=$3 tol=$4 metric=$5 label=$6 what rc
    local out="$IT_TMP/cmp-$(printf '%s' "$label-$metric" | tr -c 'A-Za-z0-9._-' _).txt"
    "$CKPT_COMPARE" "$a" "$b" "$tol" --metric "$metric" >"$out" 2>&1
    rc=$?
    sed -n '/^max relative/p;$p' "$out" | sed 's/^/    /'
    what="$metric relative difference"; [ "$metric" = both ] && what="max and norm relative differences"
    if [ "$want" -eq 0 ]; then
        check "$label ($what <= $tol)" [ $rc -eq 0 ]
    else
        check "$label ($what > $tol; ckpt_compare exit $rc)" [ $rc -eq 1 ]
    fi
}

# Every process whose parent is $1 (the workers of an ltrun).
children_of() { pgrep -P "$1" 2>/dev/null | tr '\n' ' '; }

alive() { kill -0 "$1" 2>/dev/null && ! grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null; }

none_alive() { local p; for p in "$@"; do alive "$p" && return 1; done; return 0; }

# The worker of ltrun $1 whose RANK is $2.
worker_with_rank() {
    local p
    for p in $(children_of "$1"); do
        if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "RANK=$2"; then echo "$p"; return 0; fi
    done
    return 1
}

# A test that cannot run here says so and exits 77, which ctest reports as
# skipped (SKIP_RETURN_CODE), never as passed. Checks that already failed win.
it_skip() {
    echo "$IT_NAME: skipped: $1"
    if [ "${IT_FAILS:-0}" -ne 0 ]; then it_finish; fi
    exit 77
}

it_finish() {
    if [ "$IT_FAILS" -eq 0 ]; then echo "$IT_NAME: PASS"; exit 0; fi
    echo "$IT_NAME: FAIL ($IT_FAILS check(s) failed)"
    exit 1
}

# Two nodes on this machine: network namespaces NS0 and NS1 joined by a veth
# pair (V0 in NS0, V1 in NS1) with addresses SUBNET.1 and SUBNET.2/24, removed
# by it_cleanup; RATE (200mbit, 1gbit; default none) limits both ends' egress
# with a tbf qdisc, a slow network without added delay (scripts/slow_link.sh,
# which makes the pair). Sets NS0 NS1 V0 V1, IN0 and IN1 (the command prefixes
# that run in each) and ADDR (SUBNET.1, node 0's). Returns 1, leaving nothing
# behind, when they cannot be made (not root, ip netns refused, no tc or tbf),
# with the reason in NETNS_WHY.
netns_pair() { # netns_pair SUBNET [RATE]
    NETNS_WHY=
    # shellcheck source=../../scripts/slow_link.sh
    source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/slow_link.sh" || {
        NETNS_WHY="cannot read scripts/slow_link.sh"; return 1; }
    if slow_link_up "$1" "${2:-none}"; then
        NS0=$SL_NS0 NS1=$SL_NS1 V0=$SL_V0 V1=$SL_V1
        IN0=(ip netns exec $NS0) IN1=(ip netns exec $NS1) ADDR=$SL_ADDR0
        return 0
    fi
    NETNS_WHY=$SLOW_LINK_ERR
    NS0= NS1=
    return 1
}

# Equivalence tests (ddp_equivalence, dp_equivalence): runs that share BASE
# and the test's SAME arguments, and comparisons of their last checkpoints
# within the test's TOL (norm) and TOL_MAX (elementwise).
ckpt_of() { echo "$IT_TMP/$1/checkpoints/last.safetensors"; } # ckpt_of LABEL: that run's checkpoint

train() { # train LABEL args... -> checkpoint $(ckpt_of LABEL)
    local label=$1; shift
    run_ltrun "$label" "${BASE[@]}" "${SAME[@]}" --default-root-dir "$IT_TMP/$label" "$@"
    check "$label: ltrun exits 0" [ "$RC" -eq 0 ]
    check "$label: wrote checkpoints/last.safetensors" [ -s "$(ckpt_of $label)" ]
}

compare() { # compare A B: float32 parameters within $TOL (norm) and $TOL_MAX (elementwise)
    cmp_with "$1" "$2" $TOL norm
    cmp_with "$1" "$2" $TOL_MAX max
}

cmp_with() { ckpt_equal "$(ckpt_of $1)" "$(ckpt_of $2)" $3 $4 "$1 equals $2"; } # cmp_with A B TOL METRIC

# Two-node tests (ddp2_nodes, bagua_nodes): two ltruns as node 0 and node 1,
# in the namespaces netns_pair made (IN0/IN1) or on loopback, each with BASE,
# SAME, the test's NODES (--num-nodes, --master-*, devices ...) and "$@";
# node 0's root dir is $IT_TMP/LABEL (so $(ckpt_of LABEL) is its checkpoint).
launch_nodes() { # launch_nodes LABEL args...: both in the background -> N0 N1
    local label=$1; shift
    "${IN0[@]}" "$LTRUN" "${BASE[@]}" "${SAME[@]}" "${NODES[@]}" --node-rank 0 "$@" \
        --default-root-dir "$IT_TMP/$label" >"$IT_TMP/$label-n0.out" 2>"$IT_TMP/$label-n0.err" &
    N0=$!
    "${IN1[@]}" "$LTRUN" "${BASE[@]}" "${SAME[@]}" "${NODES[@]}" --node-rank 1 "$@" \
        --default-root-dir "$IT_TMP/$label-n1" >"$IT_TMP/$label-n1.out" 2>"$IT_TMP/$label-n1.err" &
    N1=$!
    IT_PIDS+=($N0 $N1)
}

wait_nodes() { # wait_nodes LABEL: waits for both; checks they exited 0 (their stderr tails when not)
    local label=$1 rc0=0 rc1=0
    wait $N0 || rc0=$?
    wait $N1 || rc1=$?
    [ $rc0 -ne 0 ] && show_tail "$IT_TMP/$label-n0.err"
    [ $rc1 -ne 0 ] && show_tail "$IT_TMP/$label-n1.err"
    check "$label: both nodes exit 0 ($rc0, $rc1)" [ $rc0 -eq 0 -a $rc1 -eq 0 ]
}
