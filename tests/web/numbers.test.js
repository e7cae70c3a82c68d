// The page's example data does not depend on the screen: the value tensor the page passes to the
// operator is, bit for bit, the one Node builds from web/scene.js, at devicePixelRatio 1, 1.5 and
// 2 and at desktop and phone sizes, so the starting loss is the same to the last digit.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { init } from '../../bindings/index.js';
import { drawPicture, buildPyramid } from '../../web/scene.js';
import { launch, openPage } from './browser.js';

let env;
before(async () => { env = await launch(); });
after(async () => { if (env) await env.close(); });

// The page's value tensor (base64 of its float32 bytes), loss, and the loss it displays.
async function pageNumbers(viewport, deviceScaleFactor) {
  const { page, context, problems } = await openPage(env.browser, env.url, viewport, { deviceScaleFactor });
  try {
    const s = await page.evaluate(() => {
      const m = window.__msda;
      const v = m.forwardArgs.value.data;
      const bytes = new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
      let bin = '';
      for (let i = 0; i < bytes.length; i += 0x8000) bin += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
      return { value: btoa(bin), loss: m.loss, lossText: document.getElementById('loss').textContent, dpr: devicePixelRatio,
        backing: document.getElementById('level-0').width };
    });
    assert.deepEqual(problems, []);
    const buf = Buffer.from(s.value, 'base64');
    return { ...s, value: new Float32Array(buf.buffer, buf.byteOffset, buf.byteLength / 4).slice() };
  } finally {
    await context.close();
  }
}

function sameBits(name, got, want) {
  assert.equal(got.length, want.length, `${name}: length`);
  for (let i = 0; i < want.length; i++) {
    if (!Object.is(got[i], want[i])) assert.fail(`${name}[${i}]: ${got[i]}, expected ${want[i]}`);
  }
}

test('same value tensor and loss at DPR 1, 1.5 and 2, desktop and phone, as Node builds it', async () => {
  const data = buildPyramid(drawPicture());
  const runs = [
    await pageNumbers({ width: 1280, height: 800 }, 1),
    await pageNumbers({ width: 390, height: 844 }, 2),
    await pageNumbers({ width: 900, height: 700 }, 1.5),
  ];
  assert.deepEqual(runs.map((r) => r.dpr), [1, 2, 1.5], 'the device pixel ratios took effect');
  assert.notEqual(runs[0].backing, runs[1].backing, 'the canvases are drawn at different resolutions');
  for (const [k, r] of runs.entries()) sameBits(`value at DPR ${r.dpr} (run ${k})`, r.value, data.value);
  assert.equal(runs[1].loss, runs[0].loss, 'same loss at DPR 2');
  assert.equal(runs[2].loss, runs[0].loss, 'same loss at DPR 1.5');
  assert.equal(runs[1].lossText, runs[0].lossText);
  // And it is the loss Node computes from the same data with the page's starting state.
  const { evaluate, softmaxInto } = await import('../../web/model.js');
  const { project, QUERY } = await import('../../web/query.js');
  const q = project(QUERY);
  const state = { samplingLocations: q.locations, attentionWeights: softmaxInto(q.logits, new Float32Array(36)), target: [0.72, 0.64] };
  const msda = await init();
  const opts = { alignCorners: false, paddingMode: 'zeros', valueLayout: 'BLNC', samplingLocationsLayout: 'BQHLP2' };
  assert.equal(evaluate(msda, data, state, opts).loss, runs[0].loss, 'Node gives the page\'s starting loss');
});
