#!/usr/bin/env bash
# arm64 under qemu-user (make test-arm64): the aarch64 builds of the C tests (the CLI they spawn
# too; the dynamically linked test_threads finds its loader through QEMU_LD_PREFIX), then tests/c/isa_bits.sh on the aarch64 isa_hashes (neon and scalar forced one by one,
# against the wasm SIMD build's lines), then the choice itself: msda_isa() is "neon" by default,
# MSDA_ISA=scalar / neon select those with the same bits, one arm64 lacks is refused.
# Each part ends with "N passed, M failed".
# usage: ARM64_RUN=qemu-aarch64 tests/c/arm64.sh ARM64_DIR WASM_SIMD_JS WASM_SCALAR_JS TEST...
set -u
arm=$1; simd_js=$2; scalar_js=$3; shift 3
run=${ARM64_RUN-qemu-aarch64}   # empty: an arm64 machine runs them itself
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
status=0

# Every binary must be aarch64 (ELF e_machine 183), so that no x86 build passes here by mistake.
for f in "$arm/msda" "$arm/isa_hashes" "$@"; do
  [ "$(od -An -tx1 -j18 -N2 "$f" | tr -d ' ')" = b700 ] || { echo "arm64: FAIL: $f is not an aarch64 program"; exit 1; }
done
# test_cli spawns $MSDA_CLI and isa_bits.sh runs its program directly: both get a wrapper running
# them under $run.
for p in msda isa_hashes; do
  printf '#!/bin/sh\nexec %s %q "$@"\n' "$run" "$(realpath "$arm/$p")" > "$tmp/$p"
  chmod +x "$tmp/$p"
done

# qemu-user 7.2 aborts in a fork() of a threaded process: test_threads skips its two fork checks
for t in "$@"; do
  echo "== $t (aarch64, ${run:-native})"
  env MSDA_CLI="$tmp/msda" ${run:+MSDA_TEST_NO_FORK=1} $run "$t" || { echo "arm64: FAIL: $t exited $?"; status=1; }
done

echo "== tests/c/isa_bits.sh on $arm/isa_hashes (aarch64, ${run:-native})"
tests/c/isa_bits.sh "$tmp/isa_hashes" "$simd_js" "$scalar_js" || status=1

echo "== the ISA choice on arm64 (MSDA_ISA)"
passed=0; failed=0
check() {   # check WHAT GOT EXPECTED
  if [ "$2" = "$3" ]; then passed=$((passed + 1))
  else echo "arm64: FAIL: $1: got '$2', expected '$3'"; failed=$((failed + 1)); fi
}
node --no-experimental-fetch "$simd_js" > "$tmp/wasm-simd" || { echo "arm64: the wasm SIMD build failed"; exit 1; }
check "isa_hashes --list" "$("$tmp/isa_hashes" --list)" "scalar neon"
check "msda_isa() with MSDA_ISA unset" "$(env -u MSDA_ISA "$tmp/isa_hashes" --isa)" neon
for isa in scalar neon; do
  check "msda_isa() with MSDA_ISA=$isa" "$(MSDA_ISA=$isa "$tmp/isa_hashes" --isa)" "$isa"
  MSDA_ISA=$isa "$tmp/isa_hashes" default > "$tmp/env-$isa"
  if cmp -s "$tmp/wasm-simd" "$tmp/env-$isa"; then
    echo "arm64: MSDA_ISA=$isa = wasm-simd on all $(wc -l < "$tmp/env-$isa") problems"; passed=$((passed + 1))
  else
    echo "arm64: FAIL: MSDA_ISA=$isa differs from wasm-simd:"; diff "$tmp/wasm-simd" "$tmp/env-$isa" | head -6
    failed=$((failed + 1))
  fi
done
check "msda_isa() with MSDA_ISA=sse2" "$(MSDA_ISA=sse2 "$tmp/isa_hashes" --isa)" "(none)"
check "a call with MSDA_ISA=sse2" "$(MSDA_ISA=sse2 "$tmp/isa_hashes" default | head -1)" \
  "random 0 refused: MSDA_ISA is 'sse2', expected one of this CPU's: scalar neon (or unset)"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] || status=1
exit $status
