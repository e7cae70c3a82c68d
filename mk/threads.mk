# Threads (docs/threads.md). Native: the pool in src/pool.c uses POSIX threads; -pthread
# makes that link on every libc (glibc >= 2.34 would not need it). tests/c/test_threads.c runs
# in test-c like every C test.
CFLAGS += -pthread

# Wasm: a third module, SIMD on a shared imported memory (atomics, bulk memory), built from the
# same sources as mk/wasm.mk's with MSDA_WASM_THREADS: its msda__run hands the parts to
# bindings/wasm/threads.js (env.msda_wasm_run_parallel) and each worker calls msda_wasm_run_part.
# No Emscripten pthreads: that needs its JS glue, broken on Node 20 here. The memory limits must
# match INITIAL_PAGES/MAXIMUM_PAGES in bindings/wasm/threads.js.
THREADS_WASM := $(DIST)/msda-simd-threads.wasm
THREADS_WASM_DEPS := $(LIB_SRC) $(LIB_HDR) bindings/c/wasm-glue.c bindings/c/problem_desc.h \
                     bindings/c/threads-imports.js mk/threads.mk mk/wasm.mk

wasm: $(THREADS_WASM)

$(THREADS_WASM): $(THREADS_WASM_DEPS) $(BUILD)/wasm/emmalloc-threads.o | $(DIST)
	$(EMCC) $(WASM_FLAGS) -sEXPORTED_FUNCTIONS=$(WASM_EXPORTS),_msda_wasm_run_part \
	  -msimd128 -matomics -mbulk-memory -DMSDA_WASM_THREADS \
	  -sIMPORTED_MEMORY=1 -sINITIAL_MEMORY=16MB -Wl,--shared-memory \
	  --js-library bindings/c/threads-imports.js $(WASM_SRC) $(BUILD)/wasm/emmalloc-threads.o $(BUILD)/wasm/sbrk-threads.o -o $@
