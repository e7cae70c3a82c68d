# The interactive page (web/), its static server and the browser tests (tests/web/).
# `make demo` builds the wasm modules if missing and serves web/, bindings/ and dist/ on
# 127.0.0.1:$(PORT) (default 8080) with the cross-origin-isolation headers.

PORT ?= 8080

.PHONY: demo test-web
demo: setup wasm
	@PORT=$(PORT) node web/serve.js

# Headless Chromium against the served page, and the Node demos run to completion.
WEB_TESTS := $(wildcard tests/web/*.test.js)
test-web: wasm
	node --test --test-concurrency=1 $(WEB_TESTS)

TEST_SUITES += test-web
