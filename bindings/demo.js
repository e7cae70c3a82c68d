// msda demo: serves the interactive page (web/) from this package with node/serve.js, on
// 127.0.0.1 unless another host is asked for, cross-origin isolated so the wasm threads run.
// bindings/cli/main.js dispatches `msda demo ...` here; the server runs until SIGINT or SIGTERM.
import { startServer, missingFiles } from './node/serve.js';

export const DEMO_USAGE = `usage: msda demo [--port N] [--host H]

Serves the interactive page (how deformable attention samples, and where its gradients flow)
from the installed package and prints its URL; Ctrl-C stops it.

  --port N   0..65535; default 8080; 0 picks a free port
  --host H   the address to listen on; default 127.0.0.1 (this machine only). Any other
             address serves the page to the network; browsers give threads (cross-origin
             isolation) only to localhost or https, so elsewhere the page runs on one thread
  -h, --help this text
`;

class DemoArgumentError extends Error {}

export function parseDemoArgs(argv) {
  const o = { port: 8080, host: '127.0.0.1', help: false };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '-h' || arg === '--help') { o.help = true; continue; }
    const eq = arg.indexOf('=');
    const name = arg.startsWith('--') && eq > 0 ? arg.slice(0, eq) : arg;
    if (name !== '--port' && name !== '--host') {
      throw new DemoArgumentError(`unknown option '${arg}' for msda demo, expected --port N or --host H (see msda demo --help)`);
    }
    let value;
    if (eq > 0 && arg.startsWith('--')) value = arg.slice(eq + 1);
    else if (i + 1 < argv.length) value = argv[++i];
    else throw new DemoArgumentError(`${name} needs a value`);
    if (value.startsWith('-')) throw new DemoArgumentError(`${name} needs a value, got ${JSON.stringify(value)}`);
    if (name === '--port') {
      if (!/^\d{1,5}$/.test(value) || Number(value) > 65535) {
        throw new DemoArgumentError(`--port must be an integer 0..65535, got ${JSON.stringify(value)}`);
      }
      o.port = Number(value);
    } else {
      if (value === '' || /[\s/?#@]/.test(value)) throw new DemoArgumentError(`--host must be a host name or address, got ${JSON.stringify(value)}`);
      o.host = value;
    }
  }
  return o;
}

const LOOPBACK = new Set(['127.0.0.1', 'localhost', '::1', '[::1]']);

/**
 * Runs `msda demo` with argv (after "demo"); resolves to the exit status once the server has
 * stopped (on `signal`, default SIGINT/SIGTERM). io.out / io.err receive stdout and stderr text.
 */
export async function demo(argv, io, { signals = ['SIGINT', 'SIGTERM'] } = {}) {
  let o;
  try {
    o = parseDemoArgs(argv);
  } catch (e) {
    if (!(e instanceof DemoArgumentError)) throw e;
    io.err(`msda: ${e.message}\n`);
    return 2;
  }
  if (o.help) {
    io.out(DEMO_USAGE);
    return 0;
  }
  for (const f of missingFiles()) io.err(`msda: warning: ${f} is missing (in a clone: make wasm)\n`);
  const host = o.host.replace(/^\[(.*)\]$/, '$1');
  let server, url;
  try {
    ({ server, url } = await startServer({ port: o.port, host }));
  } catch (e) {
    io.err(`msda: cannot listen on ${o.host}:${o.port}: ${e.code || e.message}` +
      (e.code === 'EADDRINUSE' ? ' (pass --port with another port, or --port 0 for a free one)' : '') + '\n');
    return 1;
  }
  // On every interface: the URL to open here is the loopback one (isolated, so threads run).
  const wildcard = host === '0.0.0.0' || host === '::';
  const shown = wildcard ? url.replace(/^http:\/\/[^/]+/, `http://127.0.0.1:${server.address().port}`) : url;
  io.out(`ms-deform-attn demo: open ${shown}  (Ctrl-C to stop)\n`);
  if (!LOOPBACK.has(o.host)) {
    io.err(`msda: serving to the network on ${o.host}${wildcard ? ' (every interface)' : ''}; browsers isolate (and give threads to) only localhost or https pages\n`);
  }
  await new Promise((resolve) => {
    const stopNow = () => {
      for (const s of signals) process.off(s, stopNow);
      server.close(resolve);
      server.closeAllConnections?.();
    };
    for (const s of signals) process.on(s, stopNow);
  });
  return 0;
}
