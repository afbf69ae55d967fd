#!/usr/bin/env python3
"""Which core/ folders include which: prints the folder graph and fails (exit
1) on a cycle between folders or an include of a header that does not exist.
Used by ctest (core_layout) and by hand: python3 scripts/core_deps.py [core]."""
import os, re, sys

core = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "core")
core = os.path.normpath(core)
inc = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
edges, bad = {}, []
for folder in sorted(os.listdir(core)):
    path = os.path.join(core, folder)
    if not os.path.isdir(path):
        continue
    edges.setdefault(folder, {})
    for f in sorted(os.listdir(path)):
        if not f.endswith((".c", ".h", ".cc")):
            continue
        for h in inc.findall(open(os.path.join(path, f)).read()):
            if h.startswith("lt/"):
                continue  # the public SDK headers: every folder may use them
            if "/" not in h:
                if not os.path.exists(os.path.join(path, h)):
                    bad.append(f"core/{folder}/{f}: includes \"{h}\", not in core/{folder}/")
                continue
            dep = h.split("/")[0]
            if not os.path.exists(os.path.join(core, h)):
                bad.append(f"core/{folder}/{f}: includes \"{h}\", which is not under core/")
            elif dep != folder:
                edges[folder].setdefault(dep, []).append(f"{f} -> {h}")

for folder, deps in edges.items():
    print(f"{folder:10s} -> {', '.join(sorted(deps)) or '(sdk only)'}")

# Depth-first search for a cycle, printing the files that make it.
state, stack, cycle = {}, [], None
def visit(n):
    global cycle
    state[n] = 1
    stack.append(n)
    for d in sorted(edges.get(n, {})):
        if cycle:
            return
        if state.get(d) == 1:
            cycle = stack[stack.index(d):] + [d]
        elif not state.get(d):
            visit(d)
    stack.pop()
    state[n] = 2
for n in sorted(edges):
    if not state.get(n) and not cycle:
        visit(n)

for b in bad:
    print("error:", b)
if cycle:
    print("error: include cycle between core folders: " + " -> ".join(cycle))
    for a, b in zip(cycle, cycle[1:]):
        print(f"  {a} -> {b}: " + "; ".join(edges[a][b]))
sys.exit(1 if cycle or bad else 0)
