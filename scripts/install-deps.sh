#!/usr/bin/env bash
# Installs the Debian packages lt builds, tests and trains with, when missing.
#   install-deps.sh          what building and training need
#   install-deps.sh --test   and what the tests add (clang and libFuzzer: tests/fuzz)
set -euo pipefail
pkgs=(build-essential cmake pkg-config libgloo-dev libinih-dev libcunit1-dev libopenblas-dev libsimde-dev
      zlib1g-dev libjansson-dev dataset-fashion-mnist iproute2 procps python3)
[ "${1:-}" = --test ] && pkgs+=(clang libclang-rt-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
