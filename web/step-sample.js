// Step 1, one point reads one map: a point on the coarse map, its four corner pixels with their
// bilinear weights, and what the operator reads there.
import { LEVELS, NUM_HEADS, CHANNELS, bilinearCorners } from './scene.js';
import { $, CANVAS_W, CANVAS_H, POINT_COLOURS, CHANNEL_NAMES } from './page-state.js';
import { beginCanvas, imageRect, pixelBox, label, rgbOf, css, channelRow } from './draw.js';

export const SAMPLE_LEVEL = 2;          // the coarsest map: its pixels are big

// One query, every head's point at the same place, weight 1, on the coarse map only.
export function prepareSample(ctx) {
  const { msda, data, ui } = ctx;
  const sampler = msda.prepare({ batch: 1, numQueries: 1, numHeads: NUM_HEADS, channels: CHANNELS, numPoints: 1,
    spatialShapes: [LEVELS[SAMPLE_LEVEL]], alignCorners: ui.opts.alignCorners, paddingMode: ui.opts.paddingMode }, { mode: 'forward' });
  const [h, w] = LEVELS[SAMPLE_LEVEL];
  const start = data.levelStartIndex[SAMPLE_LEVEL] * NUM_HEADS * CHANNELS;
  sampler.value.set(data.value.subarray(start, start + h * w * NUM_HEADS * CHANNELS));
  sampler.attentionWeights.fill(1);
  ctx.sample.sampler = sampler;
}

function sampleLocations(point) {
  const loc = new Float32Array(NUM_HEADS * 2);
  for (let hd = 0; hd < NUM_HEADS; hd++) { loc[2 * hd] = point[0]; loc[2 * hd + 1] = point[1]; }
  return loc;
}

function sampleResult(out, point, loc, opts) {
  const [h, w] = LEVELS[SAMPLE_LEVEL];
  return { output: out, point, loc, ...bilinearCorners(loc[0], loc[1], h, w, opts) };
}

// What the wasm sampler reads at `point`.
export function sampleAt(ctx, point) {
  const loc = sampleLocations(point);
  ctx.sample.sampler.samplingLocations.set(loc);
  const out = ctx.sample.sampler.forward().data.slice();
  return sampleResult(out, point, loc, ctx.ui.opts);
}

export function computeSample(ctx) {
  ctx.sample.result = sampleAt(ctx, ctx.sample.point.slice());
}

// WebGPU: the coarse map kept on the GPU (a GpuSession's tensor), read with gpu.forward.
export function prepareSampleGpu(ctx, session) {
  const [h, w] = LEVELS[SAMPLE_LEVEL];
  const start = ctx.data.levelStartIndex[SAMPLE_LEVEL] * NUM_HEADS * CHANNELS;
  ctx.sample.gpuValue = session.tensor(ctx.data.value.subarray(start, start + h * w * NUM_HEADS * CHANNELS), [1, h * w, NUM_HEADS, CHANNELS]);
}

// The reading at the point as it is now, as computeSample's result, later (a Promise).
export async function sampleGpu(ctx, gpu) {
  const point = ctx.sample.point.slice(), opts = { ...ctx.ui.opts };
  const loc = sampleLocations(point);
  const out = await gpu.forward({
    value: ctx.sample.gpuValue, spatialShapes: [LEVELS[SAMPLE_LEVEL].slice()], levelStartIndex: [0],
    samplingLocations: { data: loc, shape: [1, 1, NUM_HEADS, 1, 1, 2] },
    attentionWeights: { data: new Float32Array(NUM_HEADS).fill(1), shape: [1, 1, NUM_HEADS, 1, 1] },
    alignCorners: opts.alignCorners, paddingMode: opts.paddingMode,
  });
  return { ...sampleResult(out.data, point, loc, opts), backend: 'webgpu' };
}

