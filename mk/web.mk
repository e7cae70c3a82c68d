# The interactive page (web/), its static server and the browser tests (tests/web/).
# `make demo` builds the wasm modules if needed and serves the page on 127.0.0.1:$(PORT)
# (default 8080) with the cross-origin-isolation headers, through `msda demo` (bindings/demo.js).
# The page needs only Node, the wasm and the bundled worker scripts: `scripts/setup.sh --demo`
# installs Emscripten and the npm dev dependencies where missing, not the test tools. Without a
# clone: `npx ms-deform-attn demo` (docs/demo.md).

PORT ?= 8080

.PHONY: demo test-web
demo:
	@scripts/setup.sh --demo
	@$(MAKE) --no-print-directory wasm
	@node bindings/cli.js demo --port $(PORT)

# Headless Chromium against the served page, and the Node demos run to completion.
WEB_TESTS := $(wildcard tests/web/*.test.js)
test-web: wasm
	node --test --test-concurrency=1 $(WEB_TESTS)

TEST_SUITES += test-web
