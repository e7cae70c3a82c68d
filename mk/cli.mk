# The native command line build/native/msda (src/cli/, not part of the library) and its tests.
# All but main.c make the CLI library libmsdacli.a (plain and sanitized): the arguments, the
# case's files, the outputs, crosscheck --expect, the messages, JavaScript's number printing, the
# .npy reader/writer and the .npz reader with its inflate. main.c is linked with it into msda, as
# tests/c/test_npy.c and tests/c/test_cli.c are through native.mk's C-test rules.

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

$(NATIVE)/tests/test_npy $(NATIVE)/tests/test_cli: $(NATIVE)/libmsdacli.a $(CLI_HDR)
$(NATIVE)/tests/test_npy $(NATIVE)/tests/test_cli: TEST_LIBS := $(NATIVE)/libmsdacli.a
$(SAN)/tests/test_npy $(SAN)/tests/test_cli: $(SAN)/libmsdacli.a $(CLI_HDR)
$(SAN)/tests/test_npy $(SAN)/tests/test_cli: TEST_LIBS := $(SAN)/libmsdacli.a

# src/cli/texts.h, the native CLI's texts, is made from the table bindings/cli/texts.js and
# committed (a clone builds without Node); tests/js/cli-texts.test.js holds the two alike.
.PHONY: cli-texts
cli-texts:
	node scripts/cli-texts.js

# test_cli runs the CLI it finds in $MSDA_CLI (default build/native/msda).
test-c test-c-sanitize: $(NATIVE)/msda

# The end-to-end CLI tests once more against a CLI built with ASan and UBSan.
.PHONY: test-cli-sanitize test-cli-js
$(SAN)/msda: src/cli/main.c $(CLI_HDR) $(LIB_HDR) $(SAN)/libmsdacli.a $(SAN)/libmsda.a mk/cli.mk package.json
	$(CC) $(CSTD) $(CWARN) $(SANFLAGS) $(CLI_DEFS) -Isrc -Isrc/cli src/cli/main.c $(SAN)/libmsdacli.a $(SAN)/libmsda.a $(CLI_LDLIBS) -o $@

test-cli-sanitize: $(NATIVE)/tests/test_cli $(SAN)/msda
	@echo "== $(NATIVE)/tests/test_cli against $(SAN)/msda (asan+ubsan)"
	@ASAN_OPTIONS=detect_leaks=1 MSDA_CLI=$(SAN)/msda $(NATIVE)/tests/test_cli

TEST_SUITES += test-cli-sanitize
TEST_BUILD  += $(NATIVE)/tests/test_cli $(SAN)/msda
