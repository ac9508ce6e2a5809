import { check, checkImpl } from '../../../common/status.js';
import { firstImpl } from '../../pick_impl.js';
import { checkOptionKeys, optionKeys } from '../../../common/option_keys.js';
import { created } from '../../../runtime/live_engine.js';
import { now, verboseLine } from '../../../common/verbose.js';
import { RUNTIME_DIM_VAL } from '../../../common/dims.js';
import { MemoryDesc, plainDesc } from '../../../memory/desc.js';
import { groupedDesc } from '../../../memory/grouped_desc.js';
import type { Engine } from '../../../runtime/engine.js';
import type { GpuEngine } from '../../../runtime/gpu/gpu_engine.js';
import type { DispatchImpl, GpuDispatchImpl } from './impls.js';
import { dispatchImplList, gpuDispatchImplList } from './impl_list.js';

export interface DispatchOptions {
  readonly tokens: number;
  readonly topK: number;
  /** Router experts E (ids in [0, E)). */
  readonly experts: number;
  /** Experts on this rank G (default E); with G < E or `expertMap`, `ARG.MOE_EXPERT_MAP` maps ids. */
  readonly localExperts?: number;
  /** Take `ARG.MOE_EXPERT_MAP` `[E]` s32 (global -> local id, -1 = not on this rank; its slots are skipped). */
  readonly expertMap?: boolean;
  /** Hidden `[T, K]` (f32/bf16/f16, rows contiguous) to permute; without it the dispatch writes indices and offsets only. */
  readonly hidden?: MemoryDesc;
  /** vLLM moe_align_block_size: each expert's rows padded to a multiple of B (padding rows: token index -1, zero hidden). */
  readonly alignBlockSize?: number;
  /** `contiguous` (default): expert-sorted rows with offsets; `batched`: `[G, maxTokens, K]` + expert_num_tokens. */
  readonly format?: 'contiguous' | 'batched';
  /** Batched capacity C per expert. */
  readonly maxTokens?: number;
}

export interface DispatchProblem {
  readonly T: number;
  readonly k: number;
  readonly E: number;
  readonly G: number;
  readonly K: number;
  readonly expertMap: boolean;
  readonly block: number;
  readonly batched: boolean;
  readonly cap: number;
  /** Routed-row capacity: T k (+ G (B - 1) aligned), or G C batched. */
  readonly R: number;
  readonly hidden: MemoryDesc | undefined;
  readonly ids: MemoryDesc;
  /** Undefined for an index-only batched dispatch. */
  readonly dst: MemoryDesc | undefined;
  readonly tokenIndex: MemoryDesc;
  readonly tokenKs: MemoryDesc;
  readonly rowOf: MemoryDesc;
  readonly counts: MemoryDesc | undefined;
  readonly expertMapMd: MemoryDesc | undefined;
}

const DISPATCH_OPTION_KEYS = optionKeys<DispatchOptions>({
  tokens: true, topK: true, experts: true, localExperts: true, expertMap: true, hidden: true, alignBlockSize: true, format: true, maxTokens: true,
});

/** Tokens may be 0: an empty batch is a no-op (as routing). */
const count = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0 && v <= 0x7fffffff;
const posInt = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 1 && v <= 0x7fffffff;

/**
 * MoE dispatch (permute) primitive descriptor: `new moe.dispatch.PrimitiveDesc(eng, options)`.
 * Inputs `ARG.MOE_TOPK_IDS [T, k]` s32 (+ `ARG.SRC` hidden, `ARG.MOE_EXPERT_MAP`); outputs the routed
 * rows sorted by local expert, stable (ascending token, then slot): `ARG.MOE_TOKEN_INDEX [R]`,
 * `ARG.MOE_TOKEN_KS [R]` (cuDNN TokenIndex / TokenKs; -1 on padding and unused rows), `ARG.MOE_ROW_OF
 * [T, k]` (the routed row of each slot, -1 when skipped) and `ARG.DST`:
 * - contiguous with hidden: a grouped `[R, K]` memory, values and offsets buffer written in place;
 * - contiguous index-only: the `[G + 1]` s32 offsets (share it as the offsets of grouped memories);
 * - batched: `[G, C, K]` values (rows past the count never written) and `ARG.MOE_EXPERT_NUM_TOKENS [G]`
 *   (index-only batched: `ARG.DST` is absent).
 * A token may choose one expert in several slots: the contiguous format gives each slot its own routed
 * row (vLLM, cuDNN; the combine sums them); the batched format holds one row per token and expert and
 * refuses it. Bad ids (outside [0, E), a repeat in the batched format), map entries outside [-1, G)
 * and a batched expert over capacity are raised by `stream.wait()`, with nothing written.
 * On a gpu engine the whole placement runs on the device (webgpu_dispatch.ts): the offsets are written
 * into the output memory there, for the grouped matmul that follows to read without the host.
 */
export class PrimitiveDesc {
  readonly engine: Engine | GpuEngine;
  readonly problem: DispatchProblem;
  /** The chosen implementation: from the cpu list on a cpu engine, from the gpu list on a gpu engine. */
  readonly impl: DispatchImpl | GpuDispatchImpl;

