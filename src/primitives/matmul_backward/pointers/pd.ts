import { check, checkImpl } from '../../../common/status.js';
import { firstImpl } from '../../pick_impl.js';
import { countPdTime } from '../../../common/census.js';
import { created } from '../../../runtime/live_engine.js';
import { isRuntime } from '../../../common/dims.js';
import { now, verboseLine } from '../../../common/verbose.js';
import { MemoryDesc } from '../../../memory/desc.js';
import { PrimitiveAttr } from '../../../attr/primitive_attr.js';
import type { Engine } from '../../../runtime/engine.js';
import { MAX_EXPERTS } from '../../grouped_gemm/pd.js';
import { checkFloat, checkPlainAttr } from '../rules.js';
import { p3WeightsImplList, type P3Expert, type P3WeightsImpl, type P3WeightsProblem } from './impls.js';
import { refuseGpuEngine } from '../../gpu_refusal.js';

const FN = 'grouped_gemm_backward_weights';

export type P3WeightsQuery = 'src' | 'diff_weights' | 'diff_bias' | 'diff_dst' | 'runtime_dims';

/**
 * RFC Proposal #3 weight gradient, per-expert allocations:
 * `new grouped_gemm_backward_weights.PrimitiveDesc(eng, srcMds, diffWeightsMds, diffDstMds, runtimeDimsMd, attr?)`
 * computes `diff_weights_i = src_i^T x diff_dst_i` for every expert i, with `src_i = [RUNTIME_DIM_VAL, K_i]`,
 * `diff_dst_i = [RUNTIME_DIM_VAL, N_i]` and `diff_weights_i = [K_i, N_i]` (its own buffer: the
 * gradient lands where the framework keeps that expert's weights); rows per expert arrive in
 * `ARG.RUNTIME_DIMS` (`[G]` s32). An expert with no rows gets zeros. Experts may differ in K and N.
 * With a bias gradient, `(eng, srcMds, diffWeightsMds, diffBiasMd, diffDstMds, runtimeDimsMd, attr?)`
 * (oneDNN's order): one plain `[G, N]` memory at `ARG.DIFF_BIAS`, row i = expert i's row sums of
 * diff_dst_i (experts must then share N).
 */
export class PrimitiveDesc {
  readonly engine: Engine;
  readonly problem: P3WeightsProblem;
  readonly impl: P3WeightsImpl;
  readonly creationMs: number;

  constructor(engine: Engine, srcMds: readonly MemoryDesc[], diffWeightsMds: readonly MemoryDesc[], diffBiasOrDiffDst: MemoryDesc | readonly MemoryDesc[], diffDstOrRuntimeDims: readonly MemoryDesc[] | MemoryDesc, runtimeDimsOrAttr?: MemoryDesc | PrimitiveAttr, attrArg?: PrimitiveAttr) {
    refuseGpuEngine(engine, 'grouped_gemm_backward_weights');
    const t0 = now();
    created('primitive_desc', engine);
    // oneDNN order: (src, diff_weights, [diff_bias,] diff_dst, ...): a single descriptor in 4th place is the bias.
    const hasBias = diffBiasOrDiffDst instanceof MemoryDesc;
    const diffBias = hasBias ? diffBiasOrDiffDst : undefined;
    const diffDstMds = (hasBias ? diffDstOrRuntimeDims : diffBiasOrDiffDst) as readonly MemoryDesc[];
    const runtimeDimsMd = (hasBias ? runtimeDimsOrAttr : diffDstOrRuntimeDims) as MemoryDesc;
    const attr = (hasBias ? attrArg : (runtimeDimsOrAttr as PrimitiveAttr | undefined)) ?? new PrimitiveAttr();
    check(engine !== undefined && engine !== null, `${FN}: engine is required`);
    check(Array.isArray(srcMds) && Array.isArray(diffWeightsMds) && Array.isArray(diffDstMds), `${FN}: srcMds, diffWeightsMds and diffDstMds must be arrays`);
    const G = srcMds.length;
    check(G >= 1 && G <= MAX_EXPERTS, `${FN}: 1 to ${MAX_EXPERTS} experts, got ${G}`);
    check(diffWeightsMds.length === G, `${FN}: ${G} src descriptors but ${diffWeightsMds.length} diff_weights descriptors`);
    check(diffDstMds.length === G, `${FN}: ${G} src descriptors but ${diffDstMds.length} diff_dst descriptors`);
    check(runtimeDimsMd instanceof MemoryDesc && runtimeDimsMd.format === 'blocked', `${FN}: runtimeDimsMd must be a plain memory descriptor`);
    check(runtimeDimsMd.ndims === 1 && runtimeDimsMd.dims[0] === G && runtimeDimsMd.dataType === 's32', `${FN}: runtimeDimsMd must be [${G}] s32, got ${runtimeDimsMd}`);
    checkPlainAttr(FN, attr);
    check(!attr.groupedOffsets, `${FN}: the grouped-offsets attribute belongs to matmul_backward_* (Proposal #2)`);
    const experts: P3Expert[] = [];
    for (let i = 0; i < G; i++) experts.push(PrimitiveDesc.expert(i, srcMds[i], diffWeightsMds[i], diffDstMds[i]));
    for (const [name, get] of [['src', (e: P3Expert) => e.src], ['diff_weights', (e: P3Expert) => e.diffWeights], ['diff_dst', (e: P3Expert) => e.diffDst]] as const) {
      checkImpl(experts.every((e) => get(e).dataType === get(experts[0]).dataType), `${FN}: all experts must share the ${name} data type`);
    }
    if (diffBias) {
      const N = experts[0].N;
      check(experts.every((e) => e.N === N), `${FN}: a diff_bias [G, N] needs every expert to have the same N (expert N: ${experts.map((e) => e.N).join(',')})`);
      check(diffBias.format === 'blocked' && diffBias.ndims === 2 && diffBias.dims[0] === G && diffBias.dims[1] === N, `${FN}: diff_bias must be a plain [G, N] = [${G},${N}] descriptor (row i: expert i), got ${diffBias}`);
      checkFloat(FN, 'diff_bias', diffBias);
    }
    const p: P3WeightsProblem = Object.freeze({ G, experts, runtimeDims: runtimeDimsMd, diffBias });
    const chosen = firstImpl(p3WeightsImplList, (i) => i.reject(p, engine), (reasons) => `${FN}: no implementation (${reasons})`);
    this.engine = engine;
    this.impl = chosen;
    this.problem = p;
    this.creationMs = now() - t0;
    countPdTime(this.creationMs);
    verboseLine('create', [FN, this.implInfo, 'undef', this.mdsString(), attr.toString(), '', `g${G}`, this.creationMs.toFixed(4)]);
  }

