// msda crosscheck for the JS CLI: --expect DIR against the float64 reference with per-element
// bounds (src/cli/crosscheck.c is the other half), and without --expect, a backend against
// native or the reference.
import {
  compareWithBounds, coordinates, formatCoordinates, OUTPUT_NAMES as CHECKED_OUTPUTS, referenceWithBounds, UNIT_ROUNDOFF,
} from './bounds.js';
import { BAD_ISA, NATIVE_UNAVAILABLE } from '../core/errors.js';
import { narrowToHalf, widenHalf } from '../core/half.js';
import { formatShape } from '../npy.js';
import { backendApi, badIsa, compute } from './backends.js';
import { deriveProblem, exists, loadCase, openSource, sameShape } from './cases.js';
import { bad, CliError, joinPath, say, shown, T } from './messages.js';
import { fmt, jsonNumber, pair } from './numbers.js';
import { allDisagreeHint, sampleLine, sampleOf } from './samples.js';

const TOLERANCE = Object.freeze({ abs: 1e-5, rel: 1e-4, scale: 0 });
// Float32 kernels against the float64 reference: plus 1e-4 of the tensor's largest magnitude,
// the bound docs/guarantees.md "Semantics" states for location gradients on large levels.
const REFERENCE_TOLERANCE = Object.freeze({ abs: 1e-5, rel: 1e-4, scale: 1e-4 });

/**
 * Compares got with ref element by element: the largest absolute difference, the largest
 * relative one (over elements with ref != 0), and how many elements fall outside
 * |got - ref| <= abs + rel*|ref| (NaN matches NaN; an infinity matches the same infinity).
 */
function compareArrays(got, ref, tol = TOLERANCE) {
  let maxAbs = 0, maxRel = 0, bad = 0, worst = -1, worstExcess = -Infinity, largest = 0;
  if (tol.scale) for (const r of ref) if (Number.isFinite(r)) largest = Math.max(largest, Math.abs(r));
  for (let i = 0; i < ref.length; i++) {
    const a = got[i], r = ref[i];
    if (Number.isNaN(a) && Number.isNaN(r)) continue;
    if (a === r) continue; // same infinities too
    const d = Math.abs(a - r);
    const diff = Number.isNaN(d) ? Infinity : d;
    maxAbs = Math.max(maxAbs, diff);
    if (r !== 0) maxRel = Math.max(maxRel, diff / Math.abs(r));
    const limit = tol.abs + tol.rel * Math.abs(r) + (tol.scale ? tol.scale * largest : 0);
    if (!(diff <= limit)) {
      bad++;
      const excess = diff - limit;
      if (excess > worstExcess || worst < 0) { worstExcess = excess; worst = i; }
    }
  }
  return { maxAbs, maxRel, bad, worst, count: ref.length };
}


// Which inputs hold values the dtype cannot: then the user's kernel did not read these very
// inputs, and the comparison would measure the rounding of its inputs, not the kernel.
function notRepresentable(files, dtype) {
  if (dtype === 'float32') return [];
  const notes = [];
  for (const key of ['value', 'samplingLocations', 'attentionWeights', 'gradOutput']) {
    const f = files[key];
    if (!f) continue;
    const bits = narrowToHalf(f.data, dtype), back = widenHalf(bits, dtype);
    const i = f.data.findIndex((x, k) => !Object.is(x, back[k]) && !(Number.isNaN(x) && Number.isNaN(back[k])));
    if (i >= 0) notes.push(say(T.noteNotRepresentable, f.path, dtype, i, f.data[i], dtype));
  }
  return notes;
}

// The half-precision dtype that holds every value of data (NaN aside), when it has a value other
// than 0, or null: a dump of such a kernel, checked against float32's bound for want of --dtype.
// bfloat16 first: its values within float16's range are float16 values too.
function halfDtypeHolding(data) {
  if (!data.some((x) => x !== 0 && !Number.isNaN(x))) return null;
  return ['bfloat16', 'float16'].find((dtype) => {
    const back = widenHalf(narrowToHalf(data, dtype), dtype);
    return data.every((x, k) => Object.is(x, back[k]) || Number.isNaN(x));
  }) ?? null;
}

// Everything agrees: "all 4 outputs agree", "output agrees".
const allAgree = (names) => (names.length === 1 ? say(T.agrees, names[0]) : say(T.allAgree, names.length));

