#!/usr/bin/env bash
# Runs test suites (make targets) JOBS at a time, in the order given (longest first keeps both
# cores busy to the end). Each suite's output goes to build/logs/SUITE.log and is printed whole
# when the suite ends, then appended to build/test.log, whose counts make the closing total
# (scripts/test-summary.sh). Every suite runs even after one fails; exits 1 if any failed.
# What the suites need is built before (make test-build), so no two suites build the same file.
# usage: scripts/run-suites.sh JOBS SUITE...
set -uo pipefail
cd "$(dirname "$0")/.."
jobs=$1; shift
mkdir -p build/logs
: > build/test.log
: > build/logs/times
failed=()
declare -A started pid_of

finish() {   # $1: suite, $2: exit status
  local s=$1 rc=$2 secs=$(( $(date +%s) - started[$1] ))
  cat "build/logs/$s.log"
  cat "build/logs/$s.log" >> build/test.log
  if [ "$rc" -eq 0 ]; then echo "== $s: passed in ${secs} s"; else echo "== $s: FAILED (exit $rc) after ${secs} s"; failed+=("$s"); fi
  printf '%-20s %5d s  %s\n' "$s" "$secs" "$([ "$rc" -eq 0 ] && echo passed || echo FAILED)" >> build/logs/times
}

running=0
for s in "$@"; do
  if [ "$running" -ge "$jobs" ]; then
    wait -n -p done_pid; rc=$?
    for k in "${!pid_of[@]}"; do [ "${pid_of[$k]}" = "$done_pid" ] && { unset "pid_of[$k]"; finish "$k" "$rc"; }; done
    running=$((running - 1))
  fi
  echo "== $s: started"
  started[$s]=$(date +%s)
  make --no-print-directory "$s" > "build/logs/$s.log" 2>&1 &
  pid_of[$s]=$!
  running=$((running + 1))
done
while [ "$running" -gt 0 ]; do
  wait -n -p done_pid; rc=$?
  for k in "${!pid_of[@]}"; do [ "${pid_of[$k]}" = "$done_pid" ] && { unset "pid_of[$k]"; finish "$k" "$rc"; }; done
  running=$((running - 1))
done

echo "== time per suite (wall clock, $jobs at a time):"
cat build/logs/times
if [ ${#failed[@]} -gt 0 ]; then echo "make test: FAILED: ${failed[*]}"; exit 1; fi