export function drawSample(ctx) {
  const { images, ui } = ctx;
  const res = ctx.sample.result;
  const canvas = $('sample-canvas');
  const g = beginCanvas(canvas);
  const r = imageRect(ui.opts, SAMPLE_LEVEL);
  g.drawImage(images[SAMPLE_LEVEL][0], r.x, r.y, r.w, r.h);
  g.fillStyle = 'rgba(0,0,0,0.35)';
  g.fillRect(0, 0, CANVAS_W, CANVAS_H);
  const [x, y] = [res.loc[0] * CANVAS_W, res.loc[1] * CANVAS_H];
  const cornersInside = res.corners.filter((c) => c.inside);
  // The four corner pixels at full brightness, outlined, lit by their weight.
  for (const c of cornersInside) {
    const b = pixelBox(ui.opts, SAMPLE_LEVEL, c.row, c.col);
    g.save();
    g.beginPath(); g.rect(b.x, b.y, b.w, b.h); g.clip();
    g.drawImage(images[SAMPLE_LEVEL][0], r.x, r.y, r.w, r.h);
    g.restore();
    g.lineWidth = 1 + 4 * c.weight; g.strokeStyle = '#fff';
    g.strokeRect(b.x, b.y, b.w, b.h);
    g.beginPath(); g.moveTo(x, y); g.lineTo(b.x + b.w / 2, b.y + b.h / 2);
    g.lineWidth = 1.5; g.setLineDash([3, 3]); g.stroke(); g.setLineDash([]);
  }
  for (const [k, c] of res.corners.entries()) {
    const b = pixelBox(ui.opts, SAMPLE_LEVEL, c.row, c.col);
    const dx = k % 2 === 0 ? -1 : 1, dy = k < 2 ? -1 : 1;
    label(g, c.weight.toFixed(2), b.x + b.w / 2 + dx * (b.w / 2 + 18), b.y + b.h / 2 + dy * (b.h / 2 + 8),
      c.inside ? '#fff' : '#9aa6bd');
  }
  g.beginPath(); g.arc(x, y, 6, 0, 2 * Math.PI);
  g.fillStyle = POINT_COLOURS[1]; g.fill();
  g.lineWidth = 2; g.strokeStyle = '#000'; g.stroke();
}

export function renderSampleSide(ctx) {
  const { data } = ctx;
  const res = ctx.sample.result;
  const names = CHANNEL_NAMES(0);
  const out = res.output.subarray(0, CHANNELS);
  const w = LEVELS[SAMPLE_LEVEL][1];
  const start = data.levelStartIndex[SAMPLE_LEVEL];
  const corners = $('sample-corners');
  corners.textContent = '';
  for (const c of res.corners) {
    const div = document.createElement('div');
    div.className = `corner${c.inside ? '' : ' outside'}`;
    const chip = document.createElement('span');
    chip.className = 'chip';
    if (c.inside) {
      const base = ((start + c.row * w + c.col) * NUM_HEADS) * CHANNELS;
      chip.style.background = css(rgbOf(data.value.subarray(base, base + 3), 0));
    } else {
      chip.style.background = 'transparent';
      chip.style.borderStyle = 'dashed';
    }
    const txt = document.createElement('span');
    txt.innerHTML = `<span class="mono">${c.weight.toFixed(3)}</span> ${c.inside ? `<span class="dim">row ${c.row}, col ${c.col}</span>` : '<span class="dim">outside: reads 0</span>'}`;
    div.append(chip, txt);
    corners.append(div);
  }
  corners.dataset.corners = JSON.stringify(res.corners.map((c) => [c.row, c.col, c.weight]));
  const vec = $('sample-vector');
  vec.textContent = '';
  const sw = document.createElement('span'); sw.className = 'name'; sw.textContent = 'colour';
  const chip = document.createElement('span'); chip.className = 'chip'; chip.style.background = css(rgbOf(out, 0));
  const blank = document.createElement('span');
  vec.append(sw, chip, blank);
  out.forEach((v, c) => vec.append(...channelRow(names[c], v, c < 4 ? 1 : 2)));
  vec.dataset.values = JSON.stringify(Array.from(out));
}

export function renderSample(ctx) {
  drawSample(ctx);
  renderSampleSide(ctx);
}
