// What the JS CLI's crosscheck --expect report adds to the report both CLIs print (the native CLI
// is frozen: docs/cli.md "Two command lines"): where the sample of a disagreeing location or
// weight gradient element lies, and a hint when every output disagrees.
import { pixel } from '../core/geometry.js';
import { say, T } from './messages.js';

// An axis's position in pixels, by what it does to the sample: 'outside' (zeros padding, no
// corner inside), 'clamped' (border padding, at or past the edge pixel's centre), 'on an edge'
// (zeros padding, a corner in the padding), 'on a pixel' (an integer position, where a location
// gradient jumps), 'inside'; the most telling first.
const ORDER = ['NaN', 'outside', 'clamped', 'on an edge', 'on a pixel', 'inside'];
function axisWhere(pos, size, paddingMode) {
  if (Number.isNaN(pos)) return 'NaN';
  if (paddingMode === 'border') {
    if (pos <= 0 || pos >= size - 1) return 'clamped';
  } else if (pos < -1 || pos >= size) {
    return 'outside';
  } else if (pos < 0 || pos > size - 1) {
    return 'on an edge';
  }
  return Number.isInteger(pos) ? 'on a pixel' : 'inside';
}

// Both axes in words: 'outside' when both are, else the more telling one and its axis.
function where(wx, wy) {
  if (wx === wy) return wx;
  return ORDER.indexOf(wx) < ORDER.indexOf(wy) ? `${wx} in x` : `${wy} in y`;
}

/**
 * The sample of element co (coordinates) of grad_sampling_locations or grad_attention_weights:
 * { level, x, y, height, width, where }, x and y its position in pixels; null for other outputs.
 */
export function sampleOf(name, co, args) {
  if (name !== 'grad_sampling_locations' && name !== 'grad_attention_weights') return null;
  const { b, q, h, l, p } = co;
  const [H, W] = args.spatialShapes[l];
  const s = args.samplingLocations.shape, data = args.samplingLocations.data;
  const bq = args.samplingLocationsLayout === 'BQHLP2';
  // (b, q, h, l, p, xy) in either layout
  const at = (xy) => (bq ? (((((b * s[1] + q) * s[2] + h) * s[3] + l) * s[4] + p) * 2 + xy)
    : (((((b * 2 + xy) * s[2] + q) * s[3] + h) * s[4] + l) * s[5] + p));
  const x = pixel(data[at(0)], W, args.alignCorners).pos, y = pixel(data[at(1)], H, args.alignCorners).pos;
  return { level: l, x, y, height: H, width: W,
    where: where(axisWhere(x, W, args.paddingMode), axisWhere(y, H, args.paddingMode)) };
}

// A position as the report prints it: float32's digits.
const short = (v) => String(Number(v.toPrecision(7)));

/** The report's line for a sample (under its worst element's line). */
export const sampleLine = (s) => say(T.sampleAt, short(s.x), short(s.y), s.level, s.height, s.width, s.where);

/** The hint when every compared output disagrees (two or more), else null. */
export const allDisagreeHint = (results) => (results.length > 1 && results.every(([, r]) => r.disagree) ? T.hintAllDisagree : null);
