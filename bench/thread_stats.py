#!/usr/bin/env python3
"""Per-thread CPU time and context switches of a command's processes (a
diagnostic for bench/run_ddp_bench.sh's ddp runs; any python3).

    bench/thread_stats.py [--steps N] [--interval S] -- COMMAND ARGS...

Runs COMMAND, polls /proc every --interval seconds for it and every
descendant process, keeps each thread's last figures: CPU time and run-queue wait (schedstat,
exact), user/sys split (stat, in clock ticks), voluntary / involuntary
context switches, nice, and the system calls it was seen blocked in; when the
command exits prints one line per thread:

    pid tid comm role nice cpu_ms user_ms sys_ms runq_ms vol_cs invol_cs [per step ...]

runq_ms is time the thread was runnable but not running (waiting for a CPU:
the scheduling delay a woken communication thread suffers).

role is a guess from where the thread was seen waiting: "main" (the
process's first thread), "epoll" (gloo's TCP device loop: epoll_wait),
"futex" (a thread parked on a condition variable: the gloo worker, the data
loader), "poll" (the store), or "?" when never caught waiting. With --steps,
per-step figures (divide by N: the number of training steps each process ran).
The last poll can be up to --interval before the end: figures are lower
bounds. The command's own output goes to stdout/stderr unchanged.
"""
import argparse
import os
import subprocess
import sys
import time

SYSCALLS = {7: "poll", 232: "epoll_wait", 281: "epoll_pwait", 202: "futex", 0: "read", 1: "write",
            23: "select", 270: "pselect6", 230: "clock_nanosleep", 35: "nanosleep", 61: "wait4",
            271: "ppoll", 44: "sendto", 45: "recvfrom", 46: "sendmsg", 47: "recvmsg"}
HZ = os.sysconf("SC_CLK_TCK")


def children_of(pid):
    out = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(c) for c in f.read().split()]
    except OSError:
        pass
    return out


def descendants(root):
    seen, todo = [], [root]
    while todo:
        p = todo.pop()
        seen.append(p)
        todo += children_of(p)
    return seen


def sample(pid, tid):
    base = f"/proc/{pid}/task/{tid}"
    with open(f"{base}/stat") as f:
        s = f.read()
    rest = s[s.rindex(")") + 2:].split()
    # fields after "(comm) ": state(3) ... utime(14) stime(15) ... nice(19), 1-based in proc(5)
    utime, stime, nice = int(rest[11]), int(rest[12]), int(rest[16])
    vol = invol = 0
    with open(f"{base}/status") as f:
        for line in f:
            if line.startswith("voluntary_ctxt_switches"):
                vol = int(line.split()[1])
            elif line.startswith("nonvoluntary_ctxt_switches"):
                invol = int(line.split()[1])
    sc = None
    try:
        with open(f"{base}/syscall") as f:
            first = f.read().split()[0]
        if first.lstrip("-").isdigit():
            sc = SYSCALLS.get(int(first), "sys%s" % first)
    except OSError:
        pass
    with open(f"{base}/comm") as f:
        comm = f.read().strip()
    # schedstat: ns on a CPU, ns runnable but waiting for one, timeslices (exact, unlike ticks)
    try:
        with open(f"{base}/schedstat") as f:
            oncpu, runq, _ = (int(v) for v in f.read().split()[:3])
    except (OSError, ValueError):
        oncpu = runq = 0
    return utime, stime, nice, vol, invol, sc, comm, oncpu, runq


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=float, default=0, help="training steps per process, for per-step figures")
    ap.add_argument("--interval", type=float, default=0.05)
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd and a.cmd[0] == "--" else a.cmd
    if not cmd:
        ap.error("no command")
    proc = subprocess.Popen(cmd)
    last = {}   # (pid, tid) -> sample
    seen = {}   # (pid, tid) -> {syscall: count}
    while proc.poll() is None:
        for pid in descendants(proc.pid):
            try:
                tids = os.listdir(f"/proc/{pid}/task")
            except OSError:
                continue
            for t in tids:
                try:
                    s = sample(pid, int(t))
                except (OSError, IndexError, ValueError):
                    continue
                key = (pid, int(t))
                last[key] = s
                if s[5]:
                    d = seen.setdefault(key, {})
                    d[s[5]] = d.get(s[5], 0) + 1
        time.sleep(a.interval)
    rc = proc.returncode
    print("# thread_stats: %d threads; ms of CPU and context switches up to the last poll" % len(last),
          file=sys.stderr)
    hdr = "%7s %7s %-6s %-5s %4s %8s %8s %8s %8s %8s %8s" % (
        "pid", "tid", "comm", "role", "nice", "cpu_ms", "user_ms", "sys_ms", "runq_ms", "vol_cs", "invol_cs")
    if a.steps:
        hdr += "   per step: %7s %7s %7s %6s %6s" % ("cpu_ms", "sys_ms", "runq_ms", "vol", "invol")
    print(hdr, file=sys.stderr)
    tot = {}
    for (pid, tid), (ut, st, nice, vol, invol, _, comm, oncpu, runq) in sorted(last.items()):
        waits = seen.get((pid, tid), {})
        if tid == pid:
            role = "main"
        elif "epoll_wait" in waits or "epoll_pwait" in waits:
            role = "epoll"
        elif waits:
            role = max(waits, key=waits.get)[:5]
        else:
            role = "?"
        um, sm = ut * 1000.0 / HZ, st * 1000.0 / HZ
        cm, qm = oncpu / 1e6, runq / 1e6
        line = "%7d %7d %-6s %-5s %4d %8.0f %8.0f %8.0f %8.0f %8d %8d" % (
            pid, tid, comm[:6], role, nice, cm, um, sm, qm, vol, invol)
        if a.steps:
            line += "   per step: %7.3f %7.3f %7.3f %6.2f %6.2f" % (
                cm / a.steps, sm / a.steps, qm / a.steps, vol / a.steps, invol / a.steps)
        print(line, file=sys.stderr)
        t = tot.setdefault(role, [0, 0, 0, 0, 0])
        for i, v in enumerate((cm, sm, qm, vol, invol)):
            t[i] += v
    print("# totals by role over all processes: " + "; ".join(
        "%s cpu %.0f ms (sys %.0f) runq %.0f ms vol %d invol %d" % (r, *v) for r, v in sorted(tot.items())),
        file=sys.stderr)
    sys.exit(rc)


if __name__ == "__main__":
    main()
