# ms-deform-attn. `make test` installs what is missing, builds everything and runs every suite;
# `make demo` serves the interactive page. Each part of the build lives in mk/*.mk.

SHELL   := /bin/bash
CC      ?= cc
BUILD   := build
NATIVE  := $(BUILD)/native
DIST    := dist

# Strict, reproducible C: no FMA contraction so native and wasm round alike.
CSTD    := -std=c11 -ffp-contract=off
CWARN   := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes
CFLAGS  ?= -O3
CFLAGS  += $(CSTD) $(CWARN)

LIB_SRC := $(wildcard src/*.c)
# src/kernel/*.h: the kernel headers each ISA's src/kernel_*.c includes
LIB_HDR := $(wildcard src/*.h src/kernel/*.h)

.PHONY: all native wasm test check test-build demo bench setup clean
.DEFAULT_GOAL := all

all: native wasm

# Suites register themselves here, and what they need built in TEST_BUILD (built first, in
# parallel, so that suites running side by side never build the same file).
TEST_SUITES :=
TEST_BUILD  :=

include mk/native.mk
-include mk/cli.mk
-include mk/threads.mk
-include mk/arm64.mk
-include mk/wasm.mk
-include mk/js.mk
-include mk/web.mk
-include mk/bundlers.mk
-include mk/bench.mk
-include mk/fuzz.mk
-include mk/webgpu.mk
-include mk/onnx.mk

setup:
	@scripts/setup.sh

# Suites run TEST_JOBS at a time (one per core of a 2-core machine), longest first; each
# suite's output is printed whole when it ends and goes to build/test.log, whose counts make
# the closing total (scripts/run-suites.sh). `make check` is the quick tier for an edit-test loop.
TEST_JOBS    ?= 2
TEST_LONGEST := test-arm64 test-js test-fuzz test-web test-webgpu test-c-sanitize test-c test-bundlers test-cli-sanitize
TEST_ORDER    = $(filter $(TEST_SUITES),$(TEST_LONGEST)) $(filter-out $(TEST_LONGEST),$(TEST_SUITES))
CHECK_SUITES := test-js test-c test-isa

test-build: native wasm $(TEST_BUILD)

test: setup
	@start=$$(date +%s); $(MAKE) --no-print-directory -j$(TEST_JOBS) test-build && \
	  echo "== build of every suite's programs: $$(( $$(date +%s) - start )) s"
	@scripts/run-suites.sh $(TEST_JOBS) $(TEST_ORDER)
	@echo "make test: all suites passed ($(TEST_ORDER))"
	@scripts/test-summary.sh $(BUILD)/test.log

check: setup
	@$(MAKE) --no-print-directory -j$(TEST_JOBS) native wasm $(CHECK_BUILD)
	@scripts/run-suites.sh $(TEST_JOBS) $(CHECK_SUITES)
	@echo "make check: all suites passed ($(CHECK_SUITES))"
	@scripts/test-summary.sh $(BUILD)/test.log

clean:
	rm -rf $(BUILD) $(DIST)
