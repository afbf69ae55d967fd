# Sourced by the benchmark scripts (run_dp_bench.sh, run_precision_bench.sh):
# how busy the machine is with work other than the script's own, so each
# figure can say whether it was taken on an idle machine.
#   wait_idle       up to IDLE_WAIT seconds for an idle half second
#   t_start/t_stop  around a run; t_stop sets wall (s) and other (cores busy
#                   with other work during it)
# Other work on the machine: every core's busy time (/proc/stat) less this
# script's own and its children's (/proc/$$/stat, children counted once reaped).
tck=$(getconf CLK_TCK)
busy_ticks() {
    local u n s irq sirq st
    read -r _ u n s _ _ irq sirq st _ </proc/stat
    echo $((u + n + s + irq + sirq + st))
}
own_ticks() {
    local f
    f=$(cat /proc/$$/stat)
    f=${f##*) }
    # shellcheck disable=SC2086
    set -- $f
    echo $((${12} + ${13} + ${14} + ${15}))
}
# Up to IDLE_WAIT seconds for half a second in which the machine is idle
# (under 0.15 cores busy); then the run starts anyway.
wait_idle() {
    local end=$((SECONDS + IDLE_WAIT)) a b
    while [ "$SECONDS" -lt "$end" ]; do
        a=$(busy_ticks); sleep 0.5; b=$(busy_ticks)
        [ $((b - a)) -le $((tck * 15 / 200)) ] && return
    done
}
t_start() { t0=$(date +%s.%N); b0=$(busy_ticks); o0=$(own_ticks); }
t_stop() {
    local b1 o1
    t1=$(date +%s.%N); b1=$(busy_ticks); o1=$(own_ticks)
    wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')
    other=$(awk -v d=$((b1 - b0 - (o1 - o0))) -v t="$tck" -v w="$wall" 'BEGIN { o = d / t / w; printf "%.2f", o < 0 ? 0 : o }')
}
