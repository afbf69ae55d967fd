#!/bin/bash
# ltrun passes SIGINT and SIGTERM on to its workers and stops them within
# 5 s (exit 130 / 143), and its workers never outlive it, even when ltrun
# itself is killed with SIGKILL (they get PR_SET_PDEATHSIG). A rank killed by
# a signal (SIGSEGV, SIGKILL) is a rank lost: ltrun exits 1, not 128 + N, and
# its one line names the rank and the signal.
source "$(dirname "$0")/common.sh"
it_init ltrun_signals "$@"

start() { # start LABEL [args]: a 2-rank job that would run for minutes; sets LT and WORKERS
    local label=$1; shift
    # bash starts background jobs with SIGINT ignored, which ltrun and its
    # workers would keep; a terminal's ^C finds it at its default. setsid:
    # a process group of its own, as a terminal's foreground job has.
    setsid env --default-signal=INT "$LTRUN" "${BASE[@]}" --strategy ddp --devices 2 --set model.hidden=512 \
        --set trainer.limit_train_batches=2000 --max-epochs 20 --default-root-dir "$IT_TMP/$label" "$@" \
        >"$IT_TMP/$label.out" 2>"$IT_TMP/$label.err" &
    LT=$!
    IT_PIDS+=($LT)
    WORKERS=""
    for i in $(seq 300); do
        WORKERS=$(children_of $LT)
        [ $(echo $WORKERS | wc -w) -eq 2 ] && [ -d "$IT_TMP/$label/lt_logs" ] && break
        sleep 0.1
    done
    IT_PIDS+=($WORKERS)
    check "$label: 2 workers training ($WORKERS)" [ $(echo $WORKERS | wc -w) -eq 2 -a -d "$IT_TMP/$label/lt_logs" ]
    sleep 1
}

stop_and_wait() { # stop_and_wait SIGNAL [PID]: signals PID (default $LT), waits for ltrun -> RC, MS
    kill -$1 ${2:-$LT}
    wait_exit $LT 10000
}

for sig in INT TERM; do
    want=130; [ $sig = TERM ] && want=143
    echo "ltrun_signals: SIG$sig to ltrun"
    start $sig
    stop_and_wait $sig
    echo "  ltrun exited with $RC after $MS ms"; show_tail "$IT_TMP/$sig.err" 2
    check "SIG$sig: exit status $want ($RC)" [ "$RC" -eq $want ]
    check "SIG$sig: within 5 s ($MS ms)" [ "$MS" -le 5000 ]
    check "SIG$sig: the workers ended on SIG$sig itself, before the SIGKILL 3 s later ($MS ms)" [ "$MS" -lt 2900 ]
    check "SIG$sig: ltrun says it passed SIG$sig on" contains "$IT_TMP/$sig.err" "got SIG$sig: passed it on to the 2 running ranks"
    check "SIG$sig: no rank reported as a failure" bash -c "! grep -q '^ltrun: rank' '$IT_TMP/$sig.err'"
    check "SIG$sig: no worker left ($WORKERS)" none_alive $WORKERS
done

echo "ltrun_signals: ^C in a terminal (SIGINT to the whole process group), with --max-restarts 1"
start PGRP --max-restarts 1
check "PGRP: ltrun leads its own process group" [ "$(ps -o pgid= -p $LT | tr -d ' ')" = "$LT" ]
stop_and_wait INT -$LT
echo "  ltrun exited with $RC after $MS ms"; show_tail "$IT_TMP/PGRP.err" 2
check "PGRP: exit status 130 ($RC)" [ "$RC" -eq 130 ]
check "PGRP: within 5 s ($MS ms)" [ "$MS" -le 5000 ]
check "PGRP: ltrun says it got SIGINT" contains "$IT_TMP/PGRP.err" "got SIGINT"
check "PGRP: the ranks that died of ^C are not reported as failures" bash -c "! grep -q '^ltrun: rank' '$IT_TMP/PGRP.err'"
check "PGRP: and not restarted" bash -c "! grep -q 'restarting' '$IT_TMP/PGRP.err'"
check "PGRP: no worker left ($WORKERS)" none_alive $WORKERS

# A crash of rank 1 and a kill -9 of rank 0. No core files: a SIGSEGV
# would otherwise leave one wherever the kernel's core_pattern says.
ulimit -c 0
for case in SEGV:1 KILL:0; do
    sig=${case%:*} rank=${case#*:} label=RANK${case%:*}
    num=$(kill -l "$sig")
    echo "ltrun_signals: SIG$sig to rank $rank"
    start "$label"
    victim=$(worker_with_rank $LT "$rank")
    check "$label: found rank $rank (pid ${victim:-none})" [ -n "$victim" ]
    [ -n "$victim" ] && kill -"$sig" "$victim"
    wait_exit $LT 10000
    echo "  ltrun exited with $RC after $MS ms"; show_tail "$IT_TMP/$label.err" 2
    check "$label: exit status 1, a rank lost ($RC)" [ "$RC" -eq 1 ]
    check "$label: within 5 s ($MS ms)" [ "$MS" -le 5000 ]
    check "$label: the message names rank $rank and signal $num" \
        contains "$IT_TMP/$label.err" "^ltrun: rank $rank (host .*) was killed by signal $num "
    check "$label: the failure is one line" [ "$(grep -c '^ltrun: rank' "$IT_TMP/$label.err")" -eq 1 ]
    check "$label: no worker left ($WORKERS)" none_alive $WORKERS
done

echo "ltrun_signals: SIGKILL to ltrun: the workers must die with it"
start KILL
{ kill -9 $LT; wait $LT; } 2>/dev/null
for i in $(seq 40); do none_alive $WORKERS && break; sleep 0.05; done
check "SIGKILL: no worker outlives ltrun by 2 s ($WORKERS)" none_alive $WORKERS
it_finish
