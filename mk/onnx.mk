# ms-deform-attn/onnx (bindings/onnx.js). Its tests are tests/js/onnx.test.js (in test-js); the
# benchmark: each encoder-sized fixture (tests/fixtures/onnx/*-bench.onnx) through ORT alone and
# through createSession, onnxruntime-node and onnxruntime-web's wasm EP, one thread, interleaved
# (tests/bench/onnx_bench.js; BENCH_ONNX_ARGS e.g. '--rounds 5 --runtime web --json').
.PHONY: bench-onnx bench-onnx-webgpu
bench-onnx: wasm native
	node tests/bench/onnx_bench.js $(BENCH_ONNX_ARGS)

# The same on onnxruntime-web's WebGPU EP in Node (Dawn; SwiftShader unless VK_ICD_FILENAMES names
# a GPU's driver: mk/webgpu.mk), the op on ORT's device.
bench-onnx-webgpu: wasm
	$(WEBGPU_ENV) node tests/bench/onnx_bench.js --runtime webgpu $(BENCH_ONNX_ARGS)
