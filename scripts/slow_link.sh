#!/bin/bash
# A slow network on one machine: two network namespaces joined by a veth pair
# (SUBNET.1 in the first, SUBNET.2 in the second, /24), each end's egress
# limited to RATE by a tbf qdisc, so both directions are limited. No delay is
# added (this is a bandwidth limit, not netem). Needs root, iproute2 (ip, tc)
# and a kernel with the tbf qdisc (CONFIG_NET_SCH_TBF / module sch_tbf); the
# measurement needs python3.
#
# RATE is tc's notation: 200mbit, 1gbit, 500kbit (bits/s) or 25mbps (bytes/s),
# or none for an unshaped veth pair.
#
# Run directly (one link at a time, its names kept in a state file,
# $SLOW_LINK_STATE, default /run/lt-slow-link.state):
#   scripts/slow_link.sh up RATE [SUBNET]   make it (SUBNET default 10.240.0); prints
#                                           NS0= IN0= ADDR0= and NS1= IN1= ADDR1= lines,
#                                           e.g. run node 0 with: ip netns exec NS0 ltrun ...
#                                           (eval "$(scripts/slow_link.sh up 200mbit)" sets them)
#   scripts/slow_link.sh rate RATE          change the limit of the link that is up
#   scripts/slow_link.sh measure [SECONDS]  bulk TCP goodput NS1 -> NS0 and NS0 -> NS1 (default 2 s)
#   scripts/slow_link.sh show               the namespaces, addresses and qdiscs
#   scripts/slow_link.sh down               remove what up made
# For example, ddp on two "nodes" over a 200 Mbit/s link:
#   eval "$(scripts/slow_link.sh up 200mbit)"
#   $IN0 build/ltrun --strategy ddp --num-nodes 2 --devices 1 --node-rank 0 --master-addr $ADDR0 ... &
#   $IN1 build/ltrun --strategy ddp --num-nodes 2 --devices 1 --node-rank 1 --master-addr $ADDR0 ...
#   scripts/slow_link.sh down
#
# Sourced (tests/integration/common.sh's netns_pair uses it; so can benchmarks):
#   slow_link_up SUBNET RATE    -> SL_NS0 SL_NS1 (namespaces), SL_V0 SL_V1 (veth ends),
#                                  SL_ADDR0 SL_ADDR1; returns 1 with the reason in
#                                  SLOW_LINK_ERR, leaving nothing behind
#   slow_link_rate RATE         change the limit on both ends (none removes it)
#   slow_link_measure FROM_NS TO_NS TO_ADDR [SECONDS]
#                               prints the goodput in Mbit/s (returns 1 on failure)
#   slow_link_down              removes SL_NS0 and SL_NS1 (and with them the veth pair)
#   slow_link_tbf RATE          prints the tbf arguments used for RATE
#
# The tbf parameters, for RATE in bytes/s R:
#   burst = max(R / 250, 64 KiB). The bucket must refill at least a timer
#     tick's worth of tokens (tc-tbf(8): "burst >= rate / HZ"; CONFIG_HZ is 250
#     on Debian's kernels), or every late wake-up of the qdisc loses tokens and
#     the link runs below RATE when the CPUs are busy (measured: 1gbit with a
#     16-64 KiB bucket gave 870-920 Mbit/s goodput with the 2 cores loaded,
#     500 KiB gave 956). At least 64 KiB, the largest GSO packet veth hands the
#     qdisc, so that tbf never has to split one. No bigger: a full bucket
#     passes at memory speed, and at 4 ms of RATE (above 131 Mbit/s; the
#     64 KiB floor is more below) a step's gradients (2.7 MB for the example
#     MLP) are shaped, not absorbed by it.
#   limit = max(burst + R x 50 ms, 256 KiB) (bytes queued before tbf drops).
#     It must hold several 64 KiB GSO packets: a packet bigger than the queue
#     is always dropped and TCP collapses (measured: a 64 KiB bucket with a
#     32 KiB limit gave under 1 Mbit/s at 200mbit and at 1gbit; a 256 KiB
#     limit gave the full rate). Local TCP senders keep their own backlog
#     small (TCP small queues: about two packets per connection in the
#     qdisc), so the long limit costs no latency: a small message beside a
#     bulk transfer at 200mbit waited 3 ms (median) and nothing was dropped.
# Goodput is at most 1448/1514 = 95.6% of RATE (tbf counts Ethernet, IP and
# TCP headers): 200mbit gives about 191 Mbit/s of payload, 1gbit about 956.

SLOW_LINK_HZ=250

