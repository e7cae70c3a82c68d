# Bundlers (README "Bundlers"). The threads' worker script also goes beside the .wasm files in
# dist/, so that one copy of dist/ plus init's wasmPaths serves bundlers that do not follow
# workers (esbuild) and CDNs. test-bundlers builds tiny apps from the packed package with
# esbuild, webpack and Vite, exactly as the README's recipes say, and runs them in Chromium.

wasm: $(DIST)/threads-worker.js

$(DIST)/threads-worker.js: bindings/threads-worker.js | $(DIST)
	install -m 644 $< $@

.PHONY: test-bundlers
test-bundlers: native wasm
	node --test --test-concurrency=1 tests/bundlers/bundlers.test.js

TEST_SUITES += test-bundlers
