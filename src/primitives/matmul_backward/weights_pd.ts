import { check } from '../../common/status.js';
import { firstImpl } from '../pick_impl.js';
import { countPdTime } from '../../common/census.js';
import { created } from '../../runtime/live_engine.js';
import { now, verboseLine } from '../../common/verbose.js';
import { MemoryDesc, plainDesc } from '../../memory/desc.js';
import { PrimitiveAttr } from '../../attr/primitive_attr.js';
import type { Engine } from '../../runtime/engine.js';
import type { PrimitiveDesc as MatmulPd } from '../matmul/pd.js';
import type { BwdWeightsImpl } from './impl.js';
import { bwdWeightsImplList } from './impl_list.js';
import { bwdProblemString, type BwdWeightsProblem } from './problem.js';
import { checkFloat, checkGroupedRows, checkHint, checkMd, checkPlainAttr, checkPlainRows, checkSameRows, rowMajor } from './rules.js';
import { refuseGpuEngine } from '../gpu_refusal.js';

const FN = 'matmul_backward_weights';

export type BwdWeightsQuery = 'src' | 'diff_weights' | 'diff_bias' | 'diff_dst' | 'grouped_offsets';

/**
 * Grouped matmul backward weights (oneDNN `prop_kind::backward_weights`):
 * `new matmul_backward_weights.PrimitiveDesc(eng, srcMd, diffWeightsMd, diffDstMd, hintFwdPd?, attr?, diffBiasMd?)`.
 * The optional bias gradient comes last (not in oneDNN's third place), so a forgotten argument is
 * reported as missing instead of a bias descriptor being taken for diff_dst:
 *  - `diff_weights[g] = src[g]^T x diff_dst[g]` (`[G, K, N]`, plain; `tag.any` is row-major): the
 *    contraction runs over group g's rows; an expert with no rows gets zeros.
 *  - `diff_bias[g] = sum of the rows of diff_dst[g]` (`[G, N]` or `[G, 1, N]`), in f32, row order.
 * src / diff_dst rows grouped as in backward data: grouped descriptors (Proposal #1) or plain tensors
 * with the forward's grouped-offsets attribute (Proposal #2, `ARG.ATTR_GROUPED_OFFSETS | ARG.SRC`).
 */
export class PrimitiveDesc {
  readonly engine: Engine;
  readonly problem: BwdWeightsProblem;
  readonly impl: BwdWeightsImpl;
  readonly creationMs: number;
  private offsetsMd: MemoryDesc | undefined;

  constructor(engine: Engine, src: MemoryDesc, diffWeights: MemoryDesc, diffDst: MemoryDesc, hint?: MatmulPd, attr: PrimitiveAttr = new PrimitiveAttr(), diffBias?: MemoryDesc) {
    refuseGpuEngine(engine, 'matmul_backward_weights');
    const t0 = now();
    created('primitive_desc', engine);
    // The earlier (src, diff_weights, diff_bias, diff_dst) order would put a descriptor in the hint's place.
    check(!((hint as unknown) instanceof MemoryDesc), `${FN}: the 5th argument is hint_fwd_pd, got a memory descriptor (diff_bias is the last argument: (eng, src, diff_weights, diff_dst, hint?, attr?, diff_bias?))`);
    check(attr instanceof PrimitiveAttr, `${FN}: attr must be a PrimitiveAttr`);
    const p = PrimitiveDesc.init(engine, src, diffWeights, diffBias, diffDst, hint, attr);
    const chosen = firstImpl(bwdWeightsImplList, (i) => i.reject(p, engine), (reasons) => `${FN}: no implementation for ${bwdProblemString(p)} (${reasons})`);
    this.engine = engine;
    this.impl = chosen;
    this.problem = Object.freeze(p);
    this.creationMs = now() - t0;
    countPdTime(this.creationMs);
    verboseLine('create', [FN, this.implInfo, 'undef', this.mdsString(), attr.toString(), '', bwdProblemString(p), this.creationMs.toFixed(4)]);
  }

