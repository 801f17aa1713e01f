#!/usr/bin/env bash
# The whole test suite: installs what it needs, then runs unit tests and (as
# root) the end-to-end lab tests with the real tools.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
exec .venv/bin/python -m pytest -q "$@"
