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

# Then the per-pass GPU times beside the cost model (tests/bench/passprof.js), SwiftShader's sizes
# unless PASSPROF_CASES says (encoder,decoder on a GPU).
PASSPROF_CASES ?= encoder/8,decoder/8
bench-webgpu: wasm
	$(WEBGPU_ENV) node tests/bench/webgpu_bench.js
	$(WEBGPU_ENV) node tests/bench/passprof.js --cases $(PASSPROF_CASES) --reps $${MSDA_BENCH_REPS:-1}

# The GPU check (tests/bench/gpucheck.sh, docs/benchmark.md): bits against the CPU, numerics and
# per-pass times beside the cost model, on the GPU VK_ICD_FILENAMES names (it refuses SwiftShader
# unless GPUCHECK_ALLOW_SWIFTSHADER=1).
.PHONY: gpucheck
gpucheck: wasm
	bash tests/bench/gpucheck.sh
