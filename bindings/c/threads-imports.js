// Tells emcc that the wasm threads module imports env.msda_wasm_run_parallel (src/pool.c); the
// real function is supplied at instantiation by bindings/wasm/threads.js (no Emscripten glue is used).
mergeInto(LibraryManager.library, {
  msda_wasm_run_parallel: function () {},
});
