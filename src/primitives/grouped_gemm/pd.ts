import { check, checkImpl } from '../../common/status.js';
import { isRuntime } from '../../common/dims.js';
import { now, verboseLine } from '../../common/verbose.js';
import { countPdTime } from '../../common/census.js';
import { created } from '../../runtime/live_engine.js';
import { MemoryDesc } from '../../memory/desc.js';
import { packedWeightsDesc } from '../../memory/packed_weights.js';
import { PrimitiveAttr } from '../../attr/primitive_attr.js';
import type { Engine } from '../../runtime/engine.js';
import type { Expert, GroupedGemmProblem } from './problem.js';
import { gpuGroupedGemmImplList, groupedGemmImplList, type GpuGroupedGemmImpl, type GroupedGemmImpl } from './impl_list.js';
import type { GpuEngine } from '../../runtime/gpu/gpu_engine.js';
import type { PostOp } from '../../attr/post_ops.js';
import { ARG, argName } from '../args.js';
import {
  BINARY_SRC1_TYPES, FLOAT_TYPES, NO_FUSION, dataTypeRejection, resolveQuant,
  type BinaryParam, type Fusion, type QuantArg, type QuantParam, type QuantShape,
} from '../../attr/fusion.js';
import { EXPERT_QUANT_ARG_ID } from './problem.js';
import { QUANT_ARGS } from '../../attr/fusion.js';
import { firstImpl } from '../pick_impl.js';

/** The attribute ids of grouped_gemm scales / zero points: one setting for every expert. */

/**
 * What `pd.queryMd(what, expert)` answers: the expert's arguments, `runtime_dims`, and the values
 * memories of rfcs/0002 for that expert: `scales:src|weights|dst`, `zero_points:src|weights|dst`,
 * `binary:i` (src1 of the post-op at chain position i).
 */
export type GroupedGemmQuery = 'src' | 'weights' | 'dst' | 'runtime_dims' | `scales:${QuantArg}` | `zero_points:${QuantArg}` | `binary:${number}`;

/** Largest G: `ARG.MULTIPLE_WEIGHTS + i` must stay below `ARG.ATTR_SCALES`. */
export const MAX_EXPERTS = 1024;

/**
 * RFC Proposal #3: `new grouped_gemm.PrimitiveDesc(eng, srcMds, weiMds, dstMds, runtimeDimsMd, attr?)`.
 * Expert i computes `dst_i = src_i x wei_i` with `src_i = [RUNTIME_DIM_VAL, K_i]`, `wei_i = [K_i, N_i]`
 * (plain, or `tag.any` for packed panels) and `dst_i = [RUNTIME_DIM_VAL, N_i]`; the rows of every
 * expert arrive at execution in `ARG.RUNTIME_DIMS` (`[G]` s32). Experts may differ in K and N.
 */
export class PrimitiveDesc {
  readonly engine: Engine | GpuEngine;
  readonly problem: GroupedGemmProblem;
  /** The chosen implementation: from the cpu list on a cpu engine, from the gpu list on a gpu engine. */
  readonly impl: GroupedGemmImpl | GpuGroupedGemmImpl;
  readonly creationMs: number;

