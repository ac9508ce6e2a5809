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
import { p3DataImplList, type P3DataExpert, type P3DataImpl, type P3DataProblem } from './data_impls.js';
import { refuseGpuEngine } from '../../gpu_refusal.js';

const FN = 'grouped_gemm_backward_data';

export type P3DataQuery = 'diff_src' | 'weights' | 'diff_dst' | 'runtime_dims';

/**
 * RFC Proposal #3 backward data, per-expert allocations:
 * `new grouped_gemm_backward_data.PrimitiveDesc(eng, diffSrcMds, weightsMds, diffDstMds, runtimeDimsMd, attr?)`
 * computes `diff_src_i = diff_dst_i x W_i^T` with `diff_dst_i = [RUNTIME_DIM_VAL, N_i]`, `W_i = [K_i, N_i]`
 * (plain, or `tag.any`: `f32:p8t` panels made by a reorder from the expert's forward weights) and
 * `diff_src_i = [RUNTIME_DIM_VAL, K_i]`; rows per expert in `ARG.RUNTIME_DIMS` (`[G]` s32).
 */
export class PrimitiveDesc {
  readonly engine: Engine;
  readonly problem: P3DataProblem;
  readonly impl: P3DataImpl;
  readonly creationMs: number;

  constructor(engine: Engine, diffSrcMds: readonly MemoryDesc[], weightsMds: readonly MemoryDesc[], diffDstMds: readonly MemoryDesc[], runtimeDimsMd: MemoryDesc, attr: PrimitiveAttr = new PrimitiveAttr()) {
    refuseGpuEngine(engine, 'grouped_gemm_backward_data');
    const t0 = now();
    created('primitive_desc', engine);
    check(engine !== undefined && engine !== null, `${FN}: engine is required`);
    check(Array.isArray(diffSrcMds) && Array.isArray(weightsMds) && Array.isArray(diffDstMds), `${FN}: diffSrcMds, weightsMds and diffDstMds must be arrays`);
    const G = diffDstMds.length;
    check(G >= 1 && G <= MAX_EXPERTS, `${FN}: 1 to ${MAX_EXPERTS} experts, got ${G}`);
    check(weightsMds.length === G, `${FN}: ${G} diff_dst descriptors but ${weightsMds.length} weights descriptors`);
    check(diffSrcMds.length === G, `${FN}: ${G} diff_dst descriptors but ${diffSrcMds.length} diff_src descriptors`);
    check(runtimeDimsMd instanceof MemoryDesc && runtimeDimsMd.format === 'blocked', `${FN}: runtimeDimsMd must be a plain memory descriptor`);
    check(runtimeDimsMd.ndims === 1 && runtimeDimsMd.dims[0] === G && runtimeDimsMd.dataType === 's32', `${FN}: runtimeDimsMd must be [${G}] s32, got ${runtimeDimsMd}`);
    checkPlainAttr(FN, attr);
    check(!attr.groupedOffsets, `${FN}: the grouped-offsets attribute belongs to matmul_backward_* (Proposal #2)`);
    const experts: P3DataExpert[] = [];
    for (let i = 0; i < G; i++) experts.push(PrimitiveDesc.expert(i, diffSrcMds[i], weightsMds[i], diffDstMds[i]));
    checkImpl(experts.every((e) => e.diffDst.dataType === experts[0].diffDst.dataType), `${FN}: all experts must share the diff_dst data type`);
    checkImpl(experts.every((e) => e.diffSrc.dataType === experts[0].diffSrc.dataType), `${FN}: all experts must share the diff_src data type`);
    checkImpl(experts.every((e) => e.weights.dataType === experts[0].weights.dataType), `${FN}: all experts must share the weights data type`);
    const p: P3DataProblem = { G, experts, runtimeDims: runtimeDimsMd };
    const chosen = firstImpl(p3DataImplList, (i) => i.reject(p, engine), (reasons) => `${FN}: no implementation (${reasons})`);
    this.engine = engine;
    this.impl = chosen;
    this.problem = Object.freeze({ ...p, experts: experts.map((e) => (e.weights.format === 'any' ? { ...e, weights: chosen.weightsLayout(e) } : e)) });
    this.creationMs = now() - t0;
    countPdTime(this.creationMs);
    verboseLine('create', [FN, this.implInfo, 'undef', this.mdsString(), attr.toString(), '', `g${G}`, this.creationMs.toFixed(4)]);
  }

  /** Rules of expert i, one per line. */
  private static expert(i: number, dx: MemoryDesc, w: MemoryDesc, dy: MemoryDesc): P3DataExpert {
    check(dx instanceof MemoryDesc && w instanceof MemoryDesc && dy instanceof MemoryDesc, `${FN}: expert ${i} descriptors must be memory descriptors`);
    check(dy.ndims === 2 && isRuntime(dy.dims[0]), `${FN}: diff_dst[${i}] must be [RUNTIME_DIM_VAL, N], got ${dy}`);
    check(dx.ndims === 2 && isRuntime(dx.dims[0]), `${FN}: diff_src[${i}] must be [RUNTIME_DIM_VAL, K], got ${dx}`);
    check(w.ndims === 2 && !w.hasRuntimeDims && !w.isGrouped, `${FN}: weights[${i}] must be 2D [K, N] with known dims, got ${w}`);
    const [K, N] = w.dims;
    check(dy.dims[1] === N, `${FN}: diff_dst[${i}] dims[1] = ${dy.dims[1]} must equal weights[${i}] N = ${N}`);
    check(dx.dims[1] === K, `${FN}: diff_src[${i}] dims[1] = ${dx.dims[1]} must equal weights[${i}] K = ${K}`);
    check(dy.format === 'blocked' && dy.strides[1] === 1, `${FN}: diff_dst[${i}] must be row-major (tag.ab)`);
    check(dx.format === 'blocked' && dx.strides[1] === 1, `${FN}: diff_src[${i}] must be row-major (tag.ab)`);
    checkFloat(FN, `diff_src[${i}]`, dx);
    checkFloat(FN, `weights[${i}]`, w);
    checkFloat(FN, `diff_dst[${i}]`, dy);
    return { K, N, diffSrc: dx, weights: w, diffDst: dy };
  }

  queryMd(what: P3DataQuery, expert = 0): MemoryDesc | undefined {
    if (what === 'runtime_dims') return this.problem.runtimeDims;
    const e = this.problem.experts[expert];
    if (!e) return undefined;
    return what === 'diff_src' ? e.diffSrc : what === 'weights' ? e.weights : e.diffDst;
  }

  get implInfo(): string {
    return this.impl.describe(this.engine, this.problem);
  }

  /** @internal */
  mdsString(): string {
    const e = this.problem?.experts[0];
    return e ? `g${this.problem.G} diff_src:${e.diffSrc} wei:${e.weights} diff_dst:${e.diffDst}` : '';
  }
}
