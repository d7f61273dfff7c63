#!/bin/bash
# How much the small-work figures move from one process to the next.
#
#   bash benches/spread.sh N [BIN] [KEYS]
#
# Runs `BIN bench --json --only KEYS` (BIN defaults to target/release/eddy; KEYS to the
# small-work keys: dispatch_small, dispatch_mixed, mlp_infer, mlp_train, chain_graph) in N
# fresh processes, one after another, and prints per key the sorted per-process values (each
# a process's own median over its repetitions), their median, the best and the worst, and
# worst / median. Every key is lower-is-better. A process that fails is reported and left out.
set -euo pipefail
n=${1:?usage: bash benches/spread.sh N [BIN] [KEYS]}
bin=${2:-target/release/eddy}
keys=${3:-dispatch_small_ns_per_op,dispatch_mixed_ns_per_op,mlp_infer_us_per_fwd,mlp_train_ms_per_step,chain_graph_ns_per_op}
lines=$(mktemp)
trap 'rm -f "$lines"' EXIT
for i in $(seq "$n"); do
  # Each run ends before the parser starts: an interpreter beside the run would take a core.
  if out=$("$bin" bench --json --only "$keys" 2>/dev/null); then
    python3 -c "
import json, sys
for k, v in json.load(sys.stdin)['metrics'].items():
    print(k, v)" <<<"$out" >>"$lines"
  else
    echo "process $i failed" >&2
  fi
done
python3 - "$n" "$lines" "$keys" <<'PY'
import collections, statistics, sys
n, path, keys = int(sys.argv[1]), sys.argv[2], sys.argv[3].split(",")
vals = collections.defaultdict(list)
for line in open(path):
    k, v = line.split()
    if k in keys:  # `bench` also reports the figures that come with a key (memory, losses)
        vals[k].append(float(v))
print(f"{n} fresh processes")
for k, vs in vals.items():
    vs.sort()
    med = statistics.median(vs)
    print(f"{k}")
    print(f"  per process {[round(v, 2) for v in vs]}")
    print(f"  median {med:.2f} | best {vs[0]:.2f} | worst {vs[-1]:.2f} | worst/median {vs[-1] / med:.3f}")
PY
