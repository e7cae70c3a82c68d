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
LIB_SRC := $(filter-out src/cli.c src/addon.c,$(LIB_SRC))
LIB_HDR := $(wildcard src/*.h)

.PHONY: all native wasm test demo bench setup clean
.DEFAULT_GOAL := all

all: native wasm

# Suites register themselves here; `make test` runs them in this order.
TEST_SUITES :=

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

setup:
	@scripts/setup.sh

# Every suite's output also goes to build/test.log, whose counts make the closing total.
test: setup
	@$(MAKE) --no-print-directory native wasm
	@mkdir -p $(BUILD); : > $(BUILD)/test.log
	@set -eo pipefail; for s in $(TEST_SUITES); do \
	  $(MAKE) --no-print-directory $$s 2>&1 | tee -a $(BUILD)/test.log; done
	@echo "make test: all suites passed ($(TEST_SUITES))"
	@scripts/test-summary.sh $(BUILD)/test.log

clean:
	rm -rf $(BUILD) $(DIST)
