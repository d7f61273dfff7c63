#!/bin/bash
# Writes src/bin/eddy.order: the functions of the `eddy` binary that the benchmark workloads
# run, in three parts: the start of the training workload's process (`eddy bench --child`, up
# to the training), the small-op and batch-1 workloads, then the training; hottest first in
# each part, each function once. build.rs hands the list to the linker, which places those
# functions together at the start of the code (see build.rs and the book's performance
# chapter, "mlp_train peak RSS").
#
#   bash benches/link-order.sh           # rebuild the list (about 15 minutes: callgrind)
#   bash benches/link-order.sh --check   # how many listed functions this build has
#
# Function names carry a hash of the compiler version and the release profile, so the list
# is remade after a compiler update or a change to the release profile; a function added to
# the hot path since the list was made is merely placed outside the hot block.
set -euo pipefail
cd "$(dirname "$0")/.."
order=src/bin/eddy.order
cargo build --release --bin eddy
bin=target/release/eddy
nm --defined-only "$bin" | awk '$2 ~ /^[tTwW]$/ {print $3}' | sort -u > target/eddy.symbols
if [ "${1:-}" = --check ]; then
  listed=$(grep -c . "$order")
  found=$(sort -u "$order" | comm -12 - target/eddy.symbols | wc -l)
  echo "$found of $listed listed functions are in $bin"
  exit 0
fi
out=target/link-order.callgrind
rm -f "$out" "$out".*
# The start (up to the training workload: what `mlp_train_base_rss_mb` sees) is dumped as
# "$out.1", the training at the end as "$out". The start's functions come first, so that the
# start touches few pages.
valgrind --tool=callgrind --demangle=no --dump-before='*5bench9mlp_train*' \
  --callgrind-out-file="$out" "$bin" bench --child >/dev/null
# The small-op and batch-1 workloads, whose functions the training does not run all of.
valgrind --tool=callgrind --demangle=no --callgrind-out-file="$out.small" "$bin" bench \
  --only dispatch_small_ns_per_op,dispatch_mixed_ns_per_op,mlp_infer_us_per_fwd >/dev/null
# Per part, self cost per function (a function's rows are summed over its source files),
# hottest first; only the binary's own symbols (not libc's); each function once.
for part in "$out".1 "$out.small" "$out"; do
  callgrind_annotate --auto=no --threshold=100 --inclusive=no "$part"
  echo "== end of part"
done | python3 -c '
import collections, re, sys
symbols = set(open("target/eddy.symbols").read().split())
listed, cost = set(), collections.Counter()
def flush():
    for name, _ in cost.most_common():
        if name not in listed:
            listed.add(name)
            print(name)
    cost.clear()
for line in sys.stdin:
    if line.startswith("== end of part"):
        flush()
        continue
    m = re.match(r"\s*([\d,]+) \([ \d.]+%\)\s+(\S+)", line)
    if m:
        name = m.group(2).rsplit(":", 1)[-1]
        if name in symbols:
            cost[name] += int(m.group(1).replace(",", ""))
flush()
' > "$order"
echo "$(grep -c . "$order") functions in $order"
