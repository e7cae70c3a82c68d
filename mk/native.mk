# Native build: the static library, the command line, and the C test suites.

LIB_OBJ := $(patsubst src/%.c,$(NATIVE)/obj/%.o,$(LIB_SRC))

native: $(NATIVE)/libmsda.a

# Position-independent and for the platform's baseline ISA (wider ISAs are chosen at run time),
# so the same objects also make the Node addon (mk/js.mk) and its prebuild runs on any CPU.
LIB_BASELINE := -fPIC $(if $(filter x86_64,$(shell uname -m)),-march=x86-64 -mtune=generic)

$(NATIVE)/obj/%.o: src/%.c $(LIB_HDR) | $(NATIVE)/obj
	$(CC) $(CFLAGS) $(LIB_BASELINE) -c $< -o $@

$(NATIVE)/obj:
	mkdir -p $@

$(NATIVE)/libmsda.a: $(LIB_OBJ)
	rm -f $@
	ar rcs $@ $^

# Native: the kernels for each x86 ISA come from kernel_avx2.c etc. (MSDA_TARGET in each, so one
# command building every source works too), chosen at run time (MSDA_ISA forces one).

# C tests: every tests/c/test_*.c is its own program linked against the library.
C_TESTS := $(patsubst tests/c/%.c,$(NATIVE)/tests/%,$(wildcard tests/c/test_*.c))
# (tests/c/cli_run.c, which runs the CLI, only for the test_cli* programs: mk/cli.mk)
C_TEST_SUPPORT := $(filter-out tests/c/test_%.c tests/c/isa_hashes.c tests/c/cli_run.c,$(wildcard tests/c/*.c))

$(NATIVE)/tests/%: tests/c/%.c $(C_TEST_SUPPORT) $(wildcard tests/c/*.h) $(NATIVE)/libmsda.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Isrc -Isrc/cli -Itests/c $< $(C_TEST_SUPPORT) $(TEST_LIBS) $(NATIVE)/libmsda.a -lm -o $@

# The same bits on every ISA this CPU has and in both wasm builds (tests/c/isa_bits.sh).
ISA_DIR := $(BUILD)/isa
ISA_SRC := tests/c/isa_hashes.c $(C_TEST_SUPPORT)
ISA_EMCC = NODE_PATH=/usr/share/nodejs $(EMCC) -O3 $(CSTD) -DNDEBUG -Isrc -Itests/c -sALLOW_MEMORY_GROWTH
$(ISA_DIR)/package.json:
	@mkdir -p $(dir $@)
	echo '{"type": "commonjs"}' > $@
$(ISA_DIR)/isa_hashes: $(ISA_SRC) $(wildcard tests/c/*.h) $(NATIVE)/libmsda.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Isrc -Itests/c $(ISA_SRC) $(NATIVE)/libmsda.a -lm -o $@
$(ISA_DIR)/isa_hashes_simd.js: $(ISA_SRC) $(LIB_SRC) $(LIB_HDR) $(ISA_DIR)/package.json
	$(ISA_EMCC) -msimd128 $(ISA_SRC) $(LIB_SRC) -o $@
$(ISA_DIR)/isa_hashes_scalar.js: $(ISA_SRC) $(LIB_SRC) $(LIB_HDR) $(ISA_DIR)/package.json
	$(ISA_EMCC) $(ISA_SRC) $(LIB_SRC) -o $@

.PHONY: test-isa
test-isa: $(ISA_DIR)/isa_hashes $(ISA_DIR)/isa_hashes_simd.js $(ISA_DIR)/isa_hashes_scalar.js
	@tests/c/isa_bits.sh $^

.PHONY: test-c test-c-sanitize
test-c: $(C_TESTS)
	@set -e; for t in $(C_TESTS); do echo "== $$t"; $$t; done

# The same C tests under AddressSanitizer and UndefinedBehaviorSanitizer, linked against one
# sanitized static library (built once, also linked by the sanitized CLI in mk/cli.mk).
# float-cast-overflow is not part of -fsanitize=undefined (gcc or clang) but is the UB a
# non-finite coordinate would hit. -fno-var-tracking-assignments: gcc's variable tracking on the
# big kernel files cost minutes of compile time and only refines debug locations; line numbers
# in the reports stay.
SAN      := $(BUILD)/sanitize
SANFLAGS := -O1 -g -fno-var-tracking-assignments -fno-omit-frame-pointer \
            -fsanitize=address,undefined,float-cast-overflow -fno-sanitize-recover=all -pthread
SAN_OBJ  := $(patsubst src/%.c,$(SAN)/obj/%.o,$(LIB_SRC))
SAN_TESTS := $(patsubst tests/c/%.c,$(SAN)/tests/%,$(wildcard tests/c/test_*.c))

$(SAN)/obj/%.o: src/%.c $(LIB_HDR)
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(CWARN) $(SANFLAGS) -c $< -o $@

$(SAN)/libmsda.a: $(SAN_OBJ)
	rm -f $@
	ar rcs $@ $^

$(SAN)/tests/%: tests/c/%.c $(C_TEST_SUPPORT) $(wildcard tests/c/*.h) $(SAN)/libmsda.a
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(CWARN) $(SANFLAGS) -Isrc -Isrc/cli -Itests/c $< $(C_TEST_SUPPORT) $(TEST_LIBS) $(SAN)/libmsda.a -lm -o $@

test-c-sanitize: $(SAN_TESTS)
	@set -e; for t in $(SAN_TESTS); do echo "== $$t (asan+ubsan)"; ASAN_OPTIONS=detect_leaks=1 $$t; done

TEST_SUITES += test-c test-isa test-c-sanitize
TEST_BUILD  += $(C_TESTS) $(SAN_TESTS) $(ISA_DIR)/isa_hashes $(ISA_DIR)/isa_hashes_simd.js $(ISA_DIR)/isa_hashes_scalar.js
CHECK_BUILD += $(C_TESTS) $(ISA_DIR)/isa_hashes $(ISA_DIR)/isa_hashes_simd.js $(ISA_DIR)/isa_hashes_scalar.js
