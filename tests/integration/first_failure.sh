#!/bin/bash
# The first failure, reported once, everywhere: rank 0 of a 2-rank ddp job
# runs out of disk writing its epoch-1 checkpoint (a 600 KiB tmpfs, as root).
# Rank 0 posts its reason in the store before it aborts the group, so rank 1,
# whose next collective fails, has "rank 0 failed: <the disk-full error>"
# to say rather than a closed connection or a false "ranks disagree". The
# workers hand their errors to ltrun (their status slots), and ltrun says
# the first cause once: one line, naming rank 0, its words, and how it
# ended.
# Then ddp_spawn, whose launching process forks the ranks and says why the
# job failed: it must name rank 0 with its own error, not rank 1 (often the
# first to exit) quoting it.
source "$(dirname "$0")/common.sh"
it_init first_failure "$@"
TINY="$IT_TMP/tiny"
mkdir -p "$TINY"
if [ "$(id -u)" != 0 ] || ! mount -t tmpfs -o size=600k tmpfs "$TINY" 2>/dev/null; then
    it_skip "needs root to mount a small tmpfs (a full disk)"
fi
trap 'umount "$TINY" 2>/dev/null; it_cleanup' EXIT
run_ltrun full "${BASE[@]}" --strategy ddp --devices 2 --set model.hidden=256 \
    --set trainer.limit_train_batches=20 --max-epochs 3 --set checkpoint.dirpath="$TINY/ck" \
    --default-root-dir "$IT_TMP/run"
show_tail "$IT_TMP/full.err" 4
check "ltrun exits 1 ($RC)" [ "$RC" -eq 1 ]
check "an error line gives rank 0's reason (no space left)" grep -q "error:.*No space left on device" "$IT_TMP/full.err"
check "every error line is rank 0's own or names it as the cause" \
    bash -c "! grep 'error:' '$IT_TMP/full.err' | grep -v 'rank 0 failed: \|No space left' | grep -q ."
check "no false mismatch report" bash -c "! grep -q 'disagree' '$IT_TMP/full.err'"
check "no bare closed connection as the reason" bash -c "! grep 'error:' '$IT_TMP/full.err' | grep -q 'closed its connection'"
check "ltrun's last line is the first failure, rank 0's, with how it ended" \
    bash -c "tail -n 1 '$IT_TMP/full.err' | grep -q '^ltrun: error: rank 0 (host .*No space left on device.*\[\(exited with status 1\|failed (status 1)\) at step'"
check "the disk-full error is said once" [ "$(grep -c 'No space left on device' "$IT_TMP/full.err")" -eq 1 ]

rm -rf "${TINY:?}"/*
run_ltrun spawn "${BASE[@]}" --strategy ddp_spawn --devices 2 --set model.hidden=256 \
    --set trainer.limit_train_batches=20 --max-epochs 3 --set checkpoint.dirpath="$TINY/ck" \
    --default-root-dir "$IT_TMP/spawn"
check "ddp_spawn: ltrun exits 1 ($RC)" [ "$RC" -eq 1 ]
check "ddp_spawn: one error line" [ "$(grep -c 'error:' "$IT_TMP/spawn.err")" -eq 1 ]
check "ddp_spawn: it names rank 0, with its own disk-full error" grep -q "^ltrun: error: \
ddp_spawn: rank 0 (pid [0-9]*) failed: saving checkpoint: .*No space left" \
    "$IT_TMP/spawn.err"
check "ddp_spawn: not a peer's quote of it" \
    bash -c "! grep -q 'rank 0 failed: ' '$IT_TMP/spawn.err'"
it_finish
