// ms-deform-attn/onnx: runs an ONNX model of the Deformable DETR family with ORT for everything but
// its deformable-attention blocks, which run on this package's op.
//
//   import * as ort from 'onnxruntime-web';            // or 'onnxruntime-node': the caller's own
//   import { createSession } from 'ms-deform-attn/onnx';
//   const session = await createSession(ort, modelBytes, { executionProviders: ['wasm'] });
//   const outputs = await session.run(feeds);          // what ORT's session.run would return
//   session.report.blocks;                             // each block found, replaced or why not
//
// How: the blocks are found in the graph (onnx/blocks.js), their shapes read from one ORT run of
// the model (a probe: on zeros when its inputs are static, else at the first run() of each set of
// input shapes, on the caller's feeds; onnx/chain.js), each block run alone through ORT and through our op on seeded
// inputs and replaced only when both meet crosscheck's bound (onnx/verify.js); the graph is then
// cut at the replaced blocks into ORT sessions (onnx/plan.js), and run() chains them through the op.
// Plugin nodes (TensorRT's, mmdeploy's), which ORT cannot run, are read by their documented inputs
// (levels constant or computed by the graph); a graph with them is cut at every block, both kinds,
// and its stages made and run in turn (onnx/staged.js).

import { decodeModel, Graph, loadOnnx, ONNX_UNAVAILABLE } from './onnx/model.js';

export { ONNX_UNAVAILABLE };
import { findGridSampleBlocks, findPluginBlocks } from './onnx/blocks.js';
import { buildChain, releaseChain, runChain, staticFeeds } from './onnx/chain.js';
import { foldLevels } from './onnx/levels.js';
import { buildStagedChain } from './onnx/staged.js';

const PREFIX = 'ms-deform-attn/onnx';

function readOrt(ort) {
  if (!ort || typeof ort !== 'object' && typeof ort !== 'function' || typeof ort.InferenceSession?.create !== 'function' || typeof ort.Tensor !== 'function') {
    throw new TypeError(`${PREFIX}: createSession: ort: expected the onnxruntime-web or onnxruntime-node module (with InferenceSession.create and Tensor), got ${ort === null ? 'null' : typeof ort}`);
  }
  return ort;
}

function readBytes(model) {
  if (model instanceof Uint8Array) return model;
  if (model instanceof ArrayBuffer) return new Uint8Array(model);
  if (ArrayBuffer.isView(model)) return new Uint8Array(model.buffer, model.byteOffset, model.byteLength);
  throw new TypeError(`${PREFIX}: createSession: model: expected the .onnx file's bytes (Uint8Array or ArrayBuffer), got ${model === null ? 'null' : typeof model === 'object' ? model.constructor?.name ?? 'object' : typeof model}`);
}

function readOptions(options) {
  if (options === undefined) return {};
  if (options === null || typeof options !== 'object') throw new TypeError(`${PREFIX}: createSession: options: expected an object, got ${options === null ? 'null' : typeof options}`);
  const { executionProviders, msda, sessionOptions } = options;
  if (executionProviders !== undefined && !Array.isArray(executionProviders)) {
    throw new TypeError(`${PREFIX}: createSession: options.executionProviders: expected an array (ORT's), got ${typeof executionProviders}`);
  }
  if (msda !== undefined && (msda === null || typeof msda.forward !== 'function')) {
    throw new TypeError(`${PREFIX}: createSession: options.msda: expected an instance from ms-deform-attn's init(), got ${msda === null ? 'null' : typeof msda}`);
  }
  if (sessionOptions !== undefined && (sessionOptions === null || typeof sessionOptions !== 'object')) {
    throw new TypeError(`${PREFIX}: createSession: options.sessionOptions: expected an object (ORT's session options), got ${sessionOptions === null ? 'null' : typeof sessionOptions}`);
  }
  return { executionProviders, msda, sessionOptions };
}

function entry(block, k) {
  return {
    id: k,
    formulation: block.formulation,
    nodes: block.names,
    tensors: { value: block.value, samplingLocations: block.samplingLocations, attentionWeights: block.attentionWeights, output: block.output },
    alignCorners: block.alignCorners,
    paddingMode: block.paddingMode,
    ...(block.names.plugin ? { levelsFrom: block.levels ? 'constants' : 'run time' } : {}),
    replaced: false,
    why: null,
  };
}

/**
 * Creates the chained session: see the file's head and docs/onnx.md. Resolves to
 * { run(feeds), inputNames, outputNames, release(), report }.
 */