  /** Rules of expert i, one per line. */
  private static expert(i: number, src: MemoryDesc, dw: MemoryDesc, dy: MemoryDesc): P3Expert {
    check(src instanceof MemoryDesc && dw instanceof MemoryDesc && dy instanceof MemoryDesc, `${FN}: expert ${i} descriptors must be memory descriptors`);
    check(src.ndims === 2 && isRuntime(src.dims[0]), `${FN}: src[${i}] must be [RUNTIME_DIM_VAL, K], got ${src}`);
    check(dy.ndims === 2 && isRuntime(dy.dims[0]), `${FN}: diff_dst[${i}] must be [RUNTIME_DIM_VAL, N], got ${dy}`);
    check(dw.ndims === 2 && !dw.hasRuntimeDims, `${FN}: diff_weights[${i}] must be 2D [K, N] with known dims, got ${dw}`);
    const K = src.dims[1], N = dy.dims[1];
    check(!isRuntime(K) && !isRuntime(N), `${FN}: expert ${i} K and N must be known`);
    check(dw.dims[0] === K, `${FN}: diff_weights[${i}] dims[0] = ${dw.dims[0]} must equal src[${i}] K = ${K}`);
    check(dw.dims[1] === N, `${FN}: diff_weights[${i}] dims[1] = ${dw.dims[1]} must equal diff_dst[${i}] N = ${N}`);
    check(src.format === 'blocked' && src.strides[1] === 1, `${FN}: src[${i}] must be row-major (tag.ab)`);
    check(dy.format === 'blocked' && dy.strides[1] === 1, `${FN}: diff_dst[${i}] must be row-major (tag.ab)`);
    check(dw.format === 'blocked' && dw.strides[1] === 1, `${FN}: diff_weights[${i}] must be row-major (tag.ab)`);
    checkFloat(FN, `src[${i}]`, src);
    checkFloat(FN, `diff_weights[${i}]`, dw);
    checkFloat(FN, `diff_dst[${i}]`, dy);
    return { K, N, src, diffWeights: dw, diffDst: dy };
  }

  queryMd(what: P3WeightsQuery, expert = 0): MemoryDesc | undefined {
    if (what === 'runtime_dims') return this.problem.runtimeDims;
    if (what === 'diff_bias') return this.problem.diffBias;
    const e = this.problem.experts[expert];
    if (!e) return undefined;
    return what === 'src' ? e.src : what === 'diff_weights' ? e.diffWeights : e.diffDst;
  }

  get implInfo(): string {
    return this.impl.describe(this.engine, this.problem);
  }

  /** @internal */
  mdsString(): string {
    const e = this.problem?.experts[0];
    return e ? `g${this.problem.G} src:${e.src} diff_wei:${e.diffWeights} diff_dst:${e.diffDst}` : '';
  }
}
