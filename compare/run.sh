#!/usr/bin/env bash
# Eddy and candle side by side on this host: builds both harnesses, runs them alternately
# (ROUNDS process runs each, default 3, as the book's performance chapter measured the other frameworks), keeps
# every JSON object under OUT (default target/compare), and prints one table: each framework's
# median over the rounds, and the median of the per-round ratios, the figure the host's noise
# moves least because both runs of a round saw the same host.
#
#   bash compare/run.sh                 # every key
#   ROUNDS=5 bash compare/run.sh --only dispatch_small_ns_per_op,dispatch_mixed_ns_per_op
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${ROUNDS:-3}
out=${OUT:-target/compare}
mkdir -p "$out"
rm -f "$out"/*.json

cargo build --release --quiet --bin eddy
(cd compare/candle && cargo build --release --quiet)

for r in $(seq 1 "$rounds"); do
    echo "round $r of $rounds" >&2
    ./target/release/eddy bench --json "$@" >"$out/eddy-$r.json"
    compare/candle/target/release/candle-bench --json "$@" >"$out/candle-$r.json"
done

python3 - "$out" "$rounds" <<'EOF'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
load = lambda fw: [json.load(open(f"{out}/{fw}-{r}.json"))["metrics"] for r in range(1, rounds + 1)]
eddy, candle = load("eddy"), load("candle")
higher_is_better = lambda k: k.endswith("gbps") or k.endswith("gflops")
print(f"| key | eddy | candle | eddy's lead (median of {rounds} rounds) |")
print("|---|---|---|---|")
for k in eddy[0]:
    if k not in candle[0] or "loss" in k or "base_rss" in k:
        continue
    e = [m[k] for m in eddy]
    c = [m[k] for m in candle]
    # Above 1 means Eddy is better, whichever way the key counts.
    lead = [(x / y if higher_is_better(k) else y / x) for x, y in zip(e, c)]
    print(f"| {k} | {statistics.median(e):.3g} | {statistics.median(c):.3g} | "
          f"{statistics.median(lead):.2f}× ({min(lead):.2f} .. {max(lead):.2f}) |")
EOF