  constructor(engine: Engine | GpuEngine, srcMds: readonly MemoryDesc[], weiMds: readonly MemoryDesc[], dstMds: readonly MemoryDesc[], runtimeDimsMd: MemoryDesc, attr: PrimitiveAttr = new PrimitiveAttr()) {
    const t0 = now();
    created('primitive_desc', engine);
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
    check(!attr.moeRows.zeroFillUngrouped && !attr.moeRows.expertMap, 'grouped_gemm: setZeroFillUngroupedRows and setExpertMap belong to matmul with grouped rows (each expert here has its own tensors)');
    check(!attr.moeRows.gather && !attr.moeRows.scatterTopK && !attr.moeRows.batchedCounts, 'grouped_gemm: setGather, setScatter and setBatchedTokenCounts belong to matmul with grouped rows (each expert here has its own tensors)');
    check(attr.postOps.entries.every((o, i) => o.kind !== 'glu' || i === 0), 'grouped_gemm: a glu post-op must be the first post-op');
    checkImpl(attr.postOps.gluBackward === undefined, 'grouped_gemm: the glu_backward post-op is not supported (use matmul with grouped rows)');
    for (const a of [...attr.scalesArgs, ...attr.zeroPointsArgs]) check(a === ARG.MULTIPLE_SRC || a === ARG.MULTIPLE_WEIGHTS || a === ARG.MULTIPLE_DST, `grouped_gemm: scales and zero points take ARG.MULTIPLE_SRC, ARG.MULTIPLE_WEIGHTS or ARG.MULTIPLE_DST (one setting for every expert), got ${argName(a)}`);
    const experts: Expert[] = [];
    for (const [, e] of attr.expertScalesArgs) check(e < G, `grouped_gemm: attr.setExpertScales names expert ${e}, but there are ${G} experts`);
    for (let i = 0; i < G; i++) experts.push(PrimitiveDesc.expert(i, srcMds[i], weiMds[i], dstMds[i], attr));
    checkImpl(experts.every((e) => e.src.dataType === experts[0].src.dataType), 'grouped_gemm: all experts must share the src data type');
    checkImpl(experts.every((e) => e.dst.dataType === experts[0].dst.dataType), 'grouped_gemm: all experts must share the dst data type');
    checkImpl(experts.every((e) => e.weights.dataType === experts[0].weights.dataType), 'grouped_gemm: all experts must share the weights data type');
    if (attr.dynamicQuantization) PrimitiveDesc.checkDynamicQuantization(experts[0].src, experts[0].weights, attr);
    const why = dataTypeRejection(experts[0].src.dataType, experts[0].weights.dataType, experts[0].dst.dataType);
    checkImpl(why === undefined, `grouped_gemm: ${why}`);
    for (let i = 0; i < G; i++) experts[i] = { ...experts[i], fusion: PrimitiveDesc.fusion(i, experts[i], attr) };
    const shared = experts[0].fusion.binary.filter((b) => !b.perExpert && b.md.dims[1] !== 1);
    shared.forEach((b) => check(experts.every((e) => e.dstN === b.md.dims[1]), `grouped_gemm: binary post-op ${b.position} src1 [1, ${b.md.dims[1]}] is shared by every expert, so every expert needs ${b.md.dims[1]} dst columns`));
    const p: GroupedGemmProblem = { G, experts, runtimeDims: runtimeDimsMd, attr };
    const chosen = engine.kind === 'gpu' ? PrimitiveDesc.pick(gpuGroupedGemmImplList, p, engine) : PrimitiveDesc.pick(groupedGemmImplList, p, engine);
    this.engine = engine;
    this.impl = chosen.impl;
    const anyW = experts.some((e) => e.weights.format === 'any');
    this.problem = Object.freeze({ ...p, experts: anyW ? experts.map((e) => (e.weights.format === 'any' ? { ...e, weights: chosen.weightsLayout(e) } : e)) : experts });
    this.creationMs = now() - t0;
    countPdTime(this.creationMs);
    verboseLine('create', ['grouped_gemm', this.implInfo, 'undef', this.mdsString(), attr.toString(), '', `g${G}`, this.creationMs.toFixed(4)]);
  }

  /** The first implementation of the engine kind's ordered list that accepts the problem, with its weights layout bound to the engine. */
  private static pick<E, I extends GroupedGemmImpl<E, unknown>>(list: readonly I[], p: GroupedGemmProblem, engine: E): { impl: I; weightsLayout(e: Expert): MemoryDesc } {
    const impl = firstImpl(list, (i) => i.reject(p, engine), (reasons) => `grouped_gemm: no implementation on the ${(engine as { kind?: string }).kind ?? 'cpu'} engine (${reasons})`);
    return { impl, weightsLayout: (e) => impl.weightsLayout(e, engine) };
  }

