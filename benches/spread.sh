#!/bin/bash
# How much the small-work figures move from one process to the next.
#
#   bash benches/spread.sh N [BIN ...]
#
# Runs `BIN bench --json --only KEYS` in N fresh processes per build, one after another, the
# builds alternated (BIN defaults to target/release/eddy; KEYS, from the environment, to the
# small-work keys: dispatch_small, dispatch_mixed, mlp_infer, mlp_train, chain_graph). Each
# process first times a chunk of plain Rust with no engine (`eddy bench --only
# host_ns_per_step`, in the same process), so a slow process can be told from a slow phase
# of the host. Prints per key and build the sorted per-process values (each a process's own
# median over its repetitions), their median, best and worst, and worst / median; then the
# same over the processes that ran while the host was in its fast phase (plain Rust within
# 15 % of the best seen), and, with several builds, each build's median over the first's.
# Rates (GB/s, GFLOP/s) are higher-is-better, with median / worst; the rest worst / median.
# A process that fails is reported and left out.
set -euo pipefail
n=${1:?usage: bash benches/spread.sh N [BIN ...]}
shift
bins=("$@")
[ ${#bins[@]} -gt 0 ] || bins=(target/release/eddy)
keys=${KEYS:-dispatch_small_ns_per_op,dispatch_mixed_ns_per_op,mlp_infer_us_per_fwd,mlp_train_ms_per_step,chain_graph_ns_per_op}
lines=$(mktemp)
out=$(mktemp)
trap 'rm -f "$lines" "$out"' EXIT
for i in $(seq "$n"); do
  for b in "${!bins[@]}"; do
    # Each run ends before the parser starts: an interpreter beside the run would take a core.
    if "${bins[$b]}" bench --json --only "host_ns_per_step,$keys" >"$out" 2>/dev/null; then
      python3 -c "
import json, sys
for k, v in json.load(open(sys.argv[1]))['metrics'].items():
    print(sys.argv[2], sys.argv[3], k, v)" "$out" "$b" "$i" >>"$lines"
    else
      echo "process $i of ${bins[$b]} failed" >&2
    fi
  done
done
python3 - "$n" "$lines" "$keys" "${bins[@]}" <<'PY'
import collections, statistics, sys
n, path, keys, bins = int(sys.argv[1]), sys.argv[2], sys.argv[3].split(","), sys.argv[4:]
vals = collections.defaultdict(dict)  # (build, key) -> {process: value}
for line in open(path):
    b, i, k, v = line.split()
    vals[(int(b), k)][int(i)] = float(v)
host = {b: vals.get((b, "host_ns_per_step"), {}) for b in range(len(bins))}
best = min((v for h in host.values() for v in h.values()), default=0)
def show(label, vs, higher):
    vs = sorted(vs, reverse=higher)
    if not vs:
        print(f"  {label}: no process")
        return None
    med = statistics.median(vs)
    spread = med / vs[-1] if higher else vs[-1] / med
    name = "median/worst" if higher else "worst/median"
    print(f"  {label}: median {med:.2f} | best {vs[0]:.2f} | worst {vs[-1]:.2f} | {name} {spread:.3f} ({len(vs)} processes)")
    return med
print(f"{n} fresh processes per build; plain Rust's best {best:.1f} ns a step")
for k in ["host_ns_per_step"] + keys:
    print(k)
    higher = k.endswith(("gbps", "gflops", "tflops"))
    meds = []
    for b, name in enumerate(bins):
        per = vals.get((b, k), {})
        if len(bins) > 1:
            print(f" {name}")
        print(f"  per process {[round(v, 2) for v in sorted(per.values())]}")
        show("all", per.values(), higher)
        fast = [v for i, v in per.items() if host[b].get(i, float("inf")) <= best * 1.15]
        meds.append(show("host fast", fast, higher) if k != "host_ns_per_step" else None)
    if len(bins) > 1 and all(m for m in meds):
        print("  host-fast medians over the first build's: " + ", ".join(f"{m / meds[0]:.3f}" for m in meds))
PY
