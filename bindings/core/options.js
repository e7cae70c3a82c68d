// The problem's options, declared once: this table is the JS half, src/options.h the C half.
// core/args.js (reading and defaults), core/problem.js (the problem description), the JS CLI's
// flags (bindings/cli/args.js) and the WebGPU problem's words (bindings/webgpu/plan.js) come from
// it; tests/js/options.test.js holds src/options.h, src/msda.h's enums, problem_desc.h's slots,
// bindings/index.d.ts's types, both CLIs' help and the WGSL to it. docs/internals.md ("Adding an
// option") lists the files a new option or value touches, in order.
// Part of bindings/core/: environment-neutral code (no fetch, fs, workers or addon here).

/**
 * One entry per option:
 *   name     the JS API's argument (and the tfjs op's, the worker's)
 *   values   its values in the C enum's order: a value's index is its number in C, in the problem
 *            description and in the WGSL problem
 *   default  what the reference API takes when it is not given
 *   c        the msda_problem field (src/msda.h); cValues its enum's constants (null: an int 0 / 1)
 *   desc     the problem description's slot (core/problem.js DESC, bindings/c/problem_desc.h)
 *   cli      the CLIs' flag (a switch where the values are false and true)
 *   type     the TypeScript type of the argument (bindings/index.d.ts)
 *   wgsl     the WebGPU problem's word (bindings/webgpu/kernels/problem.js) and what it holds for
 *            each value
 */
export const OPTIONS = Object.freeze([
  {
    name: 'valueLayout', values: ['BLNC', 'BNLC'], default: 'BLNC',
    c: 'value_layout', cValues: ['MSDA_VALUE_BLNC', 'MSDA_VALUE_BNLC'], desc: 'valueLayout',
    cli: '--value-layout', type: 'ValueLayout', wgsl: { word: 'blnc', words: [1, 0] },
  },
  {
    name: 'samplingLocationsLayout', values: ['BQHLP2', 'B2QHLP'], default: 'BQHLP2',
    c: 'locations_layout', cValues: ['MSDA_LOCATIONS_BQHLP2', 'MSDA_LOCATIONS_B2QHLP'], desc: 'locationsLayout',
    cli: '--sampling-locations-layout', type: 'SamplingLocationsLayout', wgsl: { word: 'bqhlp2', words: [1, 0] },
  },
  {
    name: 'alignCorners', values: [false, true], default: false,
    c: 'align_corners', cValues: null, desc: 'alignCorners',
    cli: '--align-corners', type: 'boolean', wgsl: { word: 'half_shift', words: [1, 0] },
  },
  {
    name: 'paddingMode', values: ['zeros', 'border'], default: 'zeros',
    c: 'padding', cValues: ['MSDA_PADDING_ZEROS', 'MSDA_PADDING_BORDER'], desc: 'padding',
    cli: '--padding-mode', type: 'PaddingMode', wgsl: { word: 'padding', words: [0, 1] },
  },
].map((o) => Object.freeze(o)));

/** The option named `name`. */
export const option = (name) => OPTIONS.find((o) => o.name === name);

/** The number of `value` of option `o` (its index: the C value); -1 when it is none of them. */
export const optionNumber = (o, value) => o.values.indexOf(value);

/** Options whose values are words (the layouts, the padding), read as strings; the others are switches. */
export const isChoice = (o) => typeof o.values[0] === 'string';