  /** Validation rules, one per line. */
  private static init(engine: Engine, srcIn: MemoryDesc, diffWeightsIn: MemoryDesc, diffBias: MemoryDesc | undefined, diffDstIn: MemoryDesc, hint: MatmulPd | undefined, attr: PrimitiveAttr): BwdWeightsProblem {
    check(engine !== undefined && engine !== null, `${FN}: engine is required`);
    checkMd(FN, 'src', srcIn);
    checkMd(FN, 'diff_weights', diffWeightsIn);
    checkMd(FN, 'diff_dst', diffDstIn);
    check(diffBias === undefined || diffBias instanceof MemoryDesc, `${FN}: diff_bias must be a memory descriptor`);
    checkPlainAttr(FN, attr);
    check(diffWeightsIn.ndims === 3, `${FN}: diff_weights must be 3D [G, K, N], got ${diffWeightsIn.ndims} dims`);
    check(!diffWeightsIn.isGrouped && diffWeightsIn.format !== 'packed', `${FN}: diff_weights must be a plain [G, K, N] descriptor, got ${diffWeightsIn}`);
    check(!srcIn.hasRuntimeDims && !diffWeightsIn.hasRuntimeDims && !diffDstIn.hasRuntimeDims, `${FN}: RUNTIME_DIM_VAL dims are not supported; use grouped descriptors for runtime group sizes`);
    const [G, K, N] = diffWeightsIn.dims;
    const src = rowMajor(srcIn), diffDst = rowMajor(diffDstIn), diffWeights = rowMajor(diffWeightsIn);
    const ga = attr.groupedOffsets;
    check(!ga || ga.groupCount === G, `${FN}: grouped-offsets group count ${ga?.groupCount} must equal diff_weights dims[0] = ${G}`);
    if (ga) {
      checkPlainRows(FN, 'src', src, K, 'K');
      checkPlainRows(FN, 'diff_dst', diffDst, N, 'N');
    } else {
      checkGroupedRows(FN, 'src', src, G, K, 'K');
      checkGroupedRows(FN, 'diff_dst', diffDst, G, N, 'N');
    }
    checkSameRows(FN, ['src', src], ['diff_dst', diffDst]);
    if (diffBias) {
      check(diffBias.format === 'blocked' && !diffBias.isGrouped, `${FN}: diff_bias must be a plain descriptor with a layout, got ${diffBias}`);
      const ok = (diffBias.ndims === 2 && diffBias.dims[0] === G && diffBias.dims[1] === N) || (diffBias.ndims === 3 && diffBias.dims[0] === G && diffBias.dims[1] === 1 && diffBias.dims[2] === N);
      check(ok, `${FN}: diff_bias dims [${diffBias.dims.join(',')}] must be [G, N] = [${G},${N}] or [G, 1, N]`);
      checkFloat(FN, 'diff_bias', diffBias);
    }
    checkFloat(FN, 'src', src);
    checkFloat(FN, 'diff_weights', diffWeights);
    checkFloat(FN, 'diff_dst', diffDst);
    const M = src.dims[0];
    checkHint(FN, hint, G, M, K, N);
    return { G, M, K, N, src, diffWeights, diffBias, diffDst, offsetsFrom: ga ? 'attr' : 'desc' };
  }

  queryMd(what: BwdWeightsQuery): MemoryDesc | undefined {
    const p = this.problem;
    if (what === 'grouped_offsets') {
      if (p.offsetsFrom !== 'attr') return undefined;
      this.offsetsMd ??= plainDesc([p.G + 1], 's32', 'a');
      return this.offsetsMd;
    }
    return what === 'src' ? p.src : what === 'diff_weights' ? p.diffWeights : what === 'diff_bias' ? p.diffBias : p.diffDst;
  }

  get implInfo(): string {
    return this.impl.describe(this.engine, this.problem);
  }

  /** @internal verbose rendering of the descriptors. */
  mdsString(): string {
    const p = this.problem;
    if (!p) return '';
    return `src:${p.src} diff_wei:${p.diffWeights}${p.diffBias ? ` diff_bia:${p.diffBias}` : ''} diff_dst:${p.diffDst}`;
  }
}
