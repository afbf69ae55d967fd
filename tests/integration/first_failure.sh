#!/bin/bash
# The first failure, reported once, everywhere: rank 0 of a 2-rank ddp job
# runs out of disk writing its epoch-1 checkpoint (a 600 KiB tmpfs, as root).
# Rank 0 posts its reason in the store before it aborts the group, so rank 1,
# whose next collective fails, has "rank 0 failed: <the disk-full error>"
# to say rather than a closed connection or a false "ranks disagree". The
# workers hand their errors to ltrun (their status slots), and ltrun says
# the first cause once: one line, naming rank 0, its words, and how it
# ended.
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
    bash -c "tail -n 1 '$IT_TMP/full.err' | grep -q '^ltrun: error: rank 0 (host .*No space left on device.*\[\(exited with status 1\|failed\) at step'"
check "the disk-full error is said once" [ "$(grep -c 'No space left on device' "$IT_TMP/full.err")" -eq 1 ]
it_finish
