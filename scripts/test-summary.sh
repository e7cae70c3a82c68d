#!/usr/bin/env bash
# Adds up the per-suite counts in a `make test` log: C runners print "N passed, N failed",
# node --test prints "# pass N" / "# fail N". Prints one closing total; exits 1 on any failure.
set -euo pipefail
log=$1
read -r passed failed < <(awk '
  /^([A-Za-z-]+: )?[0-9]+ passed, [0-9]+ failed/ { sub(/^[A-Za-z-]+: /, ""); p += $1; f += $3 }
  /^# pass [0-9]+$/ { p += $3 }
  /^# fail [0-9]+$/ { f += $3 }
  END { print p + 0, f + 0 }' "$log")
echo "total: $passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
