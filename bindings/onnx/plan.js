// Cutting a graph at its replaced blocks: every node gets the stage after the last block its
// inputs depend on; a stage is one ORT session, and block k runs between the stage that makes its
// inputs and the one that reads its output. Nodes computed from constants alone (graph.constNodes)
// are copied into each stage that reads them (nothing carried across a cut but live tensors). A
// block reads `reads`: its value, locations and weights, and a plugin node's levels when the
// graph computes them from what is not constant.

/**
 * stages: [{ nodes (indices, the model's order), inputs, outputs (tensor names) }]; ops: for
 * each replaced block, `before`: the index of the stage it runs before (stages.length: after all).
 */
export function planStages(graph, blocks) {
  const inBlock = new Set(blocks.flatMap((b) => [...b.nodes]));
  const blockOf = new Map(blocks.map((b) => [b.output, b]));
  const stage = new Map(); // tensor -> stage
  const constants = new Set(graph.initializers.keys());
  for (const i of graph.constNodes) for (const o of graph.nodes[i].output) constants.add(o);
  const stageOfTensor = (t) => {
    if (!t || constants.has(t)) return 0;
    if (stage.has(t)) return stage.get(t);
    const b = blockOf.get(t);
    if (b) {
      const s = Math.max(...b.reads.map(stageOfTensor)) + 1;
      stage.set(t, s);
      return s;
    }
    return 0; // a model input
  };
  const nodeStage = new Map();
  graph.nodes.forEach((n, i) => {
    if (inBlock.has(i) || graph.constNodes.has(i)) return;
    const s = Math.max(0, ...n.input.map(stageOfTensor));
    nodeStage.set(i, s);
    for (const o of n.output) stage.set(o, s);
  });
  const count = Math.max(0, ...nodeStage.values(), ...blocks.map((b) => stageOfTensor(b.output))) + 1;
  const stages = Array.from({ length: count }, () => ({ nodes: [], inputs: new Set(), outputs: new Set() }));
  for (const [i, s] of nodeStage) stages[s].nodes.push(i);
  // Who reads each tensor: a stage, a block, or the caller (the model's outputs).
  const readers = new Map();
  const read = (t, s) => { if (!readers.has(t)) readers.set(t, []); readers.get(t).push(s); };
  for (const [i, s] of nodeStage) for (const x of graph.nodes[i].input) if (x && !constants.has(x)) read(x, s);
  for (const b of blocks) for (const x of b.reads) read(x, Infinity);
  for (const o of graph.outputs) read(o, Infinity);
  for (const [t, rs] of readers) {
    const made = stage.get(t);
    const producedHere = made !== undefined && !blockOf.has(t) && graph.producer.has(t);
    for (const s of rs) {
      if (producedHere && s !== made) stages[made].outputs.add(t);
      if (s !== Infinity && !(producedHere && s === made)) stages[s].inputs.add(t);
    }
  }
  // The constant nodes each stage reads, and those they read, copied in (last to first: the
  // nodes are in topological order).
  for (const st of stages) {
    const need = new Set(st.nodes.flatMap((i) => graph.nodes[i].input));
    for (let i = graph.nodes.length - 1; i >= 0; i--) {
      const n = graph.nodes[i];
      if (!graph.constNodes.has(i) || !n.output.some((o) => need.has(o))) continue;
      st.nodes.push(i);
      for (const x of n.input) need.add(x);
    }
    st.nodes.sort((a, b) => a - b);
  }
  return {
    stages: stages.map((st) => ({ nodes: st.nodes, inputs: [...st.inputs], outputs: [...st.outputs] })),
    ops: blocks.map((b) => ({ block: b, before: stageOfTensor(b.output) })),
  };
}
