#!/bin/bash
# Alternates benchmark binaries to compare them on a noisy host.
#
#   bash benches/ab.sh ROUNDS KEY BIN_A BIN_B [BIN ...]
#   bash benches/ab.sh ROUNDS all BIN_A BIN_B [BIN ...]
#
# Each round runs `BIN bench --json --only KEY` (with `all`: every workload, `bench --json`)
# once per binary, in turn, so a slow phase of the host hits every binary alike. Prints, per
# key and binary (named by its file name; use wrapper scripts to compare settings such as
# environment variables), the sorted medians of the runs, their median, the best single
# repetition where the key has repetitions, and the ratio of each median to the first
# binary's.
set -euo pipefail
n=$1; key=$2; shift 2
only=(--only "$key")
[ "$key" = all ] && only=()
lines=$(mktemp)
trap 'rm -f "$lines"' EXIT
for _ in $(seq "$n"); do
  for b in "$@"; do
    # Run to the end before the parser starts: an interpreter starting beside the run
    # would take a core from its first steps.
    out=$("$b" bench --json "${only[@]}" 2>/dev/null)
    python3 -c "
import json, sys
d = json.load(sys.stdin)
for k, v in d['metrics'].items():
    s = d.get('samples', {}).get(k) or [v]
    print('$(basename "$b")', k, v, min(s), max(s))" <<<"$out"
  done
done >"$lines"
python3 -c "
import collections, sys
runs = collections.defaultdict(lambda: collections.defaultdict(list))
order = []
for line in sys.stdin:
    b, k, med, lo, hi = line.split()
    if b not in order:
        order.append(b)
    runs[k][b].append((float(med), float(lo), float(hi)))
for k in sorted(runs):
    print(k)
    first = None
    for b in order:
        v = runs[k].get(b)
        if not v:
            continue
        meds = sorted(m for m, _, _ in v)
        mid = meds[len(meds) // 2]
        first = first or mid
        # Lower is better for times and sizes, higher for rates: show both extremes.
        print(f'  {b:10} medians {[round(m, 2) for m in meds]} | median {mid:.2f}'
              f' | range {min(x for _, x, _ in v):.2f}..{max(x for _, _, x in v):.2f}'
              f' | ratio {mid / first if first else float(\"nan\"):.3f}')
" <"$lines"
