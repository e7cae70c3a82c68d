#!/usr/bin/env bash
# make gpucheck: the WebGPU backend on a real GPU. Adapter and features, then passprof.js: every
# output's bits against the CPU's (wasm SIMD), the numerics probe (FMA fusion, subnormals), and
# per-pass GPU times beside each pass's longest dependent chain and gpu_model.js's estimates.
# Runs with no network given Node, the 'webgpu' package and a Vulkan loader (docs/benchmark.md).
#
#   bash tests/bench/gpucheck.sh
#
# Env: GPUCHECK_CASES (default encoder,decoder: DETR's sizes), GPUCHECK_REPS (default 10),
# GPUCHECK_BUDGET_S (default 420: the limit given to the timing step), GPUCHECK_ALLOW_SWIFTSHADER=1
# (run on SwiftShader anyway: to test this script), MSDA_WEBGPU_PKG, MSDA_DAWN_FLAGS (passprof.js; default
# disable-dawn-features=timestamp_quantization, so per-pass times are not rounded).
# Exits non-zero when there is no GPU, a bit differs from the CPU's, or the budget runs out.
set -uo pipefail
cd "$(dirname "$0")/../.."
cases=${GPUCHECK_CASES:-encoder,decoder}
reps=${GPUCHECK_REPS:-10}
budget=${GPUCHECK_BUDGET_S:-420}
pkg=${MSDA_WEBGPU_PKG:-$PWD/node_modules/webgpu}
export MSDA_WEBGPU_PKG=$pkg

echo "== machine"
uname -sr; node --version
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
case "$(ldconfig -p 2>/dev/null)" in *'libvulkan.so.1 '*) echo "libvulkan.so.1: present" ;; *) echo "libvulkan.so.1: missing (Dawn needs the Vulkan loader)" ;; esac
[ -f "$pkg/index.js" ] || { echo "gpucheck: no webgpu package at $pkg (set MSDA_WEBGPU_PKG)"; exit 1; }
[ -f dist/msda-simd.wasm ] || { echo "gpucheck: no wasm build (make wasm): the CPU side of the bit check needs it"; exit 1; }
# The NVIDIA ICD when none is chosen and one is installed.
if [ -z "${VK_ICD_FILENAMES:-}" ]; then
  for f in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json /usr/share/vulkan/icd.d/nvidia_icd.json /etc/vulkan/icd.d/nvidia_icd.json; do
    [ -f "$f" ] && export VK_ICD_FILENAMES=$f && break
  done
fi
echo "VK_ICD_FILENAMES=${VK_ICD_FILENAMES:-<loader default>}"

echo "== adapter"
timeout 60 node --input-type=module -e '
const dawn = await import(process.env.MSDA_WEBGPU_PKG + "/index.js");
const gpu = dawn.create((process.env.MSDA_DAWN_FLAGS ?? "disable-dawn-features=timestamp_quantization").split(" ").filter(Boolean));
const a = await gpu.requestAdapter({ powerPreference: "high-performance" });
if (!a) { console.log("no adapter"); process.exit(3); }
const i = a.info, f = (n) => a.features.has(n);
console.log(`${i.vendor} | ${i.architecture} | ${i.device} | ${i.description}`);
console.log(`timestamp-query ${f("timestamp-query")}, subgroups ${f("subgroups")}, shader-f16 ${f("shader-f16")}; maxStorageBufferBindingSize ${a.limits.maxStorageBufferBindingSize}`);
if (/swiftshader/i.test(`${i.architecture} ${i.device} ${i.description}`) && !process.env.GPUCHECK_ALLOW_SWIFTSHADER) {
  console.log("SwiftShader, not a GPU: stopping (GPUCHECK_ALLOW_SWIFTSHADER=1 runs it anyway)"); process.exit(4);
}' || { echo "gpucheck: no usable GPU adapter"; exit 1; }

echo "== bits against the CPU, numerics, per-pass GPU time vs the model ($reps interleaved rounds, cases $cases)"
timeout "$budget" node tests/bench/passprof.js --cases "$cases" --reps "$reps"
rc=$?
[ $rc -eq 124 ] && echo "gpucheck: past GPUCHECK_BUDGET_S=$budget s"
exit $rc
