# WebAssembly: two modules from the same library sources plus bindings/wasm/glue.c, one with
# SIMD128 and one scalar (no -msimd128: that flag also auto-vectorises plain loops). No
# Emscripten JS glue: bindings/loader.js instantiates them itself (see TOOLCHAIN.md).

EMCC       ?= emcc
WASM_SRC   := $(LIB_SRC) bindings/wasm/glue.c
WASM_DEPS  := $(WASM_SRC) $(LIB_HDR) bindings/wasm/problem_desc.h mk/wasm.mk
WASM_EXPORTS := _malloc,_free,_msda_wasm_forward,_msda_wasm_backward,_msda_wasm_error_message,_msda_wasm_status_name,_msda_wasm_heap_in_use,_msda_wasm_simd
# -DNDEBUG keeps assert (and its stdio/WASI imports) out; the import list is checked by a test.
WASM_FLAGS := -O3 $(CSTD) $(CWARN) -DNDEBUG -Isrc -Ibindings/wasm --no-entry \
              -sEXPORTED_FUNCTIONS=$(WASM_EXPORTS) -sALLOW_MEMORY_GROWTH=1 -sMAXIMUM_MEMORY=4GB \
              -sMALLOC=emmalloc -sERROR_ON_UNDEFINED_SYMBOLS=1

wasm: $(DIST)/msda-simd.wasm $(DIST)/msda-scalar.wasm

$(DIST)/msda-simd.wasm: $(WASM_DEPS) | $(DIST)
	$(EMCC) $(WASM_FLAGS) -msimd128 $(WASM_SRC) -o $@

$(DIST)/msda-scalar.wasm: $(WASM_DEPS) | $(DIST)
	$(EMCC) $(WASM_FLAGS) $(WASM_SRC) -o $@

$(DIST):
	mkdir -p $@
