import { check, checkImpl } from '../../../common/status.js';
import { countPdTime } from '../../../common/census.js';
import { created } from '../../../runtime/live_engine.js';
import { now, verboseLine } from '../../../common/verbose.js';
import { plainDesc, type MemoryDesc } from '../../../memory/desc.js';
import type { Engine } from '../../../runtime/engine.js';
import { PrimitiveDesc, type CombineProblem } from './pd.js';
import { refuseGpuEngine } from '../../gpu_refusal.js';

export type CombineBackwardQuery = 'diff_dst' | 'src' | 'topk_weights' | 'row_of' | 'token_index' | 'token_ks' | 'diff_src' | 'diff_topk_weights';

/**
 * Combine backward, the gradient of weight-and-reduce (`new moe.combine.BackwardPrimitiveDesc(eng,
 * fwdPd)`): from `ARG.DIFF_DST [T, N]` (f32) writes
 *  - `ARG.DIFF_SRC`, shaped as the forward's src: row (t, s) gets `w[t, s] * diff_dst[t]` (or
 *    `diff_dst[t]` unweighted); every row is written, a row no slot reads (padding, unrouted) gets zeros.
 *    Routed input finds each row's token and slot through `ARG.MOE_TOKEN_INDEX` / `ARG.MOE_TOKEN_KS`
 *    (dispatch's outputs: each row written by one tile, no scatter-add); scattered input through
 *    `ARG.MOE_ROW_OF` (the mask).
 *  - weighted only: `ARG.MOE_DIFF_TOPK_WEIGHTS [T, k]` = `<diff_dst[t], src[row]>` (needs the forward's
 *    `ARG.SRC` and `ARG.MOE_TOPK_WEIGHTS`, and `ARG.MOE_ROW_OF` to find the rows); 0 for an absent slot.
 * Deterministic: fixed-order f32 sums, no atomics. The backward of a gather (GEMM1 reading hidden rows
 * through the token index) is the forward combine itself, routed and unweighted: it sums each token's
 * routed-row gradients in slot order.
 */
export class BackwardPrimitiveDesc {
  readonly engine: Engine;
  readonly problem: CombineProblem;
  readonly diffDst: MemoryDesc;
  readonly tokenIndex: MemoryDesc;
  readonly tokenKs: MemoryDesc;
  readonly diffTopkWeights: MemoryDesc | undefined;

  constructor(engine: Engine, hint: PrimitiveDesc) {
    refuseGpuEngine(engine, 'moe.combine.backward');
    const t0 = now();
    created('primitive_desc', engine);
    check(engine !== undefined && engine !== null, 'moe.combine.backward: engine is required');
    check(hint instanceof PrimitiveDesc, 'moe.combine.backward: hint must be the forward moe.combine.PrimitiveDesc');
    check(hint.engine === engine, 'moe.combine.backward: the forward hint belongs to another engine');
    const p = hint.problem;
    checkImpl(p.dst.dataType === 'f32', `moe.combine.backward: diff_dst data type ${p.dst.dataType} is not supported (f32: the forward dst must be f32)`);
    this.engine = engine;
    this.problem = p;
    this.diffDst = plainDesc([p.T, p.N], 'f32', 'ab');
    this.tokenIndex = plainDesc([p.rows], 's32', 'a');
    this.tokenKs = plainDesc([p.rows], 's32', 'a');
    this.diffTopkWeights = p.weighted ? plainDesc([p.T, p.k], 'f32', 'ab') : undefined;
    const ms = now() - t0;
    countPdTime(ms);
    verboseLine('create', ['moe_combine_bwd', this.implInfo, 'undef', `diff_dst:${this.diffDst} diff_src:${p.src}`, '', '', `t${p.T}k${p.k}n${p.N}:${p.scattered ? 'scattered' : 'routed'}`, ms.toFixed(4)]);
  }

  queryMd(what: CombineBackwardQuery): MemoryDesc | undefined {
    const p = this.problem;
    switch (what) {
      case 'diff_dst': return this.diffDst;
      case 'src': return p.weighted ? p.src : undefined;
      case 'diff_src': return p.src;
      case 'topk_weights': return p.weights;
      case 'row_of': return p.scattered || p.weighted ? p.rowOf : undefined;
      case 'token_index': return p.scattered ? undefined : this.tokenIndex;
      case 'token_ks': return p.scattered || !p.weighted ? undefined : this.tokenKs;
      case 'diff_topk_weights': return this.diffTopkWeights;
    }
  }

  get implInfo(): string {
    return this.engine.kernels ? `wasm:${this.engine.isa}:moe-combine-bwd` : 'ref:any';
  }
}
