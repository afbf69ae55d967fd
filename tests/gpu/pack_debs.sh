#!/bin/bash
# Fills .debs/ at the repository root with what tests/gpu/run.sh needs on a
# GPU machine that reaches no package registry: ../shared/offline/pack.sh's
# packages plus those it leaves out that lt's CMake needs (jansson,
# pkg-config, SIMDe's headers), and unpack.sh beside them (../shared does
# not travel with the working tree). Run here, where Debian's packages are reachable; then, with
# the device tool: run(command="bash tests/gpu/run.sh", carry=[".debs"]).
set -euo pipefail
root=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
shared="$root/../shared/offline"
[ -f "$shared/pack.sh" ] || { echo "pack_debs: $shared/pack.sh is missing (../shared beside the repository)" >&2; exit 1; }
LT_EXTRA_DEBS="libjansson4 libjansson-dev pkgconf pkgconf-bin libpkgconf3 libsimde-dev ${LT_EXTRA_DEBS:-}" bash "$shared/pack.sh"
cp "$shared/unpack.sh" "$root/.debs/unpack.sh"
du -sh "$root/.debs" | sed 's/^/pack_debs: /'
