#!/usr/bin/env bash
# The CUDA checks on a GPU host, from binaries built on another machine (the host needs no
# Rust): the CUDA test suites, compute-sanitizer's memcheck and racecheck over the op suite,
# and `eddy bench --device cuda` beside `compare/torch_bench.py --device cuda`, alternating.
# Each step runs under its own time limit; everything is written to two files in $OUT (or
# ./gpu-logs): check.log and bench.jsonl (one JSON report a line, each tagged).
#
# Build and copy the binaries (see the book's testing chapter), then, on the GPU host:
#   benches/gpu-check.sh gpu-bin [ROUNDS] [SECONDS]
# A step that would pass SECONDS (default 480) from the start is cut short or skipped, and
# says so: the order puts the tests first, then one round of benchmarks, then the rest.
set -uo pipefail
bin=${1:-gpu-bin}
rounds=${2:-2}
budget=${3:-480}
out=${OUT:-gpu-logs}
mkdir -p "$out"
log="$out/check.log"
: > "$log"
nvrtc=$(find / -name 'libnvrtc.so*' -not -path '*/proc/*' 2>/dev/null | head -1)
export LD_LIBRARY_PATH="$(dirname "${nvrtc:-/}")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
nvidia-smi -L >> "$log" 2>&1
one() { ls "$bin"/$1 2>/dev/null | head -1; }
cuda=$(one 'cuda-*')
fault=$(one 'cuda_fault-*')
diff=$(one 'tensor_differential-*')
step() {
  local name=$1 limit=$2
  shift 2
  local left=$((budget - SECONDS))
  if [ "$left" -lt 10 ]; then
    echo "== $name: skipped, the time is spent" >> "$log"
    return
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  echo "== $name (limit ${limit}s)" >> "$log"
  local t0=$SECONDS
  timeout "$limit" "$@" >> "$log" 2>&1
  echo "== $name: exit $? after $((SECONDS - t0)) s" >> "$log"
}
keys=dispatch_small_ns_per_op,dispatch_mixed_ns_per_op,chain_graph_ns_per_op,add_large_gbps,copy_large_gbps,matmul_4096_f16_tflops,matmul_4096_bf16_tflops,mlp_train_ms_per_step,mlp_infer_us_per_fwd
bench() {
  local r=$1 who line left=$((budget - SECONDS))
  for who in eddy torch; do
    left=$((budget - SECONDS))
    if [ "$left" -lt 30 ]; then
      echo "== bench $who round $r: skipped, the time is spent" >> "$log"
      continue
    fi
    echo "== bench $who round $r" >> "$log"
    if [ $who = eddy ]; then
      line=$(timeout "$left" "$bin/eddy" bench --device cuda --json --only "$keys" 2>> "$log" | tr -d '\n')
    else
      line=$(timeout "$left" python3 compare/torch_bench.py --device cuda --only "$keys" 2>> "$log" | tr -d '\n')
    fi
    echo "{\"who\": \"$who\", \"round\": $r, \"report\": ${line:-null}}" >> "$out/bench.jsonl"
  done
}
step "cuda suite" 150 "$cuda" --test-threads=1 --nocapture
step "device fault" 40 "$fault" --nocapture
step "device fault, blocking launches" 40 env EDDY_LAUNCH_BLOCKING=1 "$fault"
bench 1
step "random programs, cpu against cuda" 100 "$diff" cuda --test-threads=1
sanitize="every_op_with_a_cuda_kernel_matches_the_cpu"
step "memcheck" 90 compute-sanitizer --tool memcheck --error-exitcode 9 "$cuda" "$sanitize" --test-threads=1
step "racecheck" 90 compute-sanitizer --tool racecheck --error-exitcode 9 "$cuda" "$sanitize" --test-threads=1
for r in $(seq 2 "$rounds"); do
  bench "$r"
done
echo "== done after $SECONDS s" >> "$log"
