# libFuzzer targets (clang; ASan, LeakSanitizer, UBSan plus float-cast-overflow, which neither
# compiler's -fsanitize=undefined includes): the .npy reader, and the library's validation +
# forward + backward on small problems built from the fuzz bytes. Seeds are in
# tests/fuzz/corpus/<target>/, fixed findings in tests/fuzz/regressions/<target>/.
#   make fuzz                  runs every target, FUZZ_SECONDS in total (default one hour)
#   make test-fuzz             (part of make test) replays seeds and regressions, then fuzzes each
#                              target for FUZZ_TEST_SECONDS (default 25)

FUZZ_CC           ?= clang
FUZZ_DIR          := $(BUILD)/fuzz
FUZZ_TARGETS      := kernel npy
FUZZ_SECONDS      ?= 3600
FUZZ_TEST_SECONDS ?= 25
FUZZ_FLAGS        := $(CSTD) $(CWARN) -O1 -g -fno-omit-frame-pointer \
                     -fsanitize=fuzzer,address,undefined,float-cast-overflow -fno-sanitize-recover=all

.PHONY: fuzz fuzz-build test-fuzz
fuzz-build: $(patsubst %,$(FUZZ_DIR)/fuzz_%,$(FUZZ_TARGETS))

$(FUZZ_DIR)/fuzz_kernel: tests/fuzz/fuzz_kernel.c tests/c/reference.c tests/c/reference.h $(LIB_SRC) $(LIB_HDR) mk/fuzz.mk
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -Isrc -Itests/c tests/fuzz/fuzz_kernel.c tests/c/reference.c $(LIB_SRC) -lm -pthread -o $@

$(FUZZ_DIR)/fuzz_npy: tests/fuzz/fuzz_npy.c src/cli/npy.c src/cli/npy.h mk/fuzz.mk
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -Isrc/cli tests/fuzz/fuzz_npy.c src/cli/npy.c -o $@

fuzz: fuzz-build
	@tests/fuzz/run.sh $$(( $(FUZZ_SECONDS) / $(words $(FUZZ_TARGETS)) )) $(FUZZ_TARGETS)

test-fuzz: fuzz-build
	@tests/fuzz/run.sh $(FUZZ_TEST_SECONDS) $(FUZZ_TARGETS)

TEST_SUITES += test-fuzz
