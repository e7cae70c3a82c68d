// What the page's steps share: one context object, created once by app.js and passed to every
// step's functions (no module-level state). Constants of the page's problem live here too.
import { LEVELS, NUM_HEADS, NUM_POINTS, HEADS, POSITION_CHANNELS } from './scene.js';

export const NL = LEVELS.length;
export const SLOTS = NUM_HEADS * NL * NUM_POINTS;
export const POINT_COLOURS = ['#ff5a8a', '#ffd23f', '#5ef2a0', '#59c3ff'];
// Canvases are drawn in logical units of CANVAS_W × CANVAS_H (4:3 like the maps); the backing
// store follows the displayed size and devicePixelRatio.
export const CANVAS_W = 320, CANVAS_H = 240;
export const CHANNEL_NAMES = (head) => [...HEADS[head].channels, ...POSITION_CHANNELS];

export const $ = (id) => document.getElementById(id);
export const slot = (h, l, p) => (h * NL + l) * NUM_POINTS + p;
export const clamp01 = (x) => Math.min(1, Math.max(0, x));

// The page's state. `actions` is filled in by app.js: the few calls every step makes back into
// the page (recompute after a change, redraw, stop playing, run guarded).
export function createContext() {
  return {
    ui: {
      opts: { alignCorners: false, paddingMode: 'zeros', valueLayout: 'BLNC', samplingLocationsLayout: 'BQHLP2' },
      module: 'simd',
      threads: 'auto',
      head: 0,
      heat: true,
      weightMode: 'softmax',
      learningRate: 0.01,
      selected: [0, 0, 0],      // the keyboard-selected point on each level
      playing: false,
      steps: 0,
      history: [],
      renders: 0,
      stuck: null,
    },
    simdAvailable: true,
    msda: null,                 // the module in use
    instances: new Map(),       // one per module choice, kept for the page's life
    data: null,                 // the value tensor and its shapes (scene.js)
    state: null,                // locations, weights, logits, target
    optimizer: null,
    result: null,               // the last Session.evaluate()
    session: null,
    images: [],                 // images[level][head]: each map as a small canvas
    timings: { forward: [], backward: [] },
    sample: { sampler: null, point: [0.43, 0.6], result: null },       // step 1
    points: { sampler: null, samples: null },                          // step 2
    query: { t: 0 },
    pull: { level: 2, point: 0, view: null, dragging: false, last: null },   // step 4's point            // where the query sits along its slider (query.js)
    sumViews: [],               // step 2's pyramid
    sumSelected: [0, 0, 0],     // its keyboard-selected point on each level
    levelViews: [],             // the playground's maps
    pointRows: [],              // the playground's weight rows
    // What the last drawing showed, for the tests: each level's arrows (gradient magnitude
    // and length in canvas units).
    drawn: { arrows: LEVELS.map(() => []) },
    play: { frame: 0 },
    actions: null,
  };
}
