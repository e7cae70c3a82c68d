# Bundlers (docs/bundlers.md). The threads' worker script also goes beside the .wasm files in
# dist/, so that one copy of dist/ plus init's wasmPaths serves bundlers that do not follow
# workers (esbuild) and CDNs. test-bundlers builds tiny apps from the packed package with
# esbuild, webpack and Vite, exactly as docs/bundlers.md's recipes say, and runs them in Chromium.

wasm: $(DIST)/threads-worker.js
package test-bundlers: $(DIST)/msda-worker.js

# Both worker files are bundled by the esbuild the tests use (an npm dev dependency; make setup
# installs it): the package ships them ready to serve.
ESBUILD := node_modules/.bin/esbuild

# The threads' worker and its control-block slots (bindings/wasm/control.js) in one file.
$(DIST)/threads-worker.js: bindings/workers/threads-worker.js bindings/wasm/control.js bindings/wasm/delays.js mk/bundlers.mk | $(DIST)
	@test -x $(ESBUILD) || { echo "mk/bundlers.mk: $(ESBUILD) missing (make setup installs the npm dev dependencies)" >&2; exit 1; }
	$(ESBUILD) $< --bundle --platform=neutral --format=esm --log-level=warning --outfile=$@
	chmod 644 $@

# initWorker's browser worker in one file (what remote-worker.js imports, no Node code, the
# WebGPU backend that bindings/browser.js imports on demand included), for the same copy of dist/.
$(DIST)/msda-worker.js: bindings/workers/remote-worker.js bindings/core/remote.js bindings/browser.js $(wildcard bindings/core/*.js) \
                        $(wildcard bindings/webgpu/*.js bindings/webgpu/kernels/*.js) \
                        bindings/wasm/loader.js bindings/wasm/threads.js bindings/wasm/control.js bindings/wasm/delays.js mk/bundlers.mk | $(DIST)
	@test -x $(ESBUILD) || { echo "mk/bundlers.mk: $(ESBUILD) missing (make setup installs the npm dev dependencies)" >&2; exit 1; }
	$(ESBUILD) $< --bundle --platform=browser --format=esm --log-level=warning --outfile=$@
	chmod 644 $@

.PHONY: test-bundlers
test-bundlers: native wasm
	node --test --test-concurrency=1 tests/bundlers/bundlers.test.js

TEST_SUITES += test-bundlers
TEST_BUILD  += $(DIST)/msda-worker.js
