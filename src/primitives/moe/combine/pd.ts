import { check, checkImpl } from '../../../common/status.js';
import { checkOptionKeys, optionKeys } from '../../../common/option_keys.js';
import { created } from '../../../runtime/live_engine.js';
import { now, verboseLine } from '../../../common/verbose.js';
import { MemoryDesc, plainDesc } from '../../../memory/desc.js';
import type { Engine } from '../../../runtime/engine.js';
import type { GpuEngine } from '../../../runtime/gpu/gpu_engine.js';
import type { GpuCombineImpl } from './webgpu_combine.js';
import { combineImplList, gpuCombineImplList, type CombineImpl } from './impls.js';
import { pickImpl } from '../../pick_impl.js';

export interface CombineOptions {
  readonly tokens: number;
  readonly topK: number;
  /**
   * `routed` (default): src rows in routed order (grouped or plain `[R, N]`, or batched `[G, C, N]`),
   * slot (t, s) reads row `row_of[t, s]`. `scattered`: src `[T * topK, N]` in token order (a scattering
   * GEMM's output), slot (t, s) reads row `t * topK + s` when `row_of[t, s] >= 0`.
   */
  readonly input?: 'routed' | 'scattered';
  /** Descriptor of src (f32; rows contiguous). */
  readonly src: MemoryDesc;
  /** Descriptor of dst `[T, N]` (f32, bf16 or f16; rows contiguous). */
  readonly dst: MemoryDesc;
  /** Multiply each slot by `ARG.MOE_TOPK_WEIGHTS[t, s]` (default: true for routed, false for scattered). */
  readonly weighted?: boolean;
}

export interface CombineProblem {
  readonly T: number;
  readonly k: number;
  readonly N: number;
  readonly scattered: boolean;
  readonly weighted: boolean;
  /** Rows of src (bound of row_of for routed input). */
  readonly rows: number;
  readonly srcLd: number;
  readonly src: MemoryDesc;
  readonly dst: MemoryDesc;
  readonly rowOf: MemoryDesc;
  readonly weights: MemoryDesc | undefined;
}

const COMBINE_OPTION_KEYS = optionKeys<CombineOptions>({ tokens: true, topK: true, input: true, src: true, dst: true, weighted: true });

/** Tokens may be 0: an empty batch is a no-op (as routing). */
const count = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0 && v <= 0x7fffffff;
const posInt = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 1 && v <= 0x7fffffff;

/**
 * MoE combine (weight-and-reduce) primitive descriptor, vLLM `TopKWeightAndReduce`: `out[t, :] =
 * sum over s = 0..k-1 with row_of[t, s] >= 0 of w[t, s] * y[row, :]`, each product rounded to f32
 * and added in f32 in slot order from +0: deterministic, the same bits for any thread count, and the
 * same bits as a GEMM that scatters `w * y` (attr.setScatter + binary_mul) followed by the
 * `scattered` combine. Arguments: `ARG.SRC`, `ARG.MOE_ROW_OF [T, k]` s32, `ARG.MOE_TOPK_WEIGHTS [T, k]`
 * f32 (when weighted), `ARG.DST`. A row_of entry outside [-1, rows) is raised by `stream.wait()`.
 */
export class PrimitiveDesc {
  readonly engine: Engine | GpuEngine;
  readonly problem: CombineProblem;
  /** The chosen implementation: from the cpu list on a cpu engine, from the gpu list on a gpu engine. */
  readonly impl: CombineImpl | GpuCombineImpl;

  constructor(engine: Engine | GpuEngine, o: CombineOptions) {
    const t0 = now();
    created('primitive_desc', engine);
    check(engine !== undefined && engine !== null, 'moe.combine: engine is required');
    check(o !== null && typeof o === 'object', 'moe.combine: options must be an object { tokens, topK, src, dst, ... }');
    checkOptionKeys('moe.combine', o, COMBINE_OPTION_KEYS);
    check(count(o.tokens), `moe.combine: tokens must be a non-negative integer, got ${String(o.tokens)}`);
    check(posInt(o.topK), `moe.combine: topK must be a positive integer, got ${String(o.topK)}`);
    const input = o.input ?? 'routed';
    check(input === 'routed' || input === 'scattered', `moe.combine: input must be 'routed' or 'scattered', got ${String(input)}`);
    check(o.src instanceof MemoryDesc && o.dst instanceof MemoryDesc, 'moe.combine: src and dst must be memory descriptors');
    const { src, dst } = o;
    checkImpl(src.dataType === 'f32', `moe.combine: src data type ${src.dataType} is not supported (f32)`);
    checkImpl(['f32', 'bf16', 'f16'].includes(dst.dataType), `moe.combine: dst data type ${dst.dataType} is not supported (f32, bf16, f16)`);
    check(src.format !== 'any' && src.format !== 'packed' && dst.format === 'blocked', 'moe.combine: src and dst must have a plain (or grouped) layout');
    check(src.ndims === 2 || (src.ndims === 3 && input === 'routed'), `moe.combine: src must be 2D [rows, N]${input === 'routed' ? ' or batched 3D [G, C, N]' : ''}, got ${src.ndims} dims`);
    const N = src.dims[src.ndims - 1];
    check(src.strides[src.ndims - 1] === 1, 'moe.combine: src rows must be contiguous');
    check(src.ndims === 2 || src.strides[0] === src.dims[1] * src.strides[1], 'moe.combine: a batched src must be dense across its batches ([G, C, N] with row stride N-or-more and batch stride C rows)');
    const rows = src.ndims === 2 ? src.dims[0] : src.dims[0] * src.dims[1];
    check(input !== 'scattered' || rows === o.tokens * o.topK, `moe.combine: a scattered src must have tokens x topK = ${o.tokens * o.topK} rows, got ${rows}`);
    check(dst.ndims === 2 && dst.dims[0] === o.tokens && dst.dims[1] === N, `moe.combine: dst must be [tokens = ${o.tokens}, N = ${N}], got [${dst.dims.join(',')}]`);
    check(dst.strides[1] === 1, 'moe.combine: dst rows must be contiguous');
    const weighted = o.weighted ?? input === 'routed';
    this.engine = engine;
    this.problem = Object.freeze({
      T: o.tokens, k: o.topK, N, scattered: input === 'scattered', weighted, rows, srcLd: src.strides[src.ndims - 2], src, dst,
      rowOf: plainDesc([o.tokens, o.topK], 's32', 'ab'), weights: weighted ? plainDesc([o.tokens, o.topK], 'f32', 'ab') : undefined,
    });
    this.impl = engine.kind === 'gpu' ? pickImpl('moe.combine', gpuCombineImplList, this.problem, engine) : pickImpl('moe.combine', combineImplList, this.problem, engine);
    verboseLine('create', ['moe_combine', this.implInfo, 'undef', `src:${src} dst:${dst}`, '', '', `t${o.tokens}k${o.topK}n${N}:${input}`, (now() - t0).toFixed(4)]);
  }

  queryMd(what: 'src' | 'dst' | 'row_of' | 'topk_weights'): MemoryDesc | undefined {
    const p = this.problem;
    return what === 'src' ? p.src : what === 'dst' ? p.dst : what === 'row_of' ? p.rowOf : p.weights;
  }

  get implInfo(): string {
    if (this.engine.kind === 'gpu') return this.impl.name;
    return this.engine.kernels ? `wasm:${this.engine.isa}:moe-combine` : 'ref:any';
  }
}
