# The WebGPU backend (bindings/webgpu/): its tests and its benchmark. Dawn for Node (the
# 'webgpu' package, an optional peer and a dev dependency) needs a Vulkan loader (libvulkan1, scripts/setup.sh) and a driver: SwiftShader,
# the one Debian's Chromium ships, unless VK_ICD_FILENAMES already names another (a real GPU's).

WEBGPU_ICD ?= /usr/lib/chromium/vk_swiftshader_icd.json
WEBGPU_ENV = VK_ICD_FILENAMES="$${VK_ICD_FILENAMES:-$(WEBGPU_ICD)}"
WEBGPU_TESTS = $(sort $(wildcard tests/webgpu/*.test.js))

.PHONY: test-webgpu bench-webgpu
test-webgpu: wasm
	$(WEBGPU_ENV) node --test --test-concurrency=1 $(WEBGPU_TESTS)

TEST_SUITES += test-webgpu

# One interleaved run: ours against onnxruntime-web (PyTorch's exported graph, a GridSample graph) and,
# with BENCH_WEBGPU_ARGS=--with-tfjs, tfjs; the targets' ratios; our per-pass GPU times beside the
# cost model (tests/bench/webgpu_bench.js says the options: --cases, --reps, --json); then the
# backward where every sample crowds one place against the same problem spread (webgpu_crowd.js).
bench-webgpu: wasm
	$(WEBGPU_ENV) node tests/bench/webgpu_bench.js $(BENCH_WEBGPU_ARGS)
	$(WEBGPU_ENV) node tests/bench/webgpu_crowd.js

# The GPU check (tests/bench/gpucheck.sh, docs/benchmark.md): bits against the CPU, numerics and
# per-pass times beside the cost model, on the GPU VK_ICD_FILENAMES names (it refuses SwiftShader
# unless GPUCHECK_ALLOW_SWIFTSHADER=1).
.PHONY: gpucheck
gpucheck: wasm
	bash tests/bench/gpucheck.sh
