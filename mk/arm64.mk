# arm64: the library (NEON, the arm64 baseline: no -march), the CLI, the C tests and the
# bit-equality program cross-compiled for aarch64 with the project's flags, linked statically
# and run under qemu-user (tests/c/arm64.sh). Emulated: it proves results, never speed.
ARM64       := $(BUILD)/arm64
ifeq ($(shell uname -m),aarch64)   # on an arm64 machine: its own compiler, run natively
ARM64_CC    ?= $(CC)
ARM64_AR    ?= $(AR)
ARM64_RUN   ?=
else
ARM64_CC    ?= aarch64-linux-gnu-gcc
ARM64_AR    ?= aarch64-linux-gnu-ar
ARM64_RUN   ?= qemu-aarch64
endif
ARM64_FLAGS := -O3 $(CSTD) $(CWARN) -pthread

ARM64_OBJ   := $(patsubst src/%.c,$(ARM64)/obj/%.o,$(LIB_SRC))
ARM64_TESTS := $(patsubst tests/c/%.c,$(ARM64)/tests/%,$(wildcard tests/c/test_*.c))
# Static, so qemu needs no library path; but test_threads interposes pthread_create through
# dlsym, which needs the dynamic loader: qemu finds it under ARM64_SYSROOT (QEMU_LD_PREFIX).
ARM64_SYSROOT ?= /usr/aarch64-linux-gnu
ARM64_LINK    := -static
$(ARM64)/tests/test_threads: ARM64_LINK :=

$(ARM64)/obj/%.o: src/%.c $(LIB_HDR)
	@mkdir -p $(dir $@)
	$(ARM64_CC) $(ARM64_FLAGS) -c $< -o $@

$(ARM64)/libmsda.a: $(ARM64_OBJ)
	rm -f $@
	$(ARM64_AR) rcs $@ $^

# The CLI library (mk/cli.mk), which msda and the tests that need it link, as natively.
$(ARM64)/cli-obj/%.o: src/cli/%.c $(CLI_HDR) $(LIB_HDR)
	@mkdir -p $(dir $@)
	$(ARM64_CC) $(ARM64_FLAGS) -Isrc -Isrc/cli -c $< -o $@

$(ARM64)/libmsdacli.a: $(patsubst src/cli/%.c,$(ARM64)/cli-obj/%.o,$(CLI_LIB_SRC))
	rm -f $@
	$(ARM64_AR) rcs $@ $^

$(ARM64)/msda: src/cli/main.c $(CLI_HDR) $(LIB_HDR) $(ARM64)/libmsdacli.a $(ARM64)/libmsda.a mk/cli.mk package.json
	$(ARM64_CC) $(ARM64_FLAGS) $(CLI_DEFS) -static -Isrc -Isrc/cli src/cli/main.c $(ARM64)/libmsdacli.a $(ARM64)/libmsda.a $(CLI_LDLIBS) -o $@

$(ARM64)/tests/%: tests/c/%.c $(C_TEST_SUPPORT) $(wildcard tests/c/*.h) $(ARM64)/libmsda.a
	@mkdir -p $(dir $@)
	$(ARM64_CC) $(ARM64_FLAGS) $(ARM64_LINK) -Isrc -Isrc/cli -Itests/c $< $(C_TEST_SUPPORT) $(ARM64_TEST_LIBS) $(ARM64)/libmsda.a -lm -o $@
$(patsubst %,$(ARM64)/tests/%,test_npy $(CLI_TESTS)): $(ARM64)/libmsdacli.a $(CLI_HDR) tests/c/cli_run.c
$(ARM64)/tests/test_npy: ARM64_TEST_LIBS := $(ARM64)/libmsdacli.a
$(patsubst %,$(ARM64)/tests/%,$(CLI_TESTS)): ARM64_TEST_LIBS := tests/c/cli_run.c $(ARM64)/libmsdacli.a

$(ARM64)/isa_hashes: $(ISA_SRC) $(wildcard tests/c/*.h) $(ARM64)/libmsda.a
	$(ARM64_CC) $(ARM64_FLAGS) -static -Isrc -Itests/c $(ISA_SRC) $(ARM64)/libmsda.a -lm -o $@

# The C tests under qemu (the CLI they spawn too), then the arm64 ISAs (neon, scalar) against the
# wasm SIMD and scalar builds on test-isa's problems, forced by argument and by MSDA_ISA.
.PHONY: test-arm64
test-arm64: $(ARM64_TESTS) $(ARM64)/msda $(ARM64)/isa_hashes $(ISA_DIR)/isa_hashes_simd.js $(ISA_DIR)/isa_hashes_scalar.js
	@ARM64_RUN='$(ARM64_RUN)' QEMU_LD_PREFIX='$(ARM64_SYSROOT)' tests/c/arm64.sh $(ARM64) $(ISA_DIR)/isa_hashes_simd.js $(ISA_DIR)/isa_hashes_scalar.js $(ARM64_TESTS)

TEST_SUITES += test-arm64
TEST_BUILD  += $(ARM64_TESTS) $(ARM64)/msda $(ARM64)/isa_hashes
