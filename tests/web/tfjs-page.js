// The page of the tfjs suites in Chromium (tfjs.test.js on tfjs-backend-cpu, tfjs-webgl.test.js on
// tfjs-backend-webgl): tfjs-core's and the backend's ESM bundles from node_modules through an
// import map (as a user's page or bundler would resolve them) and bindings/tfjs.js; the op's
// output and tf.grads on one case, then a few Adam steps of the layer towards a teacher's output.
// The case is a small LCG, so that nothing but its text is shared with Node (nodeResults).
import { init } from '../../bindings/index.js';
import { PATIENCE_MS } from '../patience.js';

const bundle = (name) => `/node_modules/@tensorflow/${name}/dist/${name.replace('tfjs-', 'tf-')}.fesm.js`;

// The same inputs in the page and in Node.
const caseSource = (seed, C) => `
function makeCase() {
  let s = ${seed};
  const r = () => { s = (Math.imul(s, 1103515245) + 12345) >>> 0; return s / 4294967296; };
  const B = 2, Q = 30, H = 2, C = ${C}, P = 3, spatialShapes = [[6, 7], [3, 4], [1, 1]], NL = 3;
  const L = spatialShapes.reduce((a, [h, w]) => a + h * w, 0);
  const fill = (n, f) => Float32Array.from({ length: n }, f);
  return {
    value: { data: fill(B * L * H * C, () => r() * 2 - 1), shape: [B, L, H, C] },
    spatialShapes,
    samplingLocations: { data: fill(B * Q * H * NL * P * 2, () => r() * 1.2 - 0.1), shape: [B, Q, H, NL, P, 2] },
    attentionWeights: { data: fill(B * Q * H * NL * P, () => r()), shape: [B, Q, H, NL, P] },
    gradOutput: { data: fill(B * Q * H * C, () => r() * 2 - 1), shape: [B, Q, H * C] },
  };
}`;

// tfjs-backend-cpu's bundle imports seedrandom (a CommonJS package) for tf.multinomial only.
const SEEDRANDOM_STUB = 'export function alea() { throw new Error("seedrandom is not served to this test page"); }\n';

/**
 * The page for tfjs `backend` ('cpu' or 'webgl'), its case from `seed` with `C` channels, `steps`
 * Adam steps: { bodies, files } for servePages (the page at /page.html) and the case's source.
 * On webgl every input is computed there (a tf.mul, so it lives in a texture) and every result
 * read back through another webgl op. The page sets window.__tfjs: { results (hex of output and
 * the three gradients), leaked, losses, backend, msdaBackend, inTexture, float32 } or { error }.
 */
