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
    for f in "$LTRUN" "$PLUGINS/liblt-strategy-ddp.so" "$PLUGINS/liblt-backend-gloo.so"; do
        [ -e "$f" ] || { echo "$IT_NAME: FAIL: $f is missing (build it first)"; exit 1; }
    done
    if [ ! -e "$DATA/train-images-idx3-ubyte.gz" ]; then
        echo "$IT_NAME: skipped: no Fashion-MNIST in $DATA (install dataset-fashion-mnist)"
        echo "PASS (skipped)"
        exit 0
    fi
    # Small, quick runs: a 64-wide MLP, a few validation batches, no test stage.
    BASE=(--plugin-dir "$PLUGINS" --config "$SRC/examples/fashion_mnist/train.ini"
          --set model.hidden=64 --set trainer.limit_val_batches=5
          --set trainer.num_sanity_val_steps=0 --no-test
          --set trainer.enable_progress_bar=false --set launcher.rdzv_timeout_s=60
          --set strategy.timeout_s=60)
}

it_cleanup() {
    local p
    for p in "${IT_PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
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

it_finish() {
    if [ "$IT_FAILS" -eq 0 ]; then echo "$IT_NAME: PASS"; exit 0; fi
    echo "$IT_NAME: FAIL ($IT_FAILS check(s) failed)"
    exit 1
}
