// Exclusive prefix sums of disp.count u32 values (gpu.js CallEncoder.scan), in blocks of SCAN_BLOCK
// values, an invocation a block (disp.n blocks), in two dispatches:
//   scanReduce  each block's total into sums;
//   scan        each block scanned and the blocks before it added: their totals summed by the
//               invocation itself (disp.base 1, up to SCAN_FLAT blocks: the same totals for every
//               invocation, read from cache), or read from sums already scanned (disp.base 2:
//               more blocks, whose totals gpu.js scans first, the same way), or none (one
//               block, disp.base 0).
// scanTwo: two such sums at once, where both are short and their totals counted (one dispatch).
// src is zeroed as it is read where disp.clear (a histogram counted into again: the next count
// then needs no clear). No workgroup memory and no barrier: an emulator such as SwiftShader pays
// for each (zero-filling the memory, switching coroutines at the barrier), a GPU reads a block's
// consecutive values from cache.

import { SCAN_BLOCK, WORKGROUP, program } from './problem.js';

export const SCAN_FLAT = 1024;

export const SCAN_REDUCE = program('scanReduce', {
  problem: false,
  words: ['count'],
  bindings: {
    src: 'read array<u32>',
    sums: 'read_write array<u32>',
  }
}, /* wgsl */ `
@compute @workgroup_size(${WORKGROUP})
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let block = invocation(gid);
  let first = block * ${SCAN_BLOCK}u;
  if (block >= disp.n) { return; }
  var total = 0u;
  for (var i = first; i < min(first + ${SCAN_BLOCK}u, disp.count); i = i + 1u) { total = total + src[i]; }
  sums[block] = total;
}
`);

// One block scanned: the earlier blocks' totals (disp.base) then the block's values.
const scanBlock = (src, dst, sums, count, block, base) => /* wgsl */ `
  var run = 0u;
  if (${base} == 1u) { for (var j = 0u; j < ${block}; j = j + 1u) { run = run + ${sums}[j]; } }
  if (${base} == 2u) { run = ${sums}[${block}]; }
  for (var i = ${block} * ${SCAN_BLOCK}u; i < min(${block} * ${SCAN_BLOCK}u + ${SCAN_BLOCK}u, ${count}); i = i + 1u) {
    let v = ${src}[i];
    if (disp.clear != 0u) { ${src}[i] = 0u; }
    ${dst}[i] = run;
    run = run + v;
  }`;

export const SCAN = program('scan', {
  problem: false,
  words: ['count', 'clear', 'base'],
  bindings: {
    src: 'read_write array<u32>',
    dst: 'read_write array<u32>',
    sums: 'read array<u32>',
  }
}, /* wgsl */ `
@compute @workgroup_size(${WORKGROUP})
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let block = invocation(gid);
  if (block >= disp.n) { return; }
${scanBlock('src', 'dst', 'sums', 'disp.count', 'block', 'disp.base')}
}
`);

// Two independent prefix sums in one dispatch (gpu.js CallEncoder.scanTwo): the first's blocks,
// then the second's (disp.n of them in all), each of at most SCAN_FLAT blocks whose totals its
// producer counted (base 1).
export const SCAN_TWO = program('scanTwo', {
  problem: false,
  words: ['count', 'clear', 'count2'],
  bindings: {
    src: 'read_write array<u32>',
    dst: 'read_write array<u32>',
    sums: 'read array<u32>',
    src2: 'read_write array<u32>',
    dst2: 'read_write array<u32>',
    sums2: 'read array<u32>',
  }
}, /* wgsl */ `
@compute @workgroup_size(${WORKGROUP})
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let at = invocation(gid);
  if (at >= disp.n) { return; }
  let first = (disp.count + ${SCAN_BLOCK - 1}u) / ${SCAN_BLOCK}u;
  if (at < first) {
    let block = at;
${scanBlock('src', 'dst', 'sums', 'disp.count', 'block', '1u')}
  } else {
    let block = at - first;
${scanBlock('src2', 'dst2', 'sums2', 'disp.count2', 'block', '1u')}
  }
}
`);
