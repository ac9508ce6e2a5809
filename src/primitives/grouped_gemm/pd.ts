import { DnnlError, check, checkImpl } from '../../common/status.js';
import { isRuntime } from '../../common/dims.js';
import { now, verboseLine } from '../../common/verbose.js';
import { countObject, countPdTime } from '../../common/census.js';
import { MemoryDesc } from '../../memory/desc.js';
import { packedWeightsDesc } from '../../memory/packed_weights.js';
import { PrimitiveAttr } from '../../attr/primitive_attr.js';
import type { Engine } from '../../runtime/engine.js';
import type { Expert, GroupedGemmProblem } from './problem.js';
import { groupedGemmImplList, type GroupedGemmImpl } from './impl_list.js';

/** Largest G: `ARG.MULTIPLE_WEIGHTS + i` must stay below `ARG.ATTR_SCALES`. */
export const MAX_EXPERTS = 1024;
const FLOATS = ['f32', 'bf16', 'f16'];

/**
 * RFC Proposal #3: `new grouped_gemm.PrimitiveDesc(eng, srcMds, weiMds, dstMds, runtimeDimsMd, attr?)`.
 * Expert i computes `dst_i = src_i x wei_i` with `src_i = [RUNTIME_DIM_VAL, K_i]`, `wei_i = [K_i, N_i]`
 * (plain, or `tag.any` for packed panels) and `dst_i = [RUNTIME_DIM_VAL, N_i]`; the rows of every
 * expert arrive at execution in `ARG.RUNTIME_DIMS` (`[G]` s32). Experts may differ in K and N.
 */
export class PrimitiveDesc {
  readonly engine: Engine;
  readonly problem: GroupedGemmProblem;
  readonly impl: GroupedGemmImpl;
  readonly creationMs: number;

  constructor(engine: Engine, srcMds: readonly MemoryDesc[], weiMds: readonly MemoryDesc[], dstMds: readonly MemoryDesc[], runtimeDimsMd: MemoryDesc, attr: PrimitiveAttr = new PrimitiveAttr()) {
    const t0 = now();
    countObject('primitive_desc');
    check(Array.isArray(srcMds) && Array.isArray(weiMds) && Array.isArray(dstMds), 'grouped_gemm: srcMds, weiMds and dstMds must be arrays');
    const G = srcMds.length;
    check(G >= 1, 'grouped_gemm: at least one expert is required');
    check(G <= MAX_EXPERTS, `grouped_gemm: at most ${MAX_EXPERTS} experts, got ${G}`);
    check(weiMds.length === G, `grouped_gemm: ${G} src descriptors but ${weiMds.length} weights descriptors`);
    check(dstMds.length === G, `grouped_gemm: ${G} src descriptors but ${dstMds.length} dst descriptors`);
    check(runtimeDimsMd instanceof MemoryDesc, 'grouped_gemm: runtimeDimsMd must be a memory descriptor');
    check(runtimeDimsMd.ndims === 1 && runtimeDimsMd.dims[0] === G, `grouped_gemm: runtimeDimsMd must be [${G}], got [${runtimeDimsMd.dims.join(',')}]`);
    check(runtimeDimsMd.dataType === 's32', `grouped_gemm: runtimeDimsMd must be s32, got ${runtimeDimsMd.dataType}`);
    check(runtimeDimsMd.format === 'blocked', 'grouped_gemm: runtimeDimsMd must be a plain descriptor');
    check(attr instanceof PrimitiveAttr, 'grouped_gemm: attr must be a PrimitiveAttr');
    check(!attr.groupedOffsets, 'grouped_gemm: the grouped-offsets attribute belongs to matmul (Proposal #2)');
    const experts: Expert[] = [];
    for (let i = 0; i < G; i++) experts.push(PrimitiveDesc.expert(i, srcMds[i], weiMds[i], dstMds[i]));
    checkImpl(experts.every((e) => e.src.dataType === experts[0].src.dataType), 'grouped_gemm: all experts must share the src data type');
    checkImpl(experts.every((e) => e.dst.dataType === experts[0].dst.dataType), 'grouped_gemm: all experts must share the dst data type');
    checkImpl(experts.every((e) => e.weights.dataType === experts[0].weights.dataType), 'grouped_gemm: all experts must share the weights data type');
    const p: GroupedGemmProblem = { G, experts, runtimeDims: runtimeDimsMd, attr };
    const reasons: string[] = [];
    let chosen: GroupedGemmImpl | undefined;
    for (const impl of groupedGemmImplList) {
      const why = impl.reject(p, engine);
      if (why === undefined) {
        chosen = impl;
        break;
      }
      reasons.push(`${impl.name}: ${why}`);
    }
    if (!chosen) throw new DnnlError('unimplemented', `grouped_gemm: no implementation (${reasons.join('; ')})`);
    this.engine = engine;
    this.impl = chosen;
    const anyW = experts.some((e) => e.weights.format === 'any');
    this.problem = Object.freeze({ ...p, experts: anyW ? experts.map((e) => (e.weights.format === 'any' ? { ...e, weights: chosen.weightsLayout(e, engine) } : e)) : experts });
    this.creationMs = now() - t0;
    countPdTime(this.creationMs);
    verboseLine('create', ['grouped_gemm', this.implInfo, 'undef', this.mdsString(), attr.toString(), '', `g${G}`, this.creationMs.toFixed(4)]);
  }

