#!/usr/bin/env bash
# The main job: install what is needed, build the embedded lab, run a scaled
# replay of seed 000's study (server + 3 clients; TX, RX, BiDi; IO 512 B ..
# 512 KiB; 2 connection counts), write the report and say where it is.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
exec .venv/bin/nicbench run "${1:-examples/seed000-tcp-multiclient.toml}"