# Bits per second of a tc rate (200mbit, 1gbit, 25mbps, 1.5gbit), or return 1.
slow_link_bits() { # slow_link_bits RATE
    local r=${1,,} num unit mult
    [[ $r =~ ^([0-9]+(\.[0-9]+)?)([kmgt]?)(bit|bps)$ ]] || return 1
    num=${BASH_REMATCH[1]} unit=${BASH_REMATCH[3]}
    case $unit in '') mult=1 ;; k) mult=1000 ;; m) mult=1000000 ;; g) mult=1000000000 ;; t) mult=1000000000000 ;; esac
    [ "${BASH_REMATCH[4]}" = bps ] && mult=$((mult * 8))
    awk -v n="$num" -v m="$mult" 'BEGIN { v = n * m; if (v < 8000) exit 1; printf "%.0f\n", v }'
}

# The tbf arguments for RATE (see the header for why these).
slow_link_tbf() { # slow_link_tbf RATE
    local bits bytes burst limit
    bits=$(slow_link_bits "$1") || return 1
    bytes=$((bits / 8))
    burst=$((bytes / SLOW_LINK_HZ))
    [ $burst -lt 65536 ] && burst=65536
    limit=$((burst + bytes / 20))
    [ $limit -lt 262144 ] && limit=262144
    echo "rate $1 burst $burst limit $limit"
}

# Sets SLOW_LINK_ERR and returns 1 when RATE is malformed or the machine lacks
# what the link needs (root, ip; tc when RATE is not none).
slow_link_check() { # slow_link_check RATE
    SLOW_LINK_ERR=
    if [ "$1" != none ] && ! slow_link_bits "$1" >/dev/null; then
        SLOW_LINK_ERR="rate '$1' is not a rate: give it as tc does (200mbit, 1gbit, 500kbit, 25mbps) or none"
    elif [ "$(id -u)" != 0 ]; then
        SLOW_LINK_ERR="needs root (network namespaces and qdiscs); run it as root or with sudo"
    elif ! command -v ip >/dev/null; then
        SLOW_LINK_ERR="ip not found: install iproute2"
    elif [ "$1" != none ] && ! command -v tc >/dev/null; then
        SLOW_LINK_ERR="tc not found: install iproute2"
    fi
    [ -z "$SLOW_LINK_ERR" ]
}