  private static expert(i: number, src: MemoryDesc, wei: MemoryDesc, dst: MemoryDesc): Expert {
    check(src instanceof MemoryDesc && wei instanceof MemoryDesc && dst instanceof MemoryDesc, `grouped_gemm: expert ${i} descriptors must be memory descriptors`);
    check(!src.isGrouped && !wei.isGrouped && !dst.isGrouped, `grouped_gemm: expert ${i} descriptors must be plain (one expert each)`);
    check(src.ndims === 2, `grouped_gemm: src[${i}] must be 2D [M, K], got ${src.ndims} dims`);
    check(wei.ndims === 2, `grouped_gemm: weights[${i}] must be 2D [K, N], got ${wei.ndims} dims`);
    check(dst.ndims === 2, `grouped_gemm: dst[${i}] must be 2D [M, N], got ${dst.ndims} dims`);
    check(isRuntime(src.dims[0]), `grouped_gemm: src[${i}] dims[0] must be RUNTIME_DIM_VAL (rows come from ARG.RUNTIME_DIMS)`);
    check(isRuntime(dst.dims[0]), `grouped_gemm: dst[${i}] dims[0] must be RUNTIME_DIM_VAL (rows come from ARG.RUNTIME_DIMS)`);
    const K = src.dims[1], N = wei.dims[1];
    check(!isRuntime(K) && !isRuntime(N) && !isRuntime(wei.dims[0]), `grouped_gemm: expert ${i} K and N must be known`);
    check(wei.dims[0] === K, `grouped_gemm: weights[${i}] dims[0] = ${wei.dims[0]} must equal src[${i}] K = ${K}`);
    check(dst.dims[1] === N, `grouped_gemm: dst[${i}] dims[1] = ${dst.dims[1]} must equal weights[${i}] N = ${N}`);
    check(src.format === 'blocked' && src.strides[1] === 1, `grouped_gemm: src[${i}] must be row-major (tag.ab)`);
    check(dst.format === 'blocked' && dst.strides[1] === 1, `grouped_gemm: dst[${i}] must be row-major (tag.ab)`);
    check(wei.format !== 'packed' || wei.packed !== undefined, `grouped_gemm: weights[${i}] packed layout unknown`);
    checkImpl(FLOATS.includes(src.dataType) && FLOATS.includes(dst.dataType) && FLOATS.includes(wei.dataType), `grouped_gemm: expert ${i} data types must be f32, bf16 or f16`);
    return { K, N, src, weights: wei, dst };
  }

  queryMd(what: 'src' | 'weights' | 'dst' | 'runtime_dims', expert = 0): MemoryDesc | undefined {
    if (what === 'runtime_dims') return this.problem.runtimeDims;
    const e = this.problem.experts[expert];
    if (!e) return undefined;
    return what === 'src' ? e.src : what === 'weights' ? e.weights : e.dst;
  }

  get implInfo(): string {
    return this.impl.describe?.(this.engine) ?? this.impl.name;
  }

  /** @internal */
  mdsString(): string {
    const e = this.problem?.experts[0];
    if (!e) return '';
    const same = this.problem.experts.every((x) => x.K === e.K && x.N === e.N);
    return `g${this.problem.G} src:${e.src} wei:${e.weights} dst:${e.dst}${same ? '' : ' (experts differ in K/N)'}`;
  }
}

export { packedWeightsDesc };
