// Types for `ms-deform-attn/onnx` (bindings/onnx.js): an ONNX model of the Deformable DETR family run
// by the caller's onnxruntime-web or onnxruntime-node, its deformable-attention blocks by this
// package's op. docs/onnx.md.
import type { Msda } from './index.js';

/** What of onnxruntime-web / onnxruntime-node is used (pass the module itself). */
export interface OrtModule {
  InferenceSession: { create(model: Uint8Array, options?: object): Promise<any> };
  Tensor: new (type: any, data: any, dims: readonly number[]) => any;
}

export interface CreateSessionOptions {
  /** ORT's executionProviders, for every session made (e.g. ['wasm'], ['cpu']). */
  executionProviders?: readonly unknown[];
  /** Other ORT session options (e.g. { intraOpNumThreads: 1 }). */
  sessionOptions?: object;
  /** The instance that runs the blocks (default: `await init()`, made and released by the session). */
  msda?: Msda;
}

/** One block found: where, what it was read as, and whether it runs on the op. */
export interface BlockReport {
  id: number;
  formulation: string;
  /**
   * The GridSample decomposition's nodes (the value cut by one Split, or by one Slice per level
   * where the export computes the sizes, as for mmcv's function), or the one plugin node
   * (TensorRT's, mmdeploy's).
   */
  nodes: { gridSample: string[]; split: string; mul: string; reduceSum: string }
    | { gridSample: string[]; slices: string[]; mul: string; reduceSum: string }
    | { plugin: string };
  tensors: { value: string; samplingLocations: string; attentionWeights: string; output: string };
  alignCorners: boolean;
  paddingMode: 'zeros' | 'border';
  /** A plugin node's spatial_shapes and level_start_index: constants (of the graph, or computed
   * from constants alone and evaluated at createSession), or computed from the inputs and read from
   * each run (checked against each other, the value and the chain's first run). */
  levelsFrom?: 'constants' | 'run time';
  replaced: boolean;
  /** Why it was left to ORT (null when replaced). */
  why: string | null;
  /** The block's element type: a float16 block takes ORT's float16 tensors and gives float16 (the op's
   * float32 result rounded once, to nearest even; docs/onnx.md, float16 models). */
  dtype?: 'float32' | 'float16';
  valueLayout?: 'BLNC';
  samplingLocationsLayout?: 'BQHLP2';
  batch?: number;
  queries?: number;
  heads?: number;
  channels?: number;
  levels?: [number, number][];
  points?: number;
  /** The check against ORT's run of the block alone: elements compared, and the worst miss (null:
   * none); null for a plugin node, which ORT cannot run. `bound` is crosscheck's (float16's for a float16
   * block), `boundOrt` (float16 blocks) that plus what ORT's float16 graph may add; `used`: the
   * largest miss over its bound of ORT's run and of ours (1: at the bound). */
  verification?: null | { checked: number; worst: null | { b: number; q: number; element: number; ort: number; ours: number; reference: number; bound: number; boundOrt?: number; excess: number };
    used: { ort: number; ours: number } };
}

export interface Report {
  blocks: BlockReport[];
  /** GridSample nodes that are not read as a block, and why. */
  notBlocks: { nodes: string[]; replaced: false; why: string }[];
}

export interface ChainedSession {
  readonly inputNames: readonly string[];
  readonly outputNames: readonly string[];
  readonly report: Report;
  /** What ORT's InferenceSession.run returns for the unmodified model: output name to ort.Tensor. */
  run(feeds: Record<string, any>): Promise<Record<string, any>>;
  /** Releases every ORT session (and the op's instance when the session made it). */
  release(): Promise<void>;
}

/** Parses the model, finds, verifies and replaces its blocks, and makes the chain of ORT sessions. */
export function createSession(ort: OrtModule, model: Uint8Array | ArrayBuffer | ArrayBufferView, options?: CreateSessionOptions): Promise<ChainedSession>;

/** The `.code` of the Error createSession rejects with when the optional peer 'protobufjs' is missing. */
export const ONNX_UNAVAILABLE: 'MSDA_ONNX_UNAVAILABLE';