  private static expert(i: number, src: MemoryDesc, wei: MemoryDesc, dst: MemoryDesc, attr: PrimitiveAttr): Expert {
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
    const glu = attr.postOps.glu;
    check(!glu || N % 2 === 0, `grouped_gemm: a glu post-op needs an even number of GEMM columns (gate + up), weights[${i}] N = ${N}`);
    check(!glu || glu.layout !== 'blocks32' || N % 64 === 0, `grouped_gemm: glu layout blocks32 needs N % 64 == 0, weights[${i}] N = ${N}`);
    const dstN = glu ? N / 2 : N;
    check(dst.dims[1] === dstN, `grouped_gemm: dst[${i}] dims[1] = ${dst.dims[1]} must equal weights[${i}] N${glu ? ' / 2 (glu)' : ''} = ${dstN}`);
    check(src.format === 'blocked' && src.strides[1] === 1, `grouped_gemm: src[${i}] must be row-major (tag.ab)`);
    check(dst.format === 'blocked' && dst.strides[1] === 1, `grouped_gemm: dst[${i}] must be row-major (tag.ab)`);
    check(wei.format !== 'packed' || wei.packed !== undefined, `grouped_gemm: weights[${i}] packed layout unknown`);
    return { K, N, dstN, src, weights: wei, dst, fusion: NO_FUSION };
  }

  /** rfcs/0006: dynamic int8 activations on weight-only experts, the rules of matmul's (one per line; every expert shares the types). */
  private static checkDynamicQuantization(src: MemoryDesc, wei: MemoryDesc, attr: PrimitiveAttr): void {
    const what = 'grouped_gemm: attr.setDynamicQuantization';
    check(FLOAT_TYPES.includes(src.dataType), `${what}: src must be f32, bf16 or f16 (the activation quantized at execution), got ${src.dataType}`);
    checkImpl(['s8', 'u8', 's4', 'u4', 'f4_e2m1'].includes(wei.dataType), `${what}: weights must be s8, u8, s4, u4 or f4_e2m1 (weight-only experts), got ${wei.dataType}`);
    const srcScales = attr.getScales(ARG.MULTIPLE_SRC) !== undefined || [...attr.expertScalesArgs].some(([a]) => a === ARG.MULTIPLE_SRC);
    check(!srcScales && attr.getZeroPoints(ARG.MULTIPLE_SRC) === undefined, `${what}: src scales / zero points are computed by the primitive; do not set them`);
    checkImpl(attr.getZeroPoints(ARG.MULTIPLE_WEIGHTS) === undefined, `${what}: weights zero points are not supported (symmetric weights only)`);
  }

  /** Expert i's scales, zero points and binary src1 (rfcs/0002; oneDNN's mask rule on the expert's plain tensors). */
  private static fusion(i: number, e: Expert, attr: PrimitiveAttr): Fusion {
    const ops = attr.postOps.entries;
    if (attr.scalesArgs.length + attr.zeroPointsArgs.length + attr.expertScalesArgs.length === 0 && !ops.some((o) => o.kind === 'binary' || o.kind === 'glu')) return NO_FUSION;
    const RT = e.src.dims[0];
    const shape = (dims: number[], names: string[], groupable: number[], tensorDt: MemoryDesc['dataType']): QuantShape =>
      ({ dims, names, groupable, perGroupG: undefined, table: undefined, tensorDt, rowsPartition: undefined });
    const shapes: Record<QuantArg, QuantShape> = {
      src: shape([RT, e.K], ['M', 'K'], [1], e.src.dataType),
      weights: shape([e.K, e.N], ['K', 'N'], [0, 1], e.weights.dataType),
      dst: shape([RT, e.dstN], ['M', 'N'], [], e.dst.dataType),
    };
    const scales: Partial<Record<QuantArg, QuantParam>> = {};
    const zeroPoints: Partial<Record<QuantArg, QuantParam>> = {};
    for (const arg of QUANT_ARGS) {
      // An expert's own scales (attr.setExpertScales) replace the every-expert setting.
      const sq = attr.getExpertScales(EXPERT_QUANT_ARG_ID[arg], i) ?? attr.getScales(EXPERT_QUANT_ARG_ID[arg]);
      if (sq) scales[arg] = resolveQuant(`grouped_gemm: scales of ${arg} (expert ${i})`, 'scales', arg, sq, shapes[arg]);
      const zq = attr.getZeroPoints(EXPERT_QUANT_ARG_ID[arg]);
      if (zq) zeroPoints[arg] = resolveQuant(`grouped_gemm: zero points of ${arg} (expert ${i})`, 'zero_points', arg, zq, shapes[arg]);
    }
    const binary = ops.flatMap((o, pos) => (o.kind === 'binary' ? [PrimitiveDesc.binaryParam(i, e, o, pos)] : []));
    return Object.freeze({ scales: Object.freeze(scales), zeroPoints: Object.freeze(zeroPoints), binary: Object.freeze(binary), glu: attr.postOps.glu });
  }

