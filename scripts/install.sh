#!/usr/bin/env bash
# Install what nicbench needs, idempotently: Debian packages (only the missing
# ones, so a second run touches nothing) and a virtualenv with the package.
set -euo pipefail
cd "$(dirname "$0")/.."

PKGS="openssh-client openssh-server iperf3 iperf sockperf irtt qperf iproute2 iputils-ping nftables ethtool procps util-linux mount numactl nginx-light wrk openssl nbdkit fio tgt libiscsi-bin python3-venv sqlite3 netsniff-ng clang libbpf-dev bpftool gcc make libc6-dev ansible-core shellcheck posh postgresql chromium chromium-driver"
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
# npm fetches the dashboard's charting library at build time; a machine with Node.js from
# elsewhere (nodesource's nodejs carries its own npm) keeps it
command -v npm >/dev/null 2>&1 || missing="$missing npm"
if [ -n "$missing" ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "nicbench: need root to install Debian packages:$missing" >&2
    exit 1
  fi
  echo "nicbench: installing Debian packages:$missing" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi

# nbperf, nicbench's TCP/UDP traffic engine (src/nicbench/native/nbperf; a pip user gets it from
# 'nicbench setup'): C, libc and pthreads only;
# make rebuilds it only when its sources changed
make -s -C src/nicbench/native/nbperf

PY=${PYTHON:-python3}
if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "nicbench: needs Python >= 3.11 (found $("$PY" --version 2>&1))" >&2
  exit 1
fi
# the dashboard's charting library (uPlot, pinned and checked against its registry sha512) into
# the package's static files: fetched by npm now, never at run time; nothing when already there
"$PY" scripts/webassets.py

if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=$(sha256sum pyproject.toml | cut -c1-16)
if [ "$(cat .venv/.nicbench-stamp 2>/dev/null)" != "$stamp" ] || ! .venv/bin/python -c 'import nicbench' 2>/dev/null; then
  echo "nicbench: installing Python dependencies into .venv" >&2
  .venv/bin/pip install -q --disable-pip-version-check -e ".[test]"
  echo "$stamp" > .venv/.nicbench-stamp
fi

# nbgen, nicbench's XDP packet generator (src/nicbench/native/nbgen): built into
# this user's ~/.local/share/nicbench (or $NICBENCH_HOME), only when this
# version's sources are not built yet
.venv/bin/nicbench setup >/dev/null