// --expect: the user's files against the float64 reference with per-element bounds.
async function crosscheckExpected(o, print, expected) {
  const wantForward = 'output' in expected;
  const wantBackward = Object.keys(expected).some((n) => n !== 'output');
  const files = loadCase(o.in, wantBackward);
  const args = deriveProblem(o, files);
  const names = CHECKED_OUTPUTS.filter((n) => n in expected);
  const ref = referenceWithBounds(args, { forward: wantForward, backward: wantBackward });
  for (const n of names) {
    const e = expected[n], want = n === 'output' ? [args.value.shape[0], args.attentionWeights.shape[1],
      (o.valueLayout === 'BLNC' ? args.value.shape[2] : args.value.shape[1]) * args.value.shape[3]]
      : n === 'grad_value' ? args.value.shape : n === 'grad_sampling_locations' ? args.samplingLocations.shape
        : args.attentionWeights.shape;
    if (!sameShape(e.shape, want)) {
      throw bad(say(T.expectShape, e.path, formatShape(e.exactShape), formatShape(want), n));
    }
  }
  // The dtype: as given, else the files' own when they are all half precision of one kind.
  let dtype = o.dtype, dtypeFrom = T.dtypeFromFlag;
  if (dtype === null && o.rtol === null && o.atol === null) {
    const kinds = new Set(names.map((n) => expected[n].dtype));
    dtype = kinds.size === 1 && kinds.has('<f2') ? 'float16' : kinds.size === 1 && kinds.has('bfloat16') ? 'bfloat16' : 'float32';
    dtypeFrom = dtype === 'float32' ? T.dtypeFromDefault : T.dtypeFromFiles;
  }
  const tol = dtype === null ? { rtol: o.rtol ?? 0, atol: o.atol ?? 0 } : { dtype };
  const rule = dtype === null ? say(T.ruleGiven, tol.atol, tol.rtol) : say(T.ruleOfDtype, T.boundRule, Math.log2(UNIT_ROUNDOFF[dtype]));
  const results = names.map((n) => [n, compareWithBounds(n, expected[n].data, ref[n], args, tol, o.top)]);
  const notes = dtype ? notRepresentable(files, dtype) : [];
  const failures = results.filter(([, r]) => r.disagree).map(([n, r]) => say(T.outputFailed, n, r.disagree, r.count));
  if (dtypeFrom === T.dtypeFromDefault) {
    for (const [n, r] of results) {
      const half = r.disagree ? halfDtypeHolding(expected[n].data) : null;
      if (half) notes.push(say(T.noteHalfValues, expected[n].path, half, half, half));
    }
  }
  if (o.backendNamed) notes.push(say(T.noteBackend, o.backend));
  const hint = allDisagreeHint(results);
  if (o.json) {
    const doc = {
      in: o.in, expect: o.expect, yours: say(T.yours, o.expect), ours: T.ours,
      tolerance: dtype === null ? { rtol: tol.rtol, atol: tol.atol, rule } : { dtype, from: dtypeFrom, unitRoundoff: UNIT_ROUNDOFF[dtype], rule },
      agree: failures.length === 0, notes,
      outputs: Object.fromEntries(results.map(([n, r]) => [n, {
        file: expected[n].path, dtype: expected[n].dtype, count: r.count, disagree: r.disagree,
        maxAbsDiff: jsonNumber(r.maxAbsDiff), maxRatioToBound: jsonNumber(r.maxRatio), noBound: r.noBound,
        perLevel: r.perLevel, perHead: r.perHead, onlyThroughP: r.onlyThroughP,
        worst: r.worst.map((w) => {
          const sample = sampleOf(n, w.coordinates, args);
          return {
            coordinates: w.coordinates, index: w.index, yours: jsonNumber(w.yours), ours: jsonNumber(w.ours),
            diff: jsonNumber(w.diff), bound: jsonNumber(w.bound),
            ...(sample ? { sample: { ...sample, x: jsonNumber(sample.x), y: jsonNumber(sample.y) } } : {}),
          };
        }),
      }])),
      hint,
    };
    print(JSON.stringify(doc, null, 2));
  } else {
    print(say(T.header, o.in, say(T.yours, o.expect), T.ours));
    print(dtype === null ? say(T.toleranceGiven, rule) : say(T.toleranceFor, dtype, dtypeFrom, rule));
    for (const note of notes) print(say(T.note, note));
    for (const [n, r] of results) {
      // a ratio to the bound of an element with none (ours exactly 0) would say nothing
      const ratio = r.noBound && !(r.maxRatio > 0) ? [] : [say(T.maxRatio, fmt(r.maxRatio))];
      const unbounded = r.noBound ? [say(T.noBound, r.noBound)] : [];
      const maxText = [say(T.maxDiff, fmt(r.maxAbsDiff)), ...ratio, ...unbounded].join(', ');
      const counts = [...(r.perLevel ? [say(T.perLevel, r.perLevel.map((c, l) => say(T.levelCount, l, c)).join(', '))] : []),
        say(T.perHead, r.perHead.map((c, h) => say(T.headCount, h, c)).join(', '))];
      print(r.disagree ? say(T.verdictDisagree, n, r.disagree, r.count, counts.join('; '), maxText) : say(T.verdictOk, n, r.count, maxText));
      if (r.onlyThroughP) print(say(T.onlyThroughP, r.onlyThroughP));
      for (const w of r.worst) {
        const [y, u] = pair(w.yours, w.ours);
        print(say(T.worst, formatCoordinates(n, w.coordinates), y, u, fmt(w.diff), fmt(w.bound)));
        const sample = sampleOf(n, w.coordinates, args);
        if (sample) print(sampleLine(sample));
      }
    }
    if (hint) print(hint);
    if (!failures.length) print(allAgree(names));
  }
  if (failures.length) throw new CliError(1, say(T.failed, failures.join(', ')));
}