  /**
   * src1 of a binary post-op (f32 / bf16 / f16 / s8 / u8 / s32): `[1, 1]` or `[1, N]` (one memory shared by every expert, passed as
   * `ARG.ATTR_MULTIPLE_POST_OP(pos) | ARG.SRC_1`), or `[RUNTIME_DIM_VAL, 1]` / `[RUNTIME_DIM_VAL, N]`
   * (per row, one memory per expert: `ARG.ATTR_MULTIPLE_POST_OP(pos) | (ARG.MULTIPLE_SRC + i)`).
   */
  private static binaryParam(i: number, e: Expert, o: Extract<PostOp, { kind: 'binary' }>, position: number): BinaryParam {
    const md = o.src1;
    const what = `grouped_gemm: binary post-op ${position} src1`;
    checkImpl(BINARY_SRC1_TYPES.includes(md.dataType), `${what}: data type ${md.dataType} is not supported (${BINARY_SRC1_TYPES.join(', ')})`);
    check(md.format === 'blocked', `${what}: must be a plain descriptor`);
    check(md.ndims === 2 && (md.dims[0] === 1 || isRuntime(md.dims[0])) && (md.dims[1] === 1 || md.dims[1] === e.dstN), `${what}: dims [${md.dims.map((d) => (isRuntime(d) ? 'RUNTIME_DIM_VAL' : d)).join(',')}] must be [1 or RUNTIME_DIM_VAL (per row), 1 or N = ${e.dstN} (expert ${i}'s dst columns)]`);
    const perExpert = isRuntime(md.dims[0]);
    const map = { gStride: 0, strides: [perExpert ? md.strides[0] : 0, md.dims[1] === 1 ? 0 : md.strides[1]], blocks: [1, 1] };
    return Object.freeze({ position, alg: o.alg, md, map, perExpert });
  }

  /** The descriptor of an argument or values memory of expert `expert` (see {@link GroupedGemmQuery}). */
  queryMd(what: GroupedGemmQuery, expert = 0): MemoryDesc | undefined {
    if (what === 'runtime_dims') return this.problem.runtimeDims;
    const e = this.problem.experts[expert];
    if (!e) return undefined;
    if (what.startsWith('binary:')) return e.fusion.binary.find((b) => `binary:${b.position}` === what)?.md;
    if (what.startsWith('scales:')) return e.fusion.scales[what.slice(7) as QuantArg]?.md;
    if (what.startsWith('zero_points:')) return e.fusion.zeroPoints[what.slice(12) as QuantArg]?.md;
    return what === 'src' ? e.src : what === 'weights' ? e.weights : e.dst;
  }

  get implInfo(): string {
    const eng = this.engine;
    return (eng.kind === 'gpu' ? (this.impl as GpuGroupedGemmImpl).describe?.(eng, this.problem) : (this.impl as GroupedGemmImpl).describe?.(eng, this.problem)) ?? this.impl.name;
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
