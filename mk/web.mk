# The interactive page (web/), its static server and the browser tests (tests/web/).
# `make demo` builds the wasm modules if needed and serves the page on 127.0.0.1:$(PORT)
# (default 8080) with the cross-origin-isolation headers, through `msda demo` (bindings/demo.js).
# The page needs only Node and the wasm: the full `make setup` (apt + npm dev dependencies) runs
# only when Emscripten is missing. Without a clone: `npx ms-deform-attn demo` (docs/demo.md).

PORT ?= 8080

.PHONY: demo test-web
demo:
	@command -v $(EMCC) >/dev/null 2>&1 || { echo "make demo: $(EMCC) is missing, running make setup first" \
	  "(or run npx ms-deform-attn demo, which needs no build)"; scripts/setup.sh; }
	@$(MAKE) --no-print-directory wasm
	@node bindings/cli.js demo --port $(PORT)

# Headless Chromium against the served page, and the Node demos run to completion.
WEB_TESTS := $(wildcard tests/web/*.test.js)
test-web: wasm
	node --test --test-concurrency=1 $(WEB_TESTS)

TEST_SUITES += test-web
