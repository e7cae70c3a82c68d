# WebAssembly: two modules from the same library sources plus bindings/c/wasm-glue.c, one with
# SIMD128 and one scalar (no -msimd128: that flag also auto-vectorises plain loops). No
# Emscripten JS glue (Emscripten 3.1.6's breaks on Node 20): bindings/wasm/loader.js instantiates them itself.

EMCC       ?= emcc
WASM_SRC   := $(LIB_SRC) bindings/c/wasm-glue.c
WASM_DEPS  := $(WASM_SRC) $(LIB_HDR) bindings/c/problem_desc.h mk/wasm.mk $(BUILD)/wasm/emmalloc.c
WASM_EXPORTS := _malloc,_free,_msda_wasm_forward,_msda_wasm_backward,_msda_wasm_widen_half,_msda_wasm_error_message,_msda_wasm_status_name,_msda_wasm_heap_in_use,_msda_wasm_simd,_msda_wasm_heap_base,_msda_wasm_fast_dtype
# -DNDEBUG keeps assert (and its stdio/WASI imports) out; the import list is checked by a test.
WASM_FLAGS := -O3 $(CSTD) $(CWARN) -DNDEBUG -Isrc -Ibindings/c --no-entry \
              -sEXPORTED_FUNCTIONS=$(WASM_EXPORTS) -sALLOW_MEMORY_GROWTH=1 -sMAXIMUM_MEMORY=4GB \
              -sMALLOC=none -sERROR_ON_UNDEFINED_SYMBOLS=1

# Emscripten's emmalloc (3.1.6) with two fixes (tests/js/limits.test.js):
# - its fit test `payloadStartPtrAligned + size > payloadEndPtr` wraps past 2^32 for requests
#   near 4 GiB and then hands out a block the memory does not hold: rewritten as a subtraction;
# - it grows the heap by the whole request even when a free region ends at the top, so after a
#   2 GiB block is freed 2.1 GiB cannot be had: it claims only the difference
#   (bindings/c/emmalloc-fix.c, appended to the file).
# The build stops if either line is not there. -sMALLOC=none also drops sbrk, which comes with
# the allocator: it is built here from its source.
EMSCRIPTEN_LIB ?= $(shell em-config EMSCRIPTEN_ROOT 2>/dev/null)/system/lib
EMMALLOC_SRC := $(EMSCRIPTEN_LIB)/emmalloc.c
EMMALLOC_FLAGS := -O3 -DNDEBUG -fno-builtin
EMMALLOC_FIT := if (payloadStartPtrAligned + size > payloadEndPtr)
EMMALLOC_CLAIM := size_t numBytesToClaim = size+sizeof(Region)\*3;

$(BUILD)/wasm/emmalloc.c: $(EMMALLOC_SRC) bindings/c/emmalloc-fix.c mk/wasm.mk
	@mkdir -p $(dir $@)
	@grep -qF '$(EMMALLOC_FIT)' $< && grep -q '$(EMMALLOC_CLAIM)' $< || { echo "mk/wasm.mk: $< is not the emmalloc this build patches" >&2; exit 1; }
	{ sed -e 's/$(EMMALLOC_FIT)/if (payloadStartPtrAligned > payloadEndPtr || size > (size_t)(payloadEndPtr - payloadStartPtrAligned))/' \
	      -e 's/$(EMMALLOC_CLAIM)/size_t msda_emmalloc_claim_size(size_t); size_t numBytesToClaim = msda_emmalloc_claim_size(size+sizeof(Region)*3);/' $<; \
	  cat bindings/c/emmalloc-fix.c; } > $@
	@test $$(grep -c 'msda_emmalloc_claim_size\|payloadStartPtrAligned > payloadEndPtr ||' $@) -eq 4

$(BUILD)/wasm/emmalloc.o: $(BUILD)/wasm/emmalloc.c $(EMSCRIPTEN_LIB)/sbrk.c
	$(EMCC) $(EMMALLOC_FLAGS) -c $< -o $@
	$(EMCC) $(EMMALLOC_FLAGS) -c $(EMSCRIPTEN_LIB)/sbrk.c -o $(BUILD)/wasm/sbrk.o

# The threads module links objects built with atomics (a shared memory requires it).
$(BUILD)/wasm/emmalloc-threads.o: $(BUILD)/wasm/emmalloc.c $(EMSCRIPTEN_LIB)/sbrk.c
	$(EMCC) $(EMMALLOC_FLAGS) -matomics -mbulk-memory -c $< -o $@
	$(EMCC) $(EMMALLOC_FLAGS) -matomics -mbulk-memory -c $(EMSCRIPTEN_LIB)/sbrk.c -o $(BUILD)/wasm/sbrk-threads.o

wasm: $(DIST)/msda-simd.wasm $(DIST)/msda-scalar.wasm

$(DIST)/msda-simd.wasm: $(WASM_DEPS) $(BUILD)/wasm/emmalloc.o | $(DIST)
	$(EMCC) $(WASM_FLAGS) -msimd128 $(WASM_SRC) $(BUILD)/wasm/emmalloc.o $(BUILD)/wasm/sbrk.o -o $@

$(DIST)/msda-scalar.wasm: $(WASM_DEPS) $(BUILD)/wasm/emmalloc.o | $(DIST)
	$(EMCC) $(WASM_FLAGS) $(WASM_SRC) $(BUILD)/wasm/emmalloc.o $(BUILD)/wasm/sbrk.o -o $@

$(DIST):
	mkdir -p $@
