#!/usr/bin/env bash
# Same bits on every ISA: the hash lines of tests/c/isa_hashes.c from every ISA this CPU has
# (the native library forced to each in turn) and from the wasm SIMD and wasm scalar builds of
# the same program must be identical. Ends with "N passed, M failed" (one per build compared).
# usage: tests/c/isa_bits.sh NATIVE_BINARY WASM_SIMD_JS WASM_SCALAR_JS
set -u
native=$1; simd_js=$2; scalar_js=$3
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
node --no-experimental-fetch "$simd_js" > "$dir/wasm-simd" || { echo "isa_bits: the wasm SIMD build failed"; exit 1; }
lines=$(wc -l < "$dir/wasm-simd")
passed=0; failed=0
runs=("wasm-scalar")
for isa in $("$native" --list); do runs+=("$isa"); done
for run in "${runs[@]}"; do
  if [ "$run" = wasm-scalar ]; then node --no-experimental-fetch "$scalar_js" > "$dir/$run"
  else "$native" "$run" > "$dir/$run"; fi
  if cmp -s "$dir/wasm-simd" "$dir/$run"; then
    echo "isa_bits: $run = wasm-simd on all $lines problems"; passed=$((passed + 1))
  else
    echo "isa_bits: FAIL: $run differs from wasm-simd:"; diff "$dir/wasm-simd" "$dir/$run" | head -6; failed=$((failed + 1))
  fi
done
grep -q refused "$dir/wasm-simd" && { echo "isa_bits: FAIL: a problem was refused"; failed=$((failed + 1)); }
grep -q '!=' "$dir/wasm-simd" && { echo "isa_bits: FAIL: a half-precision value's outputs differ from the float32 call's"; grep '!=' "$dir/wasm-simd" | head -3; failed=$((failed + 1)); }
[ "$(grep -c ' f16 [0-9a-f]*= bf16 [0-9a-f]*=$' "$dir/wasm-simd")" -eq "$lines" ] || { echo "isa_bits: FAIL: not every problem ran with half-precision values"; failed=$((failed + 1)); }
[ "$lines" -ge 80 ] || { echo "isa_bits: FAIL: only $lines problems ran"; failed=$((failed + 1)); }
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