export async function createSession(ortGiven, modelGiven, optionsGiven) {
  const ort = readOrt(ortGiven);
  const bytes = readBytes(modelGiven);
  const { executionProviders, msda: msdaGiven, sessionOptions } = readOptions(optionsGiven);
  const options = { ...sessionOptions, ...(executionProviders ? { executionProviders } : {}) };
  if (options.preferredOutputLocation !== undefined) throw new TypeError(`${PREFIX}: createSession: options.sessionOptions.preferredOutputLocation: the chain sets it (run() returns what ORT's session would by default), got ${JSON.stringify(options.preferredOutputLocation)}`);
  await loadOnnx();
  const graph = new Graph(decodeModel(bytes));
  const grids = findGridSampleBlocks(graph), plugins = findPluginBlocks(graph);
  // Levels computed from constants alone are evaluated now, and read as constants.
  for (const b of plugins.blocks) {
    const { why } = b.levels ? {} : await foldLevels(ort, options, graph, b);
    if (why) plugins.skipped.push({ where: [b.names.plugin], why, plugin: true });
  }
  const pluginNodes = plugins.blocks.length > 0;
  // A graph with plugin nodes (which ORT cannot run) is cut at all its blocks, both kinds, and
  // built stage by stage; one without is probed whole. The report lists the blocks in the graph's order.
  const found = [...plugins.blocks, ...grids.blocks].sort((a, b) => a.at - b.at);
  const entries = found.map(entry);
  const skipped = [...grids.skipped, ...plugins.skipped];
  const report = { blocks: entries, notBlocks: skipped.map(({ where, why }) => ({ nodes: where, replaced: false, why })) };
  if (plugins.skipped.length) throw new Error(`${PREFIX}: createSession: ${plugins.skipped.map((x) => `${x.where[0]}: ${x.why}`).join('; ')}; ONNX Runtime cannot run these nodes either`);
  const build = pluginNodes ? buildStagedChain : buildChain;
  let msda = msdaGiven, ownMsda = false;
  // On ORT's WebGPU EP the op runs on ORT's own device (made by the first session), tensors kept there.
  const webgpu = (executionProviders ?? []).some((ep) => (typeof ep === 'string' ? ep : ep?.name) === 'webgpu');
  const getMsda = async () => {
    if (!msda) {
      const { init } = await import('ms-deform-attn');
      msda = webgpu && ort.env?.webgpu ? await init({ backend: 'webgpu', device: await ort.env.webgpu.device }) : await init();
      ownMsda = true;
    }
    return msda;
  };
  // One chain per set of input shapes: made now when the model's inputs are static, else at the
  // first run() of each set of shapes (its probe is a run of the model on the caller's feeds).
  const chains = new Map();
  const release = async () => {
    await Promise.all([...chains.values()].map(async (c) => releaseChain(await c)));
    if (ownMsda) msda.dispose?.();
  };
  const keyOf = (feeds) => JSON.stringify(graph.inputs.map((n) => [...feeds.get(n).dims]));
  if (found.length === 0) {
    chains.set(null, Promise.resolve({ stages: [{ session: await ort.InferenceSession.create(bytes, options), inputs: graph.inputs }], ops: [] }));
  } else {
    // Levels computed from the inputs' values are not read from zeros: at the first run() instead.
    const fromValues = plugins.blocks.find((b) => b.levelsFromValues);
    const statics = fromValues ? { why: `${fromValues.names.plugin}'s spatial_shapes or level_start_index is computed from the model's inputs' values` } : staticFeeds(ort, graph);
    if (statics.feeds) {
      try {
        const made = await build(ort, options, graph, found, entries, new Map(Object.entries(statics.feeds)), getMsda);
        chains.set(keyOf(new Map(Object.entries(statics.feeds))), Promise.resolve(made));
      } catch (e) {
        await release();
        throw e;
      }
    } else {
      for (const e of entries) e.why = `not read yet: ${statics.why}, so each block is read, verified and replaced at the first run() of each set of input shapes`;
    }
  }
  let released = false;
  const inputNames = [...graph.inputs], outputNames = [...graph.outputs];
  return {
    inputNames,
    outputNames,
    report,
    async run(feeds) {
      if (released) throw new Error(`${PREFIX}: run: the session was released`);
      if (feeds === null || typeof feeds !== 'object') throw new TypeError(`${PREFIX}: run: feeds: expected an object from input name to ort.Tensor, got ${feeds === null ? 'null' : typeof feeds}`);
      const live = new Map();
      for (const name of inputNames) {
        const t = feeds[name];
        if (!t || typeof t !== 'object' || !Array.isArray(t.dims)) throw new TypeError(`${PREFIX}: run: feeds.${name}: expected an ort.Tensor (the model's inputs are ${inputNames.join(', ')}), got ${t === null ? 'null' : typeof t}`);
        live.set(name, t);
      }
      const key = chains.has(null) ? null : keyOf(live);
      if (!chains.has(key)) chains.set(key, build(ort, options, graph, found, entries, live, getMsda));
      let chain;
      try {
        chain = await chains.get(key);
      } catch (e) {
        chains.delete(key);
        throw e;
      }
      return runChain(ort, chain, chain.ops.length ? await getMsda() : null, live, outputNames);
    },
    async release() {
      if (released) return;
      released = true;
      await release();
    },
  };
}
