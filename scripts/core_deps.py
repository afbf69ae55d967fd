#!/usr/bin/env python3
"""Which core/ folders include which: prints the folder graph and fails (exit
1) on a cycle between folders, an include of a header that does not exist, or
a trainer file outside setup that reads the config or the registry.
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

# The config is resolved once, at lt_trainer_new (trainer_setup.c into
# options.c's typed structs): setup and the loops read fields. Only these
# trainer files may call into the config or the registry: setup itself,
# freeing, and lt_run_new_group loading a backend a plugin names.
ALLOWED = {"trainer_setup.c", "options.c", "trainer_api.c", "run_groups.c"}
reach = re.compile(r"\b(lt_config_\w+|lt_registry_\w+)\s*\(")
tdir = os.path.join(core, "trainer")
for f in sorted(os.listdir(tdir)) if os.path.isdir(tdir) else []:
    if f.endswith(".c") and f not in ALLOWED:
        for n, line in enumerate(open(os.path.join(tdir, f)), 1):
            m = reach.search(line)
            if m:
                bad.append(f"core/trainer/{f}:{n}: calls {m.group(1)}; the loops read the typed "
                           f"options resolved in lt_trainer_new (trainer/options.h) instead")

for b in bad:
    print("error:", b)
if cycle:
    print("error: include cycle between core folders: " + " -> ".join(cycle))
    for a, b in zip(cycle, cycle[1:]):
        print(f"  {a} -> {b}: " + "; ".join(edges[a][b]))
sys.exit(1 if cycle or bad else 0)
