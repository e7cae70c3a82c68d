# The native command line build/native/msda (src/cli/, not part of the library) and its tests:
# forward, backward and crosscheck --expect on .npy case directories, frozen (docs/cli.md "Two
# command lines"; the rest is the JS CLI's). All but main.c make the CLI library libmsdacli.a
# (plain and sanitized): the arguments, the case's files, the outputs, crosscheck --expect's
# bounded reference and report, the messages, JavaScript's number printing and the .npy
# reader/writer. main.c is linked with it into msda, as tests/c/test_npy.c and the
# tests/c/test_cli*.c programs are through native.mk's C-test rules.

CLI_SRC := $(wildcard src/cli/*.c)
CLI_HDR := $(wildcard src/cli/*.h)
CLI_LIB_SRC := $(filter-out src/cli/main.c,$(CLI_SRC))
CLI_LDLIBS := -lm -pthread
# --version prints package.json's version, fixed at build time.
MSDA_VERSION := $(shell sed -n 's/^  "version": *"\([^"]*\)".*/\1/p' package.json)
CLI_DEFS := -DMSDA_VERSION='"$(MSDA_VERSION)"'

native: $(NATIVE)/msda

$(NATIVE)/msda: src/cli/main.c $(CLI_HDR) $(LIB_HDR) $(NATIVE)/libmsdacli.a $(NATIVE)/libmsda.a mk/cli.mk package.json
	$(CC) $(CFLAGS) $(CLI_DEFS) -Isrc -Isrc/cli src/cli/main.c $(NATIVE)/libmsdacli.a $(NATIVE)/libmsda.a $(CLI_LDLIBS) -o $@

$(NATIVE)/cli-obj/%.o: src/cli/%.c $(CLI_HDR) $(LIB_HDR)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Isrc -Isrc/cli -c $< -o $@

$(SAN)/cli-obj/%.o: src/cli/%.c $(CLI_HDR) $(LIB_HDR)
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(CWARN) $(SANFLAGS) -Isrc -Isrc/cli -c $< -o $@

$(NATIVE)/libmsdacli.a: $(patsubst src/cli/%.c,$(NATIVE)/cli-obj/%.o,$(CLI_LIB_SRC))
	rm -f $@
	ar rcs $@ $^

$(SAN)/libmsdacli.a: $(patsubst src/cli/%.c,$(SAN)/cli-obj/%.o,$(CLI_LIB_SRC))
	rm -f $@
	ar rcs $@ $^

# The test_cli* programs run the CLI through tests/c/cli_run.c.
CLI_TESTS := $(patsubst tests/c/%.c,%,$(wildcard tests/c/test_cli*.c))
$(patsubst %,$(NATIVE)/tests/%,test_npy $(CLI_TESTS)): $(NATIVE)/libmsdacli.a $(CLI_HDR) tests/c/cli_run.c
$(NATIVE)/tests/test_npy: TEST_LIBS := $(NATIVE)/libmsdacli.a
$(patsubst %,$(NATIVE)/tests/%,$(CLI_TESTS)): TEST_LIBS := tests/c/cli_run.c $(NATIVE)/libmsdacli.a
$(patsubst %,$(SAN)/tests/%,test_npy $(CLI_TESTS)): $(SAN)/libmsdacli.a $(CLI_HDR) tests/c/cli_run.c
$(SAN)/tests/test_npy: TEST_LIBS := $(SAN)/libmsdacli.a
$(patsubst %,$(SAN)/tests/%,$(CLI_TESTS)): TEST_LIBS := tests/c/cli_run.c $(SAN)/libmsdacli.a

# src/cli/texts.h, the native CLI's texts, is made from the table bindings/cli/texts.js and
# committed (a clone builds without Node); tests/js/cli-texts.test.js holds the two alike.
.PHONY: cli-texts
cli-texts:
	node scripts/cli-texts.js

# The test_cli* programs run the CLI they find in $MSDA_CLI (default build/native/msda).
test-c test-c-sanitize: $(NATIVE)/msda

# The end-to-end CLI tests once more against a CLI built with ASan and UBSan.
.PHONY: test-cli-sanitize test-cli-js
$(SAN)/msda: src/cli/main.c $(CLI_HDR) $(LIB_HDR) $(SAN)/libmsdacli.a $(SAN)/libmsda.a mk/cli.mk package.json
	$(CC) $(CSTD) $(CWARN) $(SANFLAGS) $(CLI_DEFS) -Isrc -Isrc/cli src/cli/main.c $(SAN)/libmsdacli.a $(SAN)/libmsda.a $(CLI_LDLIBS) -o $@

test-cli-sanitize: $(patsubst %,$(NATIVE)/tests/%,$(CLI_TESTS)) $(SAN)/msda
	@set -e; for t in $(CLI_TESTS); do echo "== $(NATIVE)/tests/$$t against $(SAN)/msda (asan+ubsan)"; \
	  ASAN_OPTIONS=detect_leaks=1 MSDA_CLI=$(SAN)/msda $(NATIVE)/tests/$$t; done

TEST_SUITES += test-cli-sanitize
TEST_BUILD  += $(patsubst %,$(NATIVE)/tests/%,$(CLI_TESTS)) $(SAN)/msda