export function tfjsPage({ backend, seed, C, steps }) {
  const pkg = `tfjs-backend-${backend}`;
  const cases = caseSource(seed, C);
  const webgl = backend === 'webgl';
  const imports = {
    '@tensorflow/tfjs-core': bundle('tfjs-core'),
    [`@tensorflow/${pkg}`]: bundle(pkg),
    ...(webgl ? {} : { seedrandom: '/seedrandom.js' }),
    'ms-deform-attn': '/bindings/browser.js',
  };
  const page = `<!doctype html><meta charset="utf-8"><title>tfjs ${backend}</title><link rel="icon" href="data:,">
<script type="importmap">
${JSON.stringify({ imports }, null, 2)}
</script>
<script type="module">
${cases}
const hex = (t) => Array.from(new Uint8Array(t.buffer, t.byteOffset, t.byteLength), (b) => b.toString(16).padStart(2, '0')).join('');
try {
  const tf = await import('@tensorflow/tfjs-core');
  await import('@tensorflow/${pkg}');
  const { msDeformAttn, MSDeformAttn, getMsda, ready } = await import('/bindings/tfjs.js');
  await ready();   // nothing is loaded at import
  const ok = await tf.setBackend('${backend}');
  if (!ok || tf.getBackend() !== '${backend}') throw new Error('${pkg} did not initialise: setBackend gave ' + ok + ', backend ' + tf.getBackend());
  const c = makeCase();
  ${webgl ? `// Computed on webgl: the values sit in a texture, and the op has to read them back from there.
  const place = (x) => tf.mul(tf.tensor(x.data, x.shape, 'float32'), 1);` : `const place = (x) => tf.tensor(x.data, x.shape, 'float32');`}
  const [v, l, w, dy] = [c.value, c.samplingLocations, c.attentionWeights, c.gradOutput].map(place);
  const inTexture = ${webgl ? '[v, l, w, dy].map((x) => { const d = tf.backend().texData.get(x.dataId); return d.values == null && d.texture != null; })' : 'null'};
  const options = { spatialShapes: c.spatialShapes };
  const before = tf.memory().numTensors;
  const results = tf.tidy(() => {
    const out = msDeformAttn(v, l, w, options);
    const grads = tf.grads((a, b, d) => msDeformAttn(a, b, d, options))([v, l, w], dy);
    ${webgl ? `// Read back through a webgl op: the results work as inputs to webgl's own kernels.
    return [out, ...grads].map((x) => hex(tf.mul(x, 1).dataSync()));` : 'return [out, ...grads].map((x) => hex(x.dataSync()));'}
  });
  const leaked = tf.memory().numTensors - before;

  // A few Adam steps of the layer towards a teacher's output${webgl ? ', all on webgl' : ''}.
  const mse = tf.customGrad((y, target, save) => {
    const d = tf.sub(y, target);
    save([d]);
    return { value: tf.mean(tf.square(d)), gradFunc: (g, [d1]) => [tf.mul(g, tf.mul(d1, 2 / d1.size)), tf.zerosLike(d1)] };
  });
  const teacher = new MSDeformAttn({ d_model: 8, n_levels: 2, n_heads: 2, n_points: 2, seed: 1 });
  const student = new MSDeformAttn({ d_model: 8, n_levels: 2, n_heads: 2, n_points: 2, seed: 2 });
  const shapes = [[4, 4], [2, 2]];
  const query = tf.randomNormal([1, 6, 8], 0, 1, 'float32', 3), input = tf.randomNormal([1, 20, 8], 0, 1, 'float32', 4);
  const ref = tf.randomUniform([1, 6, 2, 2], 0.2, 0.8, 'float32', 5);
  const target = teacher.apply(query, ref, input, shapes);
  const optimizer = tf.train.adam(0.02);
  const losses = [];
  for (let i = 0; i < ${steps}; i++) {
    const cost = optimizer.minimize(() => mse(student.apply(query, ref, input, shapes), target), true);
    losses.push(cost.dataSync()[0]);
    cost.dispose();
  }
  window.__tfjs = { results, leaked, losses, inTexture, backend: tf.getBackend(), msdaBackend: getMsda().backend,
    float32: ${webgl ? "tf.env().getBool('WEBGL_RENDER_FLOAT32_ENABLED')" : 'null'} };
} catch (e) {
  window.__tfjs = { error: String(e && e.stack || e) };
}
</script>`;
  const files = Object.fromEntries(['tfjs-core', pkg].map((name) => [bundle(name), bundle(name).slice(1)]));
  return {
    bodies: { '/page.html': page, ...(webgl ? {} : { '/seedrandom.js': SEEDRANDOM_STUB }) },
    files,
    caseSource: cases,
  };
}

/**
 * What Node computes on the page's case (the backend the page's op ran on: wasm SIMD or not):
 * the case, and the hex of output and the three gradients, in the page's order.
 */
export async function nodeResults(caseSource, msdaBackend) {
  const msda = await init({ simd: msdaBackend === 'wasm' });
  const c = new Function(`${caseSource}; return makeCase;`)()();
  const hex = (t) => Buffer.from(t.buffer, t.byteOffset, t.byteLength).toString('hex');
  const { gradOutput, ...args } = c;
  const output = msda.forward(args);
  const g = msda.backward(c);
  const data = [output.data, g.gradValue.data, g.gradSamplingLocations.data, g.gradAttentionWeights.data];
  return { c, data, hex: data.map(hex) };
}

/** The names of the page's results, in order. */
export const RESULTS = ['output', 'gradValue', 'gradSamplingLocations', 'gradAttentionWeights'];

/**
 * Opens the page served at `base` in `browser` and waits for its window.__tfjs: { r, problems }
 * (page errors, failed responses, console errors and warnings but those `ignore` matches).
 */
export async function runPage(browser, base, ignore = null) {
  const page = await browser.newPage();
  const problems = [];
  page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
  page.on('response', (r) => { if (r.status() >= 400) problems.push(`HTTP ${r.status()}: ${r.url()}`); });
  page.on('console', (m) => {
    if ((m.type() === 'error' || m.type() === 'warning') && !ignore?.test(m.text())) problems.push(`${m.text()} ${m.location().url}`);
  });
  await page.goto(`${base}/page.html`);
  await page.waitForFunction(() => window.__tfjs !== undefined, null, { timeout: PATIENCE_MS });
  const r = await page.evaluate(() => window.__tfjs);
  await page.close();
  return { r, problems };
}
