# Benchmark: `make bench` builds what it measures and runs tests/bench.js (the table; add
# BENCH_ARGS=--json for JSON lines). `make kernel-bench` is the C microbenchmark of the kernels
# alone (native, wasm SIMD, wasm scalar), for tuning without the JS layer; its output hashes
# must agree across the three builds (BENCH_ARGS="--config encoder --repeats 3", etc.).

BENCH := $(BUILD)/bench

# The lower-bound probe lives beside the project (../shared, as in CI); MSDA_LIMIT_PROBE overrides.
MSDA_LIMIT_PROBE ?= $(abspath $(CURDIR)/../shared/bench/limit_probe.c)
# The kernel's code-generation flags (mk/wasm.mk), without its warnings or link options.
BENCH_WASM_CFLAGS := -O3 $(CSTD) -DNDEBUG -msimd128
# The probe prints through Emscripten's glue, which needs acorn from Debian's node modules.
BENCH_EMCC := NODE_PATH=/usr/share/nodejs $(EMCC)

.PHONY: bench bench-build kernel-bench

# Emscripten's glue is CommonJS; the package is "type": "module", so build/bench says otherwise.
$(BENCH)/package.json:
	@mkdir -p $(dir $@)
	echo '{"type": "commonjs"}' > $@

ifeq ($(wildcard $(MSDA_LIMIT_PROBE)),)
PROBE_MISSING := probe-missing
.PHONY: probe-missing
probe-missing:
	@echo "mk/bench.mk: limit probe not found at $(MSDA_LIMIT_PROBE) (expected ../shared/bench/limit_probe.c beside the repository; set MSDA_LIMIT_PROBE=path)" >&2; exit 1
else
$(BENCH)/limit_probe.js: $(MSDA_LIMIT_PROBE) mk/bench.mk $(BENCH)/package.json
	$(BENCH_EMCC) $(BENCH_WASM_CFLAGS) -D_POSIX_C_SOURCE=199309L -sALLOW_MEMORY_GROWTH -sINITIAL_MEMORY=64MB $< -o $@

$(BENCH)/limit_probe: $(MSDA_LIMIT_PROBE) mk/bench.mk
	@mkdir -p $(dir $@)
	$(CC) -O3 $(CSTD) -D_POSIX_C_SOURCE=199309L $< -lm -o $@
endif

bench-build: $(PROBE_MISSING) native wasm $(BENCH)/limit_probe.js $(BENCH)/limit_probe

bench: bench-build
	node tests/bench.js $(BENCH_ARGS)

# C microbenchmark: the same configs through the C API; prints a hash of the outputs so the
# three builds can be compared bit for bit.
KB_SRC := tests/bench/kernel_bench.c $(LIB_SRC)
$(BENCH)/kernel_bench: $(KB_SRC) $(LIB_HDR) mk/bench.mk
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -pthread -Isrc $(KB_SRC) -lm -o $@
$(BENCH)/kernel_bench_simd.js: $(KB_SRC) $(LIB_HDR) mk/bench.mk $(BENCH)/package.json
	$(BENCH_EMCC) $(BENCH_WASM_CFLAGS) -Isrc -sALLOW_MEMORY_GROWTH $(KB_SRC) -o $@
$(BENCH)/kernel_bench_scalar.js: $(KB_SRC) $(LIB_HDR) mk/bench.mk $(BENCH)/package.json
	$(BENCH_EMCC) $(filter-out -msimd128,$(BENCH_WASM_CFLAGS)) -Isrc -sALLOW_MEMORY_GROWTH $(KB_SRC) -o $@

kernel-bench: $(BENCH)/kernel_bench $(BENCH)/kernel_bench_simd.js $(BENCH)/kernel_bench_scalar.js
	@echo "native:";      $(BENCH)/kernel_bench $(BENCH_ARGS)
	@echo "wasm SIMD:";   node --no-experimental-fetch --no-liftoff $(BENCH)/kernel_bench_simd.js $(BENCH_ARGS)
	@echo "wasm scalar:"; node --no-experimental-fetch --no-liftoff $(BENCH)/kernel_bench_scalar.js $(BENCH_ARGS)
