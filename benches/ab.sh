#!/bin/bash
# Alternates benchmark binaries to compare them on a noisy host.
#
#   bash benches/ab.sh ROUNDS KEY BIN_A BIN_B [BIN ...]
#
# Each round runs `BIN bench --json --only KEY` once per binary, in turn, so a slow phase of
# the host hits every binary alike. Prints, per binary (named by its file name; use wrapper
# scripts to compare settings such as environment variables), the sorted medians of the runs,
# their median, and the best single repetition.
set -euo pipefail
n=$1; key=$2; shift 2
for _ in $(seq "$n"); do
  for b in "$@"; do
    echo -n "$(basename "$b") "
    "$b" bench --json --only "$key" 2>/dev/null | python3 -c "
import json, sys
d = json.load(sys.stdin)
print(d['metrics']['$key'], min(d['samples']['$key']))"
  done
done | python3 -c "
import collections, sys
runs = collections.defaultdict(list)
for line in sys.stdin:
    b, med, best = line.split()
    runs[b].append((float(med), float(best)))
for b, v in runs.items():
    meds = sorted(m for m, _ in v)
    print(f'{b:10} medians {[round(m, 1) for m in meds]} | median {meds[len(meds) // 2]:.1f}'
          f' | best {min(x for _, x in v):.1f}')
"
