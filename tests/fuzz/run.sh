#!/usr/bin/env bash
# Runs each fuzz target: first every committed regression input and seed once, then libFuzzer
# for SECONDS per target, growing a working corpus under build/fuzz/corpus/<target>.
# Findings (crash-*, leak-*, timeout-*) land in build/fuzz/findings/<target>/; add each one to
# tests/fuzz/regressions/<target>/ once fixed. Ends with "N passed, M failed".
# usage: tests/fuzz/run.sh SECONDS target...
set -u
cd "$(dirname "$0")/../.."
seconds=$1; shift
passed=0; failed=0; total_runs=0
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
for target in "$@"; do
  bin=build/fuzz/fuzz_$target
  work=build/fuzz/corpus/$target
  findings=build/fuzz/findings/$target
  log=build/fuzz/$target.log
  mkdir -p "$work" "$findings"
  dict=(); [ -f tests/fuzz/$target.dict ] && dict=(-dict=tests/fuzz/$target.dict)
  replay=(tests/fuzz/corpus/$target)
  [ -d tests/fuzz/regressions/$target ] && replay+=(tests/fuzz/regressions/$target)
  ok=1
  # Limits measure the input, not the machine: the replay has no wall-clock limit but a CPU-time
  # one (ulimit -t, seconds for the whole replay), and fuzzing's per-input limit is wall-clock
  # (libFuzzer has no other) set past what 20-fold contention makes of the slowest seed (1.6 s).
  if ! (ulimit -t 600; exec "$bin" -runs=0 -timeout=0 -artifact_prefix="$findings/" "${replay[@]}") >"$log" 2>&1; then
    echo "fuzz_$target: a committed seed or regression input fails (see $log)"; ok=0
  fi
  if [ $ok = 1 ] && ! "$bin" -max_total_time="$seconds" -timeout=120 -rss_limit_mb=2048 -print_final_stats=1 \
         -artifact_prefix="$findings/" "${dict[@]}" "$work" tests/fuzz/corpus/$target >>"$log" 2>&1; then
    echo "fuzz_$target: FINDING after $(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1) executions:"
    grep -m3 -E "fuzz_$target:|ERROR|runtime error|SUMMARY" "$log" | sed 's/^/  /'
    ls "$findings" | sed 's/^/  finding: /'
    ok=0
  fi
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  if [ $ok = 1 ]; then
    passed=$((passed + 1)); total_runs=$((total_runs + ${runs:-0}))
    echo "fuzz_$target: ${runs:-0} executions in ${seconds} s, no finding ($(ls "$work" | wc -l) inputs in the working corpus)"
  else
    failed=$((failed + 1))
  fi
done
echo "fuzz: $total_runs executions in total"
echo "$passed passed, $failed failed"
[ $failed = 0 ]
