// Step 3, how far the output is from what we want: the target on the picture, output and target
// side by side, channel by channel, and the loss.
import { CHANNELS, NUM_POINTS } from './scene.js';
import { $, NL, CANVAS_W, CANVAS_H, POINT_COLOURS, CHANNEL_NAMES, slot } from './page-state.js';
import { beginCanvas, imageRect, crosshair, rgbOf, css, channelRow } from './draw.js';
import { formatLoss, formatValue } from './format.js';

export function drawTargetCanvas(ctx) {
  const { ui, state, images } = ctx;
  const canvas = $('target-canvas');
  const g = beginCanvas(canvas);
  const r = imageRect(ui.opts, 0);
  g.drawImage(images[0][ui.head], r.x, r.y, r.w, r.h);
  for (let l = 0; l < NL; l++) {
    for (let p = 0; p < NUM_POINTS; p++) {
      const i = slot(ui.head, l, p);
      g.beginPath();
      g.arc(state.samplingLocations[2 * i] * CANVAS_W, state.samplingLocations[2 * i + 1] * CANVAS_H, 3.5, 0, 2 * Math.PI);
      g.fillStyle = POINT_COLOURS[p]; g.fill();
      g.lineWidth = 1; g.strokeStyle = '#000'; g.stroke();
    }
  }
  crosshair(g, state.target[0] * CANVAS_W, state.target[1] * CANVAS_H);
}

export function renderLoss(ctx) {
  const { ui, result } = ctx;
  const head = ui.head;
  const out = result.output.subarray(head * CHANNELS, (head + 1) * CHANNELS);
  const tgt = result.targetFeature.subarray(head * CHANNELS, (head + 1) * CHANNELS);
  $('loss-output').style.background = css(rgbOf(out, head));
  $('loss-target').style.background = css(rgbOf(tgt, head));
  $('loss-3').textContent = formatLoss(result.loss);
  const host = $('loss-channels');
  host.textContent = '';
  for (const t of [`head ${head}`, 'output', 'bar: output, | target', 'target']) {
    const s = document.createElement('span'); s.className = 'hdr'; s.textContent = t; host.append(s);
  }
  const names = CHANNEL_NAMES(head);
  for (let c = 0; c < CHANNELS; c++) {
    const [n, num, bar] = channelRow(names[c], out[c], c < 4 ? 1 : 2, tgt[c]);
    const tnum = document.createElement('span'); tnum.className = 'mono'; tnum.textContent = formatValue(tgt[c]);
    host.append(n, num, bar, tnum);
  }
  drawTargetCanvas(ctx);
}