# Limits the egress of both veth ends to RATE (none removes the limit).
slow_link_rate() { # slow_link_rate RATE
    local ns dev out args
    SLOW_LINK_ERR=
    slow_link_check "$1" || return 1
    for ns in "$SL_NS0:$SL_V0" "$SL_NS1:$SL_V1"; do
        dev=${ns#*:} ns=${ns%%:*}
        if [ "$1" = none ]; then
            tc -n "$ns" qdisc del dev "$dev" root 2>/dev/null
            continue
        fi
        args=$(slow_link_tbf "$1")
        # shellcheck disable=SC2086 # args is words on purpose
        if ! out=$(tc -n "$ns" qdisc replace dev "$dev" root tbf $args 2>&1); then
            if [[ $out == *"qdisc kind is unknown"* || $out == *"No such file or directory"* ]]; then
                SLOW_LINK_ERR="the kernel has no tbf qdisc: load it (modprobe sch_tbf, package kmod) or use a kernel built with CONFIG_NET_SCH_TBF"
            else
                SLOW_LINK_ERR="tc qdisc replace dev $dev root tbf $args refused: ${out//$'\n'/ }"
            fi
            return 1
        fi
    done
}

# Two namespaces joined by a veth pair, RATE on both ends. On any failure it
# removes whatever it made, sets SLOW_LINK_ERR and returns 1.
slow_link_up() { # slow_link_up SUBNET RATE
    local subnet=$1 rate=${2:-none} tag out ns
    SL_NS0='' SL_NS1='' SL_V0='' SL_V1='' SL_ADDR0='' SL_ADDR1=''
    slow_link_check "$rate" || return 1
    if ! [[ $subnet =~ ^[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}$ ]]; then
        SLOW_LINK_ERR="subnet '$subnet' is not three octets (e.g. 10.240.0)"
        return 1
    fi
    tag=$(printf '%04x%04x' $RANDOM $RANDOM)
    SL_ADDR0=$subnet.1 SL_ADDR1=$subnet.2
    for ns in SL_NS0 SL_NS1; do
        if ! out=$(ip netns add "lt-slow${ns: -1}-$tag" 2>&1); then
            SLOW_LINK_ERR="ip netns add refused: ${out//$'\n'/ }"
            break
        fi
        printf -v "$ns" %s "lt-slow${ns: -1}-$tag"
    done
    if [ -z "$SLOW_LINK_ERR" ]; then
        SL_V0=ltsv0-$tag SL_V1=ltsv1-$tag # interface names are at most 15 bytes
        if ! out=$( { ip link add "$SL_V0" type veth peer name "$SL_V1" &&
                      ip link set "$SL_V0" netns "$SL_NS0" && ip link set "$SL_V1" netns "$SL_NS1" &&
                      ip -n "$SL_NS0" addr add "$SL_ADDR0/24" dev "$SL_V0" &&
                      ip -n "$SL_NS1" addr add "$SL_ADDR1/24" dev "$SL_V1" &&
                      ip -n "$SL_NS0" link set lo up && ip -n "$SL_NS1" link set lo up &&
                      ip -n "$SL_NS0" link set "$SL_V0" up && ip -n "$SL_NS1" link set "$SL_V1" up; } 2>&1 ); then
            SLOW_LINK_ERR="making the veth pair failed: ${out//$'\n'/ }"
        fi
    fi
    [ -z "$SLOW_LINK_ERR" ] && slow_link_rate "$rate" && return 0
    local err=$SLOW_LINK_ERR
    slow_link_down
    SLOW_LINK_ERR=$err
    return 1
}

# Removes the namespaces (their veth ends go with them) and a veth end that
# never got into one.
slow_link_down() {
    [ -n "${SL_NS0:-}" ] && ip netns del "$SL_NS0" 2>/dev/null
    [ -n "${SL_NS1:-}" ] && ip netns del "$SL_NS1" 2>/dev/null
    [ -n "${SL_V0:-}" ] && ip link del "$SL_V0" 2>/dev/null
    SL_NS0='' SL_NS1='' SL_V0='' SL_V1=''
    return 0
}

# The receiver counts the payload from 0.25 s after its first byte (past slow
# start and the bucket's first burst) to the sender's close; the sender sends
# for SECONDS.
SLOW_LINK_PY='
import socket, sys, time
if sys.argv[1] == "recv":
    s = socket.socket()
    s.bind(("0.0.0.0", 0)); s.listen(1); s.settimeout(15)
    print(s.getsockname()[1], flush=True)
    c, _ = s.accept(); c.settimeout(15)
    buf = bytearray(1 << 20); n = 0; t0 = None; base = None
    while True:
        k = c.recv_into(buf)
        if not k: break
        now = time.monotonic(); n += k
        if t0 is None: t0 = now
        elif base is None and now - t0 >= 0.25: base = (now, n)
    t1 = time.monotonic(); c.close()
    if base is None or t1 - base[0] < 0.1: sys.exit("too short a transfer to time")
    print("%.1f" % ((n - base[1]) * 8 / (t1 - base[0]) / 1e6))
else:
    addr, port, secs = sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    c = socket.create_connection((addr, port), timeout=15)
    data = bytes(1 << 18); end = time.monotonic() + secs
    while time.monotonic() < end: c.sendall(data)
    c.shutdown(socket.SHUT_WR); c.recv(1)
'

# Bulk TCP goodput from namespace FROM to TO_ADDR in namespace TO, in Mbit/s.
slow_link_measure() { # slow_link_measure FROM_NS TO_NS TO_ADDR [SECONDS]
    local from=$1 to=$2 addr=$3 secs=${4:-2} py dir port='' _ rc
    SLOW_LINK_ERR=
    py=$(command -v python3) || { SLOW_LINK_ERR="python3 not found: install python3"; return 1; }
    dir=$(mktemp -d "${TMPDIR:-/tmp}/lt-slow-measure.XXXXXX") || return 1
    timeout $((${secs%.*} + 30)) ip netns exec "$to" "$py" -c "$SLOW_LINK_PY" recv >"$dir/recv" 2>"$dir/err" &
    local rpid=$!
    for _ in $(seq 100); do
        port=$(head -n 1 "$dir/recv" 2>/dev/null)
        [ -n "$port" ] && break
        kill -0 $rpid 2>/dev/null || break
        sleep 0.05
    done
    if [ -z "$port" ]; then
        kill $rpid 2>/dev/null; wait $rpid 2>/dev/null
        SLOW_LINK_ERR="the receiver in $to did not start: $(tail -n 1 "$dir/err")"
        rm -rf "$dir"
        return 1
    fi
    timeout $((${secs%.*} + 25)) ip netns exec "$from" "$py" -c "$SLOW_LINK_PY" send "$addr" "$port" "$secs" 2>>"$dir/err"
    wait $rpid
    rc=$?
    if [ $rc -ne 0 ] || [ "$(wc -l <"$dir/recv")" -ne 2 ]; then
        SLOW_LINK_ERR="measuring $from -> $to failed: $(tail -n 1 "$dir/err")"
        rm -rf "$dir"
        return 1
    fi
    tail -n 1 "$dir/recv"
    rm -rf "$dir"
}

# ---- run directly ----------------------------------------------------------

_slow_link_state() { echo "${SLOW_LINK_STATE:-/run/lt-slow-link.state}"; }

_slow_link_die() { echo "slow_link: $*" >&2; exit 1; }

# Loads the state file of the link that is up (or dies).
_slow_link_load() {
    local st
    st=$(_slow_link_state)
    [ -r "$st" ] || _slow_link_die "no link is up (no $st): run $0 up RATE first"
    # shellcheck disable=SC1090
    source "$st"
    [ -e "/run/netns/$SL_NS0" ] ||
        _slow_link_die "the link in $st is gone (no namespace $SL_NS0): run $0 down, then up"
}

_slow_link_main() {
    set -u
    local cmd=${1:-help} st
    st=$(_slow_link_state)
    case $cmd in
    up)
        [ $# -ge 2 ] || _slow_link_die "usage: $0 up RATE [SUBNET] (RATE: 200mbit, 1gbit, ... or none)"
        local rate=$2 subnet=${3:-10.240.0}
        if [ -e "$st" ]; then
            # shellcheck disable=SC1090
            (source "$st" && [ -e "/run/netns/$SL_NS0" ]) &&
                _slow_link_die "a link is already up ($st): run $0 down first"
            rm -f "$st"
        fi
        slow_link_check "$rate" || _slow_link_die "$SLOW_LINK_ERR"
        # an interrupted up leaves nothing behind
        trap 'slow_link_down; rm -f "$st"; exit 130' INT TERM HUP
        slow_link_up "$subnet" "$rate" || _slow_link_die "$SLOW_LINK_ERR"
        if ! printf 'SL_NS0=%q SL_NS1=%q SL_V0=%q SL_V1=%q SL_ADDR0=%q SL_ADDR1=%q SL_RATE=%q\n' \
                "$SL_NS0" "$SL_NS1" "$SL_V0" "$SL_V1" "$SL_ADDR0" "$SL_ADDR1" "$rate" >"$st"; then
            slow_link_down
            _slow_link_die "cannot write the state file $st (set SLOW_LINK_STATE)"
        fi
        trap - INT TERM HUP
        local tbf="unshaped"
        [ "$rate" != none ] && tbf="tbf $(slow_link_tbf "$rate") on each end"
        echo "# slow link up: $SL_ADDR0 <-> $SL_ADDR1, $tbf; remove it with: $0 down"
        echo "NS0=$SL_NS0 IN0=\"ip netns exec $SL_NS0\" ADDR0=$SL_ADDR0"
        echo "NS1=$SL_NS1 IN1=\"ip netns exec $SL_NS1\" ADDR1=$SL_ADDR1"
        ;;
    rate)
        [ $# -ge 2 ] || _slow_link_die "usage: $0 rate RATE"
        _slow_link_load
        slow_link_rate "$2" || _slow_link_die "$SLOW_LINK_ERR"
        sed -i "s/SL_RATE=.*/SL_RATE=$(printf %q "$2")/" "$st"
        echo "# $SL_NS0 <-> $SL_NS1 now $2"
        ;;
    measure)
        _slow_link_load
        local secs=${2:-2} a b
        a=$(slow_link_measure "$SL_NS1" "$SL_NS0" "$SL_ADDR0" "$secs") || _slow_link_die "$SLOW_LINK_ERR"
        b=$(slow_link_measure "$SL_NS0" "$SL_NS1" "$SL_ADDR1" "$secs") || _slow_link_die "$SLOW_LINK_ERR"
        echo "rate $SL_RATE: $SL_NS1 -> $SL_NS0 $a Mbit/s, $SL_NS0 -> $SL_NS1 $b Mbit/s (TCP payload, $secs s each)"
        ;;
    show)
        _slow_link_load
        echo "rate $SL_RATE"
        echo "$SL_NS0: $SL_V0 $SL_ADDR0  $(tc -n "$SL_NS0" qdisc show dev "$SL_V0" 2>/dev/null | head -n 1)"
        echo "$SL_NS1: $SL_V1 $SL_ADDR1  $(tc -n "$SL_NS1" qdisc show dev "$SL_V1" 2>/dev/null | head -n 1)"
        ;;
    down)
        if [ ! -e "$st" ]; then echo "# no link is up ($st absent)"; return 0; fi
        [ "$(id -u)" = 0 ] || _slow_link_die "needs root (network namespaces and qdiscs); run it as root or with sudo"
        # shellcheck disable=SC1090
        source "$st"
        slow_link_down
        rm -f "$st"
        echo "# removed the slow link"
        ;;
    help | -h | --help)
        sed -n '2,/^$/p' "$0" | sed 's/^# \{0,1\}//'
        ;;
    *)
        _slow_link_die "unknown command '$cmd': up RATE [SUBNET], rate RATE, measure [SECONDS], show, down"
        ;;
    esac
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    _slow_link_main "$@"
    exit $?
fi
