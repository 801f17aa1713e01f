#!/bin/bash
# Interleaved A/B of 'nicbench import' on one file: each source tree's
# nicbench imports FILE in turn, REPEATS rounds, each in its own process under
# /usr/bin/time: CPU (user + system), wall and peak RSS.  On this shared
# machine run it under the bench lock:
#
#   git -C /work/main archive BASE src | tar -x -C /tmp/base   # the tree to compare with
#   flock /tmp/nicbench-bench.lock bench/import_ab.sh FILE 3 /tmp/base/src src
#
# (compile both trees first -- python -m compileall -q TREE -- when the
# environment sets PYTHONDONTWRITEBYTECODE, or the first tree pays for it.)
set -eu
f=$1; n=$2; shift 2
store=$(mktemp -d /tmp/nicbench-import-ab.XXXXXX)
trap 'rm -rf "$store"' EXIT
py=${PYTHON:-$(dirname "$0")/../.venv/bin/python}
for _ in $(seq "$n"); do
  for src in "$@"; do
    rm -rf "$store/s"
    /usr/bin/time -f "%U %S %e %M" -o "$store/t" env PYTHONPATH="$src" "$py" -c \
      'import sys; from nicbench.cli.main import main; sys.argv[0] = "nicbench"; main()' \
      import --json --store "$store/s" "$f" > /dev/null
    awk -v src="$src" '{printf "%s: %.2f s CPU (user %.2f, system %.2f), %.2f s wall, peak RSS %.0f MiB\n",
                        src, $1 + $2, $1, $2, $3, $4 / 1024}' "$store/t"
  done
done
