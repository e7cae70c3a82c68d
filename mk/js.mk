# The Node addon build/native/msda.node (part of `make native`) and the JS test suite.

NODE_INCLUDE = $(shell node -p "require('path').join(process.execPath,'../../include/node')" 2>/dev/null)
ADDON_SRC := bindings/c/addon.c

# The addon ships in the package as a prebuild (prebuildify's layout, picked at run time by
# bindings/native.js from process.platform and process.arch): N-API only, so one binary serves
# every Node >= 20, and the baseline ISA of the target (never -march=native), so it runs on any
# CPU of that platform.
PREBUILD_DIR   = prebuilds/$(shell node -p "process.platform + '-' + process.arch" 2>/dev/null)

native: $(NATIVE)/msda.node $(PREBUILD_DIR)/ms-deform-attn.node

# No node-gyp: one shared object from the addon and the library's own objects (mk/native.mk
# builds them position-independent, for the baseline ISA; Node's own headers, node_api.h).
$(NATIVE)/obj/addon.o: $(ADDON_SRC) $(LIB_HDR) bindings/c/problem_desc.h mk/js.mk package.json | $(NATIVE)/obj
	@test -f "$(NODE_INCLUDE)/node_api.h" || { echo "mk/js.mk: node_api.h not found in '$(NODE_INCLUDE)' (Debian's nodejs package ships it)" >&2; exit 1; }
	$(CC) -O3 $(LIB_BASELINE) $(CSTD) $(CWARN) -DNAPI_VERSION=8 -DMSDA_VERSION='"$(MSDA_VERSION)"' -pthread -I"$(NODE_INCLUDE)" -Isrc -Ibindings/c -c $< -o $@

$(NATIVE)/msda.node: $(NATIVE)/obj/addon.o $(LIB_OBJ)
	$(CC) -shared -pthread $^ -lm -o $@

$(PREBUILD_DIR)/ms-deform-attn.node: $(NATIVE)/msda.node
	@mkdir -p $(dir $@)
	cp $< $@
	chmod 644 $@

# Every tests/js/*.test.js (other parts drop theirs there too); node discovers none by glob on
# Node 20, so the list is expanded here.
JS_TESTS = $(sort $(wildcard tests/js/*.test.js))

.PHONY: test-js
test-js: native wasm
	node --test $(JS_TESTS)

TEST_SUITES += test-js

# What `npm pack` ships (package.json's prepack runs this): fresh builds, and plain 644 modes
# (emcc leaves its .wasm output executable, which the tarball would keep).
.PHONY: package
package: native wasm
	chmod 644 $(DIST)/*.wasm

.PHONY: clean-prebuilds
clean: clean-prebuilds
clean-prebuilds:
	rm -rf prebuilds
