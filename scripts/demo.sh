#!/usr/bin/env bash
# The main job: installs what is missing, builds, and trains the Fashion-MNIST
# MLP with ddp on two processes (backend auto: shared memory on one host, gloo
# between hosts).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
exec ./build/ltrun --strategy "${LT_DEMO_STRATEGY:-ddp}" --devices "${LT_DEMO_DEVICES:-2}" \
  --plugin-dir ./build/plugins --config examples/fashion_mnist/train.ini "$@"