export async function crosscheck(o, print) {
  const gradPath = joinPath(o.in, 'grad_output.npy');
  let expected = null;
  if (o.expect !== null) {
    const source = openSource('--expect', o.expect);
    // A file that is no output's would go unchecked: a typo must not pass.
    const files = CHECKED_OUTPUTS.map((n) => `${n}.npy`);
    const strays = source.names().filter((n) => !files.includes(n));
    if (strays.length > 1) throw bad(say(T.strayNames, '--expect', o.expect, shown(strays[0]), strays.length - 1, T.outputList));
    if (strays.length) throw bad(say(T.strayName, '--expect', o.expect, shown(strays[0]), T.outputList));
    expected = {};
    const problems = [];
    for (const n of ['output', 'grad_value', 'grad_sampling_locations', 'grad_attention_weights']) {
      try {
        if (source.has(`${n}.npy`)) expected[n] = source.read(`${n}.npy`, 'float');
      } catch (e) {
        if (!(e instanceof CliError)) throw e;
        problems.push(e.message);
      }
    }
    if (problems.length) throw bad(problems.join(T.also));
    if (Object.keys(expected).length === 0) throw bad(say(T.expectNone, o.expect, T.outputList));
    return crosscheckExpected(o, print, expected);
  }
  const wantForward = true;
  const wantBackward = exists(gradPath);
  const files = loadCase(o.in, wantBackward);
  const args = deriveProblem(o, files);

  const named = o.backendNamed;
  const tested = await backendApi(o.backend, o.threads, named);
  const testedName = tested.backend === 'wasm' ? `wasm (${tested.simd ? 'SIMD' : 'scalar'})` : tested.backend;
  let mine = {};
  if (wantForward) mine = { ...mine, ...compute(tested, 'forward', args, named) };
  if (wantBackward) mine = { ...mine, ...compute(tested, 'backward', args, named) };

  let pairs, refName; // [name, got, ref]
  let tolerance = TOLERANCE;
  {
    // Native where the addon loads (and is not what is tested), else the float64 reference.
    let native = null, whyNot = '';
    if (tested.backend !== 'native') {
      const { init } = await import('../index.js');
      try {
        native = await init({ backend: 'native' });
      } catch (e) {
        if (e.code === BAD_ISA) throw badIsa(e);
        whyNot = e.code === NATIVE_UNAVAILABLE ? say(T.nativeNotHere, `${process.platform}-${process.arch}`)
          : T.nativeDoesNotLoad;
      }
    }
    let ref = {};
    if (native) {
      if (wantForward) ref = { ...ref, ...compute(native, 'forward', args, true) };
      if (wantBackward) ref = { ...ref, ...compute(native, 'backward', args, true) };
      print(say(T.againstNative, o.in, testedName));
      refName = 'native';
    } else {
      const { referenceBackward, referenceForward } = await import('../reference.js');
      const { gradOutput, threads, ...forwardArgs } = args;
      if (wantForward) ref.output = referenceForward(forwardArgs);
      if (wantBackward) {
        const g = referenceBackward({ ...forwardArgs, gradOutput });
        Object.assign(ref, { grad_value: g.gradValue, grad_sampling_locations: g.gradSamplingLocations,
          grad_attention_weights: g.gradAttentionWeights });
      }
      tolerance = REFERENCE_TOLERANCE;
      refName = 'reference';
      print(say(T.againstReference, o.in, testedName, whyNot));
    }
    pairs = Object.keys(mine).map((n) => [n, mine[n].data, ref[n].data]);
  }
  if (!wantBackward) print(say(T.backwardSkipped, gradPath));
  print(tolerance.scale ? T.passWhenReference : T.passWhen);
  const failures = [];
  for (const [name, got, ref] of pairs) {
    const c = compareArrays(got, ref, tolerance);
    let verdict = T.rowOk;
    if (c.bad) {
      const [g, r] = pair(got[c.worst], ref[c.worst]);
      verdict = say(T.rowDisagree, c.bad, c.count, formatCoordinates(name, coordinates(name, c.worst, args)), testedName, g, refName, r);
      failures.push(say(T.outputFailed, name, c.bad, c.count));
    }
    print(say(T.row, name, fmt(c.maxAbs), fmt(c.maxRel), verdict));
  }
  if (failures.length) throw new CliError(1, say(T.failed, failures.join(', ')));
  print(allAgree(pairs.map(([n]) => n)));
}
