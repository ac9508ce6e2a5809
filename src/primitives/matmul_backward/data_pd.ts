import { check } from '../../common/status.js';
import { firstImpl } from '../pick_impl.js';
import { countPdTime } from '../../common/census.js';
import { created } from '../../runtime/live_engine.js';
import { now, verboseLine } from '../../common/verbose.js';
import { MemoryDesc, plainDesc } from '../../memory/desc.js';
import { PrimitiveAttr } from '../../attr/primitive_attr.js';
import type { Engine } from '../../runtime/engine.js';
import type { PrimitiveDesc as MatmulPd } from '../matmul/pd.js';
import type { BwdDataImpl } from './impl.js';
import { bwdDataImplList } from './impl_list.js';
import { bwdProblemString, type BwdDataProblem } from './problem.js';
import { checkFloat, checkGroupedRows, checkHint, checkMd, checkPlainAttr, checkPlainRows, checkSameRows, rowMajor } from './rules.js';
import { refuseGpuEngine } from '../gpu_refusal.js';

const FN = 'matmul_backward_data';

export type BwdDataQuery = 'diff_src' | 'weights' | 'diff_dst' | 'grouped_offsets';

/**
 * Grouped matmul backward data (oneDNN `prop_kind::backward_data`):
 * `new matmul_backward_data.PrimitiveDesc(eng, diffSrcMd, weightsMd, diffDstMd, hintFwdPd?, attr?)`
 * computes `diff_src[g] = diff_dst[g] x W[g]^T` for the variable-M forward `dst[g] = src[g] x W[g]`.
 *  - Proposal #1: diff_src grouped `[total_M, K]`, diff_dst grouped `[total_M, N]` (offsets in the
 *    memory objects; they must agree at execution unless the two share one buffer).
 *  - Proposal #2: plain `[total_M, K]` / `[total_M, N]` and the forward's attribute
 *    (`attr.setGroupedOffsets(ARG.SRC, G)`), offsets at execution as `ARG.ATTR_GROUPED_OFFSETS | ARG.SRC`.
 * Weights `[G, K, N]`: any plain layout, or `tag.any`, which resolves to `f32:p8t` (W^T panels made by
 * a reorder from the forward's weights) so the transposed read streams like the forward's.
 */
export class PrimitiveDesc {
  readonly engine: Engine;
  readonly problem: BwdDataProblem;
  readonly impl: BwdDataImpl;
  readonly creationMs: number;
  private offsetsMd: MemoryDesc | undefined;

  constructor(engine: Engine, diffSrc: MemoryDesc, weights: MemoryDesc, diffDst: MemoryDesc, hint?: MatmulPd, attr: PrimitiveAttr = new PrimitiveAttr()) {
    refuseGpuEngine(engine, 'matmul_backward_data');
    const t0 = now();
    created('primitive_desc', engine);
    const p = PrimitiveDesc.init(engine, diffSrc, weights, diffDst, hint, attr);
    const chosen = firstImpl(bwdDataImplList, (i) => i.reject(p, engine), (reasons) => `${FN}: no implementation for ${bwdProblemString(p)} (${reasons})`);
    this.engine = engine;
    this.impl = chosen;
    this.problem = Object.freeze({ ...p, weights: p.weights.format === 'any' ? chosen.weightsLayout(p) : p.weights });
    this.creationMs = now() - t0;
    countPdTime(this.creationMs);
    verboseLine('create', [FN, this.implInfo, 'undef', this.mdsString(), attr.toString(), '', bwdProblemString(p), this.creationMs.toFixed(4)]);
  }

  /** Validation rules, one per line. */
  private static init(engine: Engine, diffSrcIn: MemoryDesc, weights: MemoryDesc, diffDstIn: MemoryDesc, hint: MatmulPd | undefined, attr: PrimitiveAttr): BwdDataProblem {
    check(engine !== undefined && engine !== null, `${FN}: engine is required`);
    checkMd(FN, 'diff_src', diffSrcIn);
    checkMd(FN, 'weights', weights);
    checkMd(FN, 'diff_dst', diffDstIn);
    checkPlainAttr(FN, attr);
    check(weights.ndims === 3, `${FN}: weights must be 3D [G, K, N], got ${weights.ndims} dims`);
    check(!weights.isGrouped, `${FN}: weights must be a plain [G, K, N] descriptor, not grouped`);
    check(!diffSrcIn.hasRuntimeDims && !weights.hasRuntimeDims && !diffDstIn.hasRuntimeDims, `${FN}: RUNTIME_DIM_VAL dims are not supported; use grouped descriptors for runtime group sizes`);
    const [G, K, N] = weights.dims;
    const diffSrc = rowMajor(diffSrcIn), diffDst = rowMajor(diffDstIn);
    const ga = attr.groupedOffsets;
    check(!ga || ga.groupCount === G, `${FN}: grouped-offsets group count ${ga?.groupCount} must equal weights dims[0] = ${G}`);
    if (ga) {
      checkPlainRows(FN, 'diff_dst', diffDst, N, 'N');
      checkPlainRows(FN, 'diff_src', diffSrc, K, 'K');
    } else {
      checkGroupedRows(FN, 'diff_dst', diffDst, G, N, 'N');
      checkGroupedRows(FN, 'diff_src', diffSrc, G, K, 'K');
    }
    checkSameRows(FN, ['diff_dst', diffDst], ['diff_src', diffSrc]);
    checkFloat(FN, 'diff_src', diffSrc);
    checkFloat(FN, 'weights', weights);
    checkFloat(FN, 'diff_dst', diffDst);
    const M = diffDst.dims[0];
    checkHint(FN, hint, G, M, K, N);
    return { G, M, K, N, diffSrc, weights, diffDst, offsetsFrom: ga ? 'attr' : 'desc' };
  }

  /** The descriptor the primitive expects for an argument (`weights` resolved from `tag.any`). */
  queryMd(what: BwdDataQuery): MemoryDesc | undefined {
    const p = this.problem;
    if (what === 'grouped_offsets') {
      if (p.offsetsFrom !== 'attr') return undefined;
      this.offsetsMd ??= plainDesc([p.G + 1], 's32', 'a');
      return this.offsetsMd;
    }
    return what === 'diff_src' ? p.diffSrc : what === 'weights' ? p.weights : p.diffDst;
  }

  get implInfo(): string {
    return this.impl.describe(this.engine, this.problem);
  }

  /** @internal verbose rendering of the descriptors. */
  mdsString(): string {
    const p = this.problem;
    return p ? `diff_src:${p.diffSrc} wei:${p.weights} diff_dst:${p.diffDst}` : '';
  }
}
