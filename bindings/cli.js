#!/usr/bin/env node
// msda: the package's command line (the `bin` of ms-deform-attn), the twin of build/native/msda.
//
//   msda forward|backward --in DIR --out DIR [options] [--backend wasm|wasm-scalar|native]
//   msda crosscheck --in DIR [--expect DIR] [options]
//   msda demo [--port N] [--host H]          (the interactive page: bindings/demo.js)
//
// Same arguments, files, messages and exit codes as the native CLI (CONTRACT.md): 0 done; 2 bad
// arguments or input, with one line on stderr starting "msda:" naming the file or flag; 1 any
// other failure (for crosscheck: a disagreement beyond tolerance). Outputs are written into a
// private directory inside --out and renamed into place only once all of them are complete.

import { realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { dropStdout, main } from './cli/main.js';

export { main };

// Run when executed (directly or through the npm bin link), not when imported.
const invokedAs = (() => {
  try {
    return process.argv[1] ? realpathSync(process.argv[1]) : '';
  } catch {
    return '';
  }
})();
if (invokedAs === fileURLToPath(import.meta.url)) {
  process.stdout.on('error', (e) => {
    if (e.code !== 'EPIPE') throw e;
    dropStdout();
  });
  process.exitCode = await main(process.argv.slice(2));
}