  constructor(engine: Engine | GpuEngine, o: DispatchOptions) {
    const t0 = now();
    created('primitive_desc', engine);
    check(engine !== undefined && engine !== null, 'moe.dispatch: engine is required');
    check(o !== null && typeof o === 'object', 'moe.dispatch: options must be an object { tokens, topK, experts, ... }');
    checkOptionKeys('moe.dispatch', o, DISPATCH_OPTION_KEYS);
    check(count(o.tokens), `moe.dispatch: tokens must be a non-negative integer, got ${String(o.tokens)}`);
    check(posInt(o.experts), `moe.dispatch: experts must be a positive integer, got ${String(o.experts)}`);
    check(posInt(o.topK) && o.topK <= o.experts, `moe.dispatch: topK must be an integer in [1, experts = ${o.experts}], got ${String(o.topK)}`);
    const G = o.localExperts ?? o.experts;
    check(posInt(G) && G <= o.experts, `moe.dispatch: localExperts must be an integer in [1, experts = ${o.experts}], got ${String(o.localExperts)}`);
    const expertMap = o.expertMap ?? G !== o.experts;
    check(expertMap || G === o.experts, 'moe.dispatch: localExperts < experts needs expertMap (ARG.MOE_EXPERT_MAP maps global to local ids)');
    const format = o.format ?? 'contiguous';
    check(format === 'contiguous' || format === 'batched', `moe.dispatch: format must be 'contiguous' or 'batched', got ${String(format)}`);
    const batched = format === 'batched';
    check(!batched || posInt(o.maxTokens), `moe.dispatch: the batched format needs maxTokens (rows per expert) as a positive integer, got ${String(o.maxTokens)}`);
    check(batched || o.maxTokens === undefined, "moe.dispatch: maxTokens is for format 'batched'");
    const block = o.alignBlockSize ?? 1;
    check(posInt(block), `moe.dispatch: alignBlockSize must be a positive integer, got ${String(o.alignBlockSize)}`);
    check(!batched || block === 1, 'moe.dispatch: alignBlockSize is for the contiguous format');
    const h = o.hidden;
    check(h === undefined || h instanceof MemoryDesc, 'moe.dispatch: hidden must be a memory descriptor');
    check(!h || (h.ndims === 2 && h.dims[0] === o.tokens && !h.isGrouped), `moe.dispatch: hidden must be a plain [tokens = ${o.tokens}, K] descriptor, got ${h}`);
    checkImpl(!h || ['f32', 'bf16', 'f16'].includes(h.dataType), `moe.dispatch: hidden data type ${h?.dataType} is not supported (f32, bf16, f16)`);
    check(!h || h.format === 'blocked', 'moe.dispatch: hidden must have a layout (not tag.any)');
    check(!h || h.strides[1] === 1, 'moe.dispatch: hidden rows must be contiguous (strides[1] == 1)');
    const T = o.tokens, k = o.topK, K = h ? h.dims[1] : 0;
    const cap = batched ? o.maxTokens! : 0;
    const R = batched ? G * cap : T * k + G * (block - 1);
    check(R <= 0x7fffffff && T * k <= 0x7fffffff, 'moe.dispatch: routed rows must fit int32');
    const dst = batched ? (h ? plainDesc([G, cap, K], h.dataType, 'abc') : undefined)
      : h ? groupedDesc([R, K], h.dataType, G, [RUNTIME_DIM_VAL, K]) : plainDesc([G + 1], 's32', 'a');
    this.engine = engine;
    this.problem = Object.freeze({
      T, k, E: o.experts, G, K, expertMap, block, batched, cap, R, hidden: h,
      ids: plainDesc([T, k], 's32', 'ab'), dst, tokenIndex: batched ? plainDesc([G, cap], 's32', 'ab') : plainDesc([R], 's32', 'a'),
      tokenKs: batched ? plainDesc([G, cap], 's32', 'ab') : plainDesc([R], 's32', 'a'), rowOf: plainDesc([T, k], 's32', 'ab'),
      counts: batched ? plainDesc([G], 's32', 'a') : undefined, expertMapMd: expertMap ? plainDesc([o.experts], 's32', 'a') : undefined,
    });
    this.impl = engine.kind === 'gpu' ? PrimitiveDesc.pick(gpuDispatchImplList, this.problem, engine) : PrimitiveDesc.pick(dispatchImplList, this.problem, engine);
    verboseLine('create', ['moe_dispatch', this.implInfo, 'undef', `ids:${this.problem.ids} dst:${this.problem.dst ?? 'none'}`, '', '', `t${T}k${k}e${o.experts}g${G}`, (now() - t0).toFixed(4)]);
  }

  /** The first implementation of `list` that accepts the problem, or `unimplemented` with every reason. */
  private static pick<E, I extends { readonly name: string; reject(p: DispatchProblem, engine: E): string | undefined }>(list: readonly I[], p: DispatchProblem, engine: E): I {
    return firstImpl(list, (i) => i.reject(p, engine), (reasons) => `moe.dispatch: no implementation for t${p.T}k${p.k}e${p.E}g${p.G} (${reasons})`);
  }

  /** `topk_ids`, `src` (hidden), `dst`, `token_index`, `token_ks`, `row_of`, `expert_num_tokens`, `expert_map`. */
  queryMd(what: 'topk_ids' | 'src' | 'dst' | 'token_index' | 'token_ks' | 'row_of' | 'expert_num_tokens' | 'expert_map'): MemoryDesc | undefined {
    const p = this.problem;
    switch (what) {
      case 'topk_ids': return p.ids;
      case 'src': return p.hidden;
      case 'dst': return p.dst;
      case 'token_index': return p.tokenIndex;
      case 'token_ks': return p.tokenKs;
      case 'row_of': return p.rowOf;
      case 'expert_num_tokens': return p.counts;
      case 'expert_map': return p.expertMapMd;
    }
  }

  get implInfo(): string {
    const eng = this.engine;
    return (eng.kind === 'gpu' ? (this.impl as GpuDispatchImpl).describe?.(eng, this.problem) : (this.impl as DispatchImpl).describe?.(eng, this.problem)) ?? this.impl.name;
  }
}
