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
FUZZ_SAN          := address,undefined,float-cast-overflow
FUZZ_CFLAGS       := $(CSTD) $(CWARN) -O1 -g -fno-omit-frame-pointer -fno-sanitize-recover=all

.PHONY: fuzz fuzz-build test-fuzz
fuzz-build: $(patsubst %,$(FUZZ_DIR)/fuzz_%,$(FUZZ_TARGETS))

# Coverage instrumentation only on the code under test: the harnesses and the float64 reference
# are sanitized but not traced, which makes each input about four times faster.
$(FUZZ_DIR)/fuzz_kernel: tests/fuzz/fuzz_kernel.c tests/c/reference.c tests/c/reference.h $(LIB_SRC) $(LIB_HDR) mk/fuzz.mk
	@mkdir -p $(FUZZ_DIR)/obj-kernel
	@set -e; for f in $(LIB_SRC); do \
	  echo "$(FUZZ_CC) -fsanitize=fuzzer-no-link,$(FUZZ_SAN) -c $$f"; \
	  $(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link,$(FUZZ_SAN) -Isrc -c $$f -o $(FUZZ_DIR)/obj-kernel/lib-$$(basename $$f .c).o; \
	done
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=$(FUZZ_SAN) -Isrc -Itests/c -c tests/fuzz/fuzz_kernel.c -o $(FUZZ_DIR)/obj-kernel/harness.o
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=$(FUZZ_SAN) -Isrc -Itests/c -c tests/c/reference.c -o $(FUZZ_DIR)/obj-kernel/reference.o
	$(FUZZ_CC) -fsanitize=fuzzer,$(FUZZ_SAN) $(patsubst src/%.c,$(FUZZ_DIR)/obj-kernel/lib-%.o,$(LIB_SRC)) \
	  $(FUZZ_DIR)/obj-kernel/harness.o $(FUZZ_DIR)/obj-kernel/reference.o -lm -pthread -o $@

$(FUZZ_DIR)/fuzz_npy: tests/fuzz/fuzz_npy.c src/cli/npy.c src/cli/npy.h src/cli/texts.h mk/fuzz.mk
	@mkdir -p $(FUZZ_DIR)/obj-npy
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link,$(FUZZ_SAN) -Isrc/cli -c src/cli/npy.c -o $(FUZZ_DIR)/obj-npy/npy.o
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=$(FUZZ_SAN) -Isrc/cli -c tests/fuzz/fuzz_npy.c -o $(FUZZ_DIR)/obj-npy/harness.o
	$(FUZZ_CC) -fsanitize=fuzzer,$(FUZZ_SAN) $(FUZZ_DIR)/obj-npy/npy.o $(FUZZ_DIR)/obj-npy/harness.o -o $@

fuzz: fuzz-build
	@tests/fuzz/run.sh $$(( $(FUZZ_SECONDS) / $(words $(FUZZ_TARGETS)) )) $(FUZZ_TARGETS)

test-fuzz: fuzz-build
	@tests/fuzz/run.sh $(FUZZ_TEST_SECONDS) $(FUZZ_TARGETS)

TEST_SUITES += test-fuzz
TEST_BUILD  += fuzz-build
