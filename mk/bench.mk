# Benchmark: `make bench` builds what it measures and runs tests/bench/bench.js and tests/bench/isa.js
# (the tables; add BENCH_ARGS=--json for JSON lines). `make kernel-bench` is the C microbenchmark of the kernels
# alone (native, wasm SIMD, wasm scalar), for tuning without the JS layer; its output hashes
# must agree across the three builds (BENCH_ARGS="--config encoder --repeats 3", etc.).

BENCH := $(BUILD)/bench

# The lower-bound probe (tests/bench/probe.c): its passes built once per ISA with that ISA's
# flags and vector width, as the kernels are; at run time it takes the ISA the library runs
# (msda_isa(), so MSDA_ISA picks it too). The wasm one is built with the kernels' wasm flags.
# The kernel's code-generation flags (mk/wasm.mk), without its warnings or link options.
BENCH_WASM_CFLAGS := -O3 $(CSTD) -DNDEBUG -msimd128
# The probe prints through Emscripten's glue, which needs acorn from Debian's node modules.
BENCH_EMCC = NODE_PATH=/usr/share/nodejs $(EMCC)
# F16C with AVX2 and AVX-512, as the library's kernel files have it (simd.h widens float16 with it).
PROBE_HDR := tests/bench/probe.h tests/bench/probe_body.h src/simd.h
PROBE_FLAGS_base   :=
PROBE_FLAGS_avx2   := -mavx2 -mf16c -DMSDA_VW=8
PROBE_FLAGS_avx512 := -mavx512f -mf16c -DMSDA_VW=16
PROBE_ISAS := base $(if $(filter x86_64 i686,$(shell uname -m)),avx2 avx512)

.PHONY: bench bench-build kernel-bench split-sim backward-parts

# Emscripten's glue is CommonJS; the package is "type": "module", so build/bench says otherwise.
$(BENCH)/package.json:
	@mkdir -p $(dir $@)
	echo '{"type": "commonjs"}' > $@

$(BENCH)/probe_%.o: tests/bench/probe_isa.c $(PROBE_HDR) mk/bench.mk
	@mkdir -p $(dir $@)
	$(CC) -O3 $(CSTD) $(CWARN) $(PROBE_FLAGS_$*) -DPROBE_ISA=$* -Isrc -Itests/bench -c $< -o $@

$(BENCH)/limit_probe: tests/bench/probe.c $(patsubst %,$(BENCH)/probe_%.o,$(PROBE_ISAS)) $(NATIVE)/libmsda.a
	$(CC) -O3 $(CSTD) $(CWARN) -Isrc -Itests/bench $(filter %.c %.o %.a,$^) -lm -o $@

$(BENCH)/limit_probe.js: tests/bench/probe.c tests/bench/probe_isa.c $(PROBE_HDR) $(LIB_SRC) $(LIB_HDR) mk/bench.mk $(BENCH)/package.json
	$(BENCH_EMCC) $(BENCH_WASM_CFLAGS) -DPROBE_ISA=base -Isrc -Itests/bench -sALLOW_MEMORY_GROWTH -sINITIAL_MEMORY=64MB \
	  tests/bench/probe.c tests/bench/probe_isa.c $(LIB_SRC) -o $@

# The memory-floor probe (tests/bench/probe_walk.c): the kernels' own row reads replayed, in
# their order, on the bench configs; AVX2's flags natively on x86-64 (the library's default ISA
# there), the kernel's in wasm.
$(BENCH)/walk_probe: tests/bench/probe_walk.c $(LIB_HDR) $(NATIVE)/libmsda.a mk/bench.mk
	@mkdir -p $(dir $@)
	$(CC) -O3 $(CSTD) $(CWARN) $(if $(filter avx2,$(PROBE_ISAS)),$(PROBE_FLAGS_avx2)) -Isrc tests/bench/probe_walk.c \
	  $(NATIVE)/libmsda.a -lm -pthread -o $@
$(BENCH)/walk_probe.js: tests/bench/probe_walk.c $(LIB_SRC) $(LIB_HDR) mk/bench.mk $(BENCH)/package.json
	$(BENCH_EMCC) $(BENCH_WASM_CFLAGS) -Isrc -sALLOW_MEMORY_GROWTH tests/bench/probe_walk.c $(LIB_SRC) -o $@

bench-build: native wasm $(BENCH)/limit_probe.js $(BENCH)/limit_probe $(BENCH)/kernel_bench $(BENCH)/kernel_bench_simd.js \
  $(BENCH)/walk_probe $(BENCH)/walk_probe.js $(BENCH)/backward_parts

# bench.js: the backends through the JS API; then isa.js: the native kernels on every ISA this
# CPU has, each against its own probe (and wasm SIMD against the wasm probe), in one run.
bench: bench-build
	node tests/bench/bench.js $(BENCH_ARGS)
	node tests/bench/isa.js $(BENCH_ARGS)
	@echo "Native threads beside their ceiling (two 1-thread processes at the same moment), and the work P parts do:"
	$(BENCH)/backward_parts pair --config encoder --pass both
	$(BENCH)/backward_parts pair --config encoder --value-layout bnlc
	$(BENCH)/backward_parts pair --config decoder --pass both --rounds 20
	$(BENCH)/backward_parts work --config encoder --pass both
	$(BENCH)/backward_parts work --config decoder --pass both

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

# Backward thread scaling on paper (tests/bench/split_sim.c): each unit timed alone, then the
# slowest thread's share for 1 .. 32 threads (BENCH_ARGS: other thread counts).
$(BENCH)/split_sim: tests/bench/split_sim.c $(NATIVE)/libmsda.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -pthread -Isrc $< $(NATIVE)/libmsda.a -lm -o $@
split-sim: $(BENCH)/split_sim
	$(BENCH)/split_sim $(BENCH_ARGS)

# Where a backward's threads go (tests/bench/backward_parts.c): `work`, the summed time of P parts
# run one after another against one part; `pair`, 2 threads against 1 beside two 1-thread
# processes at once (BENCH_ARGS: its arguments, e.g. "pair --config encoder-shuffled --rounds 10").
$(BENCH)/backward_parts: tests/bench/backward_parts.c $(NATIVE)/libmsda.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -pthread -Isrc $< $(NATIVE)/libmsda.a -lm -o $@
backward-parts: $(BENCH)/backward_parts
	$(BENCH)/backward_parts $(or $(BENCH_ARGS),work)
