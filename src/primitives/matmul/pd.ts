import { DnnlError, check, checkImpl } from '../../common/status.js';
import { now, verboseLine } from '../../common/verbose.js';
import { countPdTime } from '../../common/census.js';
import { created } from '../../runtime/live_engine.js';
import { MemoryDesc } from '../../memory/desc.js';
import { tagToStrides } from '../../memory/format_tag.js';
import { PrimitiveAttr } from '../../attr/primitive_attr.js';
import type { Engine } from '../../runtime/engine.js';
import type { GpuMatmulImpl, MatmulImpl } from './impl.js';
import { gpuMatmulImplList, matmulImplList } from './impl_list.js';
import type { GpuEngine } from '../../runtime/gpu/gpu_engine.js';
import { problemString, type MatmulKind, type MatmulProblem, type MoeRows } from './problem.js';
import type { PostOp } from '../../attr/post_ops.js';
import { ARG, argName } from '../args.js';
import {
  BINARY_SRC1_TYPES, FLOAT_TYPES, NO_FUSION, broadcastMap, dataTypeRejection, resolveQuant,
  type BinaryParam, type Fusion, type GluBackwardParam, type QuantArg, type QuantParam, type QuantShape,
} from '../../attr/fusion.js';
import { MATMUL_QUANT_ARG_ID } from './problem.js';
import { QUANT_ARGS } from '../../attr/fusion.js';
import { firstImpl } from '../pick_impl.js';

/** The ids of the arguments that take scales / zero points. */

/**
 * What `pd.queryMd` answers: the arguments, the P#2 offsets, and the values memories of rfcs/0002:
 * `scales:src|weights|dst`, `zero_points:src|weights|dst` (plain descriptors),
 * `scales:src:grouped` / `zero_points:src:grouped` (P#1 per-row values as a grouped descriptor
 * sharing src's partition; also accepted) and `binary:i` (src1 of the post-op at chain position i).
 */
export type MatmulQuery =
  | 'src' | 'weights' | 'bias' | 'dst' | 'grouped_offsets' | 'token_index' | 'token_ks' | 'expert_num_tokens' | 'expert_map'
  | `scales:${QuantArg}` | `zero_points:${QuantArg}` | 'scales:src:grouped' | 'zero_points:src:grouped' | `binary:${number}`
  | 'glu_backward:src' | 'glu_backward:prob' | 'glu_backward:diff_prob' | 'glu_backward:alpha' | 'glu_backward:beta';

function describe(md: MemoryDesc): string {
  return md.isGrouped ? `grouped(var dim${md.grouped?.variableDim})` : md.format === 'any' ? 'any' : 'plain';
}

/** `any` src/dst resolve to row-major: nothing to gain from another activation layout here. */
function resolveActivation(md: MemoryDesc): MemoryDesc {
  if (md.format !== 'any') return md;
  const t = 'abcdefghijkl'.slice(0, md.ndims);
  return new MemoryDesc({ dims: md.dims, dataType: md.dataType, format: 'blocked', strides: tagToStrides(t, md.dims, 'matmul') });
}

function classify(src: MemoryDesc, wei: MemoryDesc, dst: MemoryDesc, attr: PrimitiveAttr): MatmulKind {
  const vs = src.grouped?.variableDim, vw = wei.grouped?.variableDim;
  const { gather, scatterTopK } = attr.moeRows;
  if (!src.isGrouped && !wei.isGrouped && !dst.isGrouped) return 'dense';
  if (vs === 0 && !wei.isGrouped && dst.grouped?.variableDim === 0) return 'grouped_m';
  // MoE: a gathered src (plain [T, K]) or a scattered dst (plain [T * topK, N]) with the other side grouped.
  if (gather && !src.isGrouped && !wei.isGrouped && dst.grouped?.variableDim === 0) return 'grouped_m';
  if (scatterTopK && vs === 0 && !wei.isGrouped && !dst.isGrouped) return 'grouped_m';
  if (vs === 1 && vw === 0 && !dst.isGrouped) return 'grouped_k';
  throw new DnnlError('invalid_arguments', `matmul: layout combination src:${describe(src)} weights:${describe(wei)} dst:${describe(dst)} is not a matmul; use grouped(var dim0) x plain [G,K,N] -> grouped(var dim0), or grouped(var dim1) x grouped(var dim0) -> plain [G,M,N]`);
}

/**
 * Matmul primitive descriptor: `new matmul.PrimitiveDesc(eng, src, weights, dst, attr?)` or, with
 * bias, `new matmul.PrimitiveDesc(eng, src, weights, bias, dst, attr?)` (oneDNN argument order).
 * The constructor validates the descriptors (a flat list of rules, one per line) and picks the first
 * implementation of the ordered list that accepts the problem.
 */
export class PrimitiveDesc {
  readonly engine: Engine | GpuEngine;
  readonly problem: MatmulProblem;
  /** The chosen implementation: from the cpu list on a cpu engine, from the gpu list on a gpu engine. */
  readonly impl: MatmulImpl | GpuMatmulImpl;
  readonly creationMs: number;
  private offsetsMd: MemoryDesc | undefined;

  constructor(engine: Engine | GpuEngine, src: MemoryDesc, weights: MemoryDesc, biasOrDst: MemoryDesc, dstOrAttr?: MemoryDesc | PrimitiveAttr, attrArg?: PrimitiveAttr) {
    const t0 = now();
    created('primitive_desc', engine);
    const hasBias = dstOrAttr instanceof MemoryDesc;
    const bias = hasBias ? biasOrDst : undefined;
    const dst = hasBias ? dstOrAttr : biasOrDst;
    const attr = (hasBias ? attrArg : (dstOrAttr as PrimitiveAttr | undefined)) ?? new PrimitiveAttr();
    this.engine = engine;
    const p = PrimitiveDesc.init(engine, src, weights, bias, dst, attr);
    const { impl: chosen, weights: wei } = engine.kind === 'gpu' ? PrimitiveDesc.pick(gpuMatmulImplList, p, engine) : PrimitiveDesc.pick(matmulImplList, p, engine);
    this.impl = chosen;
    this.problem = Object.freeze({ ...p, weights: wei });
    this.creationMs = now() - t0;
    countPdTime(this.creationMs);
    verboseLine('create', ['matmul', this.implInfo, 'undef', this.mdsString(), attr.toString(), '', problemString(this.problem), this.creationMs.toFixed(4)]);
  }

  /** The first implementation of the engine kind's ordered list that accepts the problem, and its weights layout. */
  private static pick<E, I extends MatmulImpl<E, unknown>>(list: readonly I[], p: MatmulProblem, engine: E): { impl: I; weights: MemoryDesc } {
    const impl = firstImpl(list, (i) => i.reject(p, engine), (reasons) => `matmul: no implementation for ${problemString(p)} on the ${(engine as { kind?: string }).kind ?? 'cpu'} engine (${reasons})`);
    return { impl, weights: p.weights.format === 'any' ? impl.weightsLayout(p, engine) : p.weights };
  }

  /** Validation rules, one per line, in the order oneDNN's `init()` would check them. */
  private static init(engine: Engine | GpuEngine, src: MemoryDesc, wei: MemoryDesc, bias: MemoryDesc | undefined, dst: MemoryDesc, attr: PrimitiveAttr): MatmulProblem {
    check(engine !== undefined && engine !== null, 'matmul: engine is required');
    check(src instanceof MemoryDesc, 'matmul: src must be a memory descriptor');
    check(wei instanceof MemoryDesc, 'matmul: weights must be a memory descriptor');
    check(dst instanceof MemoryDesc, 'matmul: dst must be a memory descriptor');
    check(bias === undefined || bias instanceof MemoryDesc, 'matmul: bias must be a memory descriptor');
    check(attr instanceof PrimitiveAttr, 'matmul: attr must be a PrimitiveAttr');
    check(src.format !== 'packed' && dst.format !== 'packed', 'matmul: src and dst cannot use a packed weights layout');
    checkImpl(!src.hasRuntimeDims && !wei.hasRuntimeDims && !dst.hasRuntimeDims, 'matmul: RUNTIME_DIM_VAL dims are not supported; use grouped descriptors for runtime group sizes');
    check(bias === undefined || (bias.format !== 'any' && !bias.isGrouped), 'matmul: bias must be a plain descriptor with a layout');
    const { gather, scatterTopK, batchedCounts } = attr.moeRows;
    checkImpl(!(gather && scatterTopK), 'matmul: gather and scatter in one matmul are not supported (an MoE layer gathers in GEMM1 and scatters in GEMM2)');
    checkImpl(!batchedCounts || (!gather && !scatterTopK && !attr.groupedOffsets), 'matmul: batched token counts do not combine with gather, scatter or grouped offsets');
    const kind = classify(src, wei, dst, attr);
    check(!(gather || scatterTopK) || kind === 'grouped_m' || attr.groupedOffsets !== undefined, `matmul: ${gather ? 'gather' : 'scatter'} needs grouped rows: a grouped ${gather ? 'dst' : 'src'} [total_M, ${gather ? 'N' : 'K'}] (Proposal #1) or the grouped-offsets attribute (Proposal #2)`);
    check(!batchedCounts || kind === 'dense', 'matmul: batched token counts need a dense 3D batched matmul (src [G, C, K], weights [G, K, N], dst [G, C, N])');
    check(attr.expertScalesArgs.length === 0, 'matmul: attr.setExpertScales belongs to grouped_gemm (Proposal #3: a tensor per expert)');
    const { zeroFillUngrouped, expertMap } = attr.moeRows;
    const rowsGrouped = kind === 'grouped_m' || (kind === 'dense' && attr.groupedOffsets !== undefined);
    check(!zeroFillUngrouped || rowsGrouped, 'matmul: attr.setZeroFillUngroupedRows needs grouped rows: a grouped src and dst [total_M, ...] (Proposal #1) or the grouped-offsets attribute (Proposal #2)');
    check(!zeroFillUngrouped || (!gather && !scatterTopK), "matmul: attr.setZeroFillUngroupedRows is cuDNN's none mode: it does not combine with a gather or a scatter");
    check(!expertMap || rowsGrouped, 'matmul: attr.setExpertMap needs grouped rows: a grouped src or dst [total_M, ...] (Proposal #1) or the grouped-offsets attribute (Proposal #2)');
    if (attr.dynamicQuantization) PrimitiveDesc.checkDynamicQuantization(kind, src, wei, attr);
    const s = resolveActivation(src), d = resolveActivation(dst);
    const base =
      attr.groupedOffsets ? PrimitiveDesc.initOffsetsAttr(kind, s, wei, bias, d, attr) :
      kind === 'dense' ? PrimitiveDesc.initDense(s, wei, bias, d, attr) :
      kind === 'grouped_m' ? PrimitiveDesc.initGroupedM(s, wei, bias, d, attr) :
      PrimitiveDesc.initGroupedK(s, wei, bias, d, attr);
    return { ...base, fusion: PrimitiveDesc.initFusion(base) };
  }

  /** rfcs/0006: dynamic int8 activations on a weight-only matmul. Rules one per line. */
  private static checkDynamicQuantization(kind: MatmulKind, src: MemoryDesc, wei: MemoryDesc, attr: PrimitiveAttr): void {
    const what = 'matmul: attr.setDynamicQuantization';
    checkImpl(kind !== 'grouped_k', `${what}: variable-K matmuls are not supported (grouped rows, dense 2D or batched only)`);
    check(FLOAT_TYPES.includes(src.dataType), `${what}: src must be f32, bf16 or f16 (the activation quantized at execution), got ${src.dataType}`);
    checkImpl(['s8', 'u8', 's4', 'u4', 'f4_e2m1'].includes(wei.dataType), `${what}: weights must be s8, u8, s4, u4 or f4_e2m1 (a weight-only matmul), got ${wei.dataType}`);
    check(attr.getScales(ARG.SRC) === undefined && attr.getZeroPoints(ARG.SRC) === undefined, `${what}: src scales / zero points are computed by the primitive; do not set them`);
    checkImpl(attr.getZeroPoints(ARG.WEIGHTS) === undefined, `${what}: weights zero points are not supported (symmetric weights only)`);
  }

  /** Row extents of src and dst for the MoE row maps (rules one per line); `M` is the routed rows. */
  private static moeRows(attr: PrimitiveAttr, M: number, src: MemoryDesc, dst: MemoryDesc, experts: number): MoeRows {
    const { gather, scatterTopK, batchedCounts, zeroFillUngrouped: zeroFill, expertMap } = attr.moeRows;
    const srcRows = src.dims[0], dstRows = dst.dims[0];
    check(gather || srcRows === M, `matmul: src dims[0] = ${srcRows} must equal the routed rows ${M}`);
    check(scatterTopK > 0 || dstRows === M, `matmul: dst dims[0] = ${dstRows} must equal src total rows ${M}${gather ? ' (the routed rows: with a gather, dst holds them)' : ''}`);
    check(!scatterTopK || dstRows % scatterTopK === 0, `matmul: with a scatter, dst dims[0] = ${dstRows} must be tokens x topK (a multiple of topK = ${scatterTopK})`);
    return { gather, scatterTopK, batchedCounts, srcRows, dstRows, zeroFill, expertMap, experts };
  }

  /** GLU rules on the GEMM's N columns; returns the destination's column count. */
  private static dstCols(attr: PrimitiveAttr, N: number): number {
    const gb = attr.postOps.gluBackward;
    if (gb) {
      check(gb.layout !== 'blocks32' || N % 32 === 0, `matmul: glu_backward layout blocks32 needs N % 32 == 0 (dst holds alternating 32-column gate/up blocks), weights N = ${N}`);
      return 2 * N;
    }
    const glu = attr.postOps.glu;
    if (!glu) return N;
    check(N % 2 === 0, `matmul: a glu post-op needs an even number of GEMM columns (gate + up), weights N = ${N}`);
    check(glu.layout !== 'blocks32' || N % 64 === 0, `matmul: glu layout blocks32 needs N % 64 == 0 (alternating 32-column gate/up blocks), weights N = ${N}`);
    return N / 2;
  }

  /** Message suffix naming the GLU when dst has N/2 columns. */
  private static gluNote(attr: PrimitiveAttr): string {
    if (attr.postOps.gluBackward) return ' x 2 (glu_backward: d(gate) and d(up))';
    return attr.postOps.glu ? ' / 2 (glu)' : '';
  }

  private static initDense(src: MemoryDesc, wei: MemoryDesc, bias: MemoryDesc | undefined, dst: MemoryDesc, attr: PrimitiveAttr): MatmulProblem {
    const nd = dst.ndims;
    check(nd >= 2, `matmul: dst must have at least 2 dims, got ${nd}`);
    check(src.ndims === nd, `matmul: src has ${src.ndims} dims but dst has ${nd}`);
    check(wei.ndims === nd, `matmul: weights have ${wei.ndims} dims but dst has ${nd}`);
    const [M, K, N] = [src.dims[nd - 2], src.dims[nd - 1], wei.dims[nd - 1]];
    check(wei.dims[nd - 2] === K, `matmul: weights dims[${nd - 2}] = ${wei.dims[nd - 2]} must equal src K = ${K}`);
    check(dst.dims[nd - 2] === M, `matmul: dst dims[${nd - 2}] = ${dst.dims[nd - 2]} must equal src M = ${M}`);
    const Nd = PrimitiveDesc.dstCols(attr, N);
    check(dst.dims[nd - 1] === Nd, `matmul: dst dims[${nd - 1}] = ${dst.dims[nd - 1]} must equal weights N${PrimitiveDesc.gluNote(attr)} = ${Nd}`);
    for (let b = 0; b < nd - 2; b++) {
      check(src.dims[b] === dst.dims[b] || src.dims[b] === 1, `matmul: src batch dims[${b}] = ${src.dims[b]} must equal dst's ${dst.dims[b]} or be 1 (broadcast)`);
      check(wei.dims[b] === dst.dims[b] || wei.dims[b] === 1, `matmul: weights batch dims[${b}] = ${wei.dims[b]} must equal dst's ${dst.dims[b]} or be 1 (broadcast)`);
      check(dst.dims[b] === (src.dims[b] === 1 ? wei.dims[b] : src.dims[b]), `matmul: dst batch dims[${b}] = ${dst.dims[b]} must be the broadcast of src's ${src.dims[b]} and weights' ${wei.dims[b]}`);
    }
    PrimitiveDesc.checkBias(bias, [...dst.dims.slice(0, nd - 1), N], attr);
    const counts = attr.moeRows.batchedCounts;
    check(!counts || nd === 3, `matmul: batched token counts need 3D src [G, C, K] and dst [G, C, N], got ${nd} dims`);
    check(!counts || src.dims[0] === dst.dims[0], `matmul: with batched token counts, src dims[0] = ${src.dims[0]} must equal dst's ${dst.dims[0]} (no broadcast of the batch)`);
    const moe: MoeRows = { gather: false, scatterTopK: 0, batchedCounts: counts, srcRows: M, dstRows: M, zeroFill: false, expertMap: false, experts: 1 };
    return { kind: 'dense', M, K, N, dstN: Nd, G: 1, batch: dst.dims.slice(0, nd - 2), src, weights: wei, bias, dst, attr, offsetsFrom: undefined, offsetsArg: 'src', moe, fusion: NO_FUSION };
  }

  private static initGroupedM(src: MemoryDesc, wei: MemoryDesc, bias: MemoryDesc | undefined, dst: MemoryDesc, attr: PrimitiveAttr): MatmulProblem {
    // With a gather src is a plain [T, K] and dst holds the partition; with a scatter the reverse.
    const gs = src.grouped, gd = dst.grouped;
    const part = (gs ?? gd)!;
    check(src.ndims === 2, `matmul: ${gs ? 'grouped ' : ''}src must be 2D [${gs ? 'total_M' : 'T'}, K], got ${src.ndims} dims`);
    check(dst.ndims === 2, `matmul: ${gd ? 'grouped ' : ''}dst must be 2D [${gd ? 'total_M' : 'T x topK'}, N], got ${dst.ndims} dims`);
    check(wei.ndims === 3, `matmul: weights must be 3D [G, K, N] for a grouped src, got ${wei.ndims} dims`);
    const K = src.dims[1];
    const M = gs ? src.dims[0] : dst.dims[0];
    const [E, , N] = wei.dims;
    // Without an expert map group g is expert g; with one the groups are the partition's, any count.
    const map = attr.moeRows.expertMap, G = map ? part.groupCount : E;
    check(!gs || gs.groupCount === G, `matmul: src group count ${gs?.groupCount} must equal ${map ? `dst's ${G}` : `weights dims[0] = ${G} (or map groups to experts: attr.setExpertMap)`}`);
    check(!gd || gd.groupCount === G, `matmul: dst group count ${gd?.groupCount} must equal ${map ? `src's ${G}` : `weights dims[0] = ${G} (or map groups to experts: attr.setExpertMap)`}`);
    check(wei.dims[1] === K, `matmul: weights dims[1] = ${wei.dims[1]} must equal src K = ${K}`);
    const moe = PrimitiveDesc.moeRows(attr, M, src, dst, E);
    const Nd = PrimitiveDesc.dstCols(attr, N);
    check(dst.dims[1] === Nd, `matmul: dst dims[1] = ${dst.dims[1]} must equal weights N${PrimitiveDesc.gluNote(attr)} = ${Nd}`);
    check(!gs || !gd || gs.offsetsDt === gd.offsetsDt, `matmul: src and dst offsets data types differ (${gs?.offsetsDt} vs ${gd?.offsetsDt})`);
    check(!gs?.groupSizes || !gd?.groupSizes || gs.groupSizes.every((v, i) => v === gd.groupSizes![i]), 'matmul: src and dst per-group dims differ');
    check(part.offsetsDt === 's32', `matmul: offsets data type ${part.offsetsDt} is not supported (s32)`);
    PrimitiveDesc.checkBias(bias, [E, N], attr);
    return { kind: 'grouped_m', M, K, N, dstN: Nd, G, batch: [], src, weights: wei, bias, dst, attr, offsetsFrom: 'desc', offsetsArg: gs ? 'src' : 'dst', moe, fusion: NO_FUSION };
  }

  private static initGroupedK(src: MemoryDesc, wei: MemoryDesc, bias: MemoryDesc | undefined, dst: MemoryDesc, attr: PrimitiveAttr): MatmulProblem {
    const gs = src.grouped!, gw = wei.grouped!;
    check(src.ndims === 2, `matmul: grouped src must be 2D [M, total_K], got ${src.ndims} dims`);
    check(wei.ndims === 2, `matmul: grouped weights must be 2D [total_K, N], got ${wei.ndims} dims`);
    check(dst.ndims === 3, `matmul: dst must be 3D [G, M, N] for variable-K groups, got ${dst.ndims} dims`);
    const [M, K] = src.dims;
    const N = wei.dims[1];
    const G = dst.dims[0];
    check(gs.groupCount === G, `matmul: src group count ${gs.groupCount} must equal dst dims[0] = ${G}`);
    check(gw.groupCount === G, `matmul: weights group count ${gw.groupCount} must equal dst dims[0] = ${G}`);
    check(wei.dims[0] === K, `matmul: weights dims[0] = ${wei.dims[0]} must equal src total K = ${K}`);
    check(dst.dims[1] === M, `matmul: dst dims[1] = ${dst.dims[1]} must equal src M = ${M}`);
    const Nd = PrimitiveDesc.dstCols(attr, N);
    check(dst.dims[2] === Nd, `matmul: dst dims[2] = ${dst.dims[2]} must equal weights N${PrimitiveDesc.gluNote(attr)} = ${Nd}`);
    check(gs.offsetsDt === gw.offsetsDt, `matmul: src and weights offsets data types differ (${gs.offsetsDt} vs ${gw.offsetsDt})`);
    check(!gs.groupSizes || !gw.groupSizes || gs.groupSizes.every((v, i) => v === gw.groupSizes![i]), 'matmul: src and weights per-group dims differ');
    PrimitiveDesc.checkBias(bias, [G, M, N], attr);
    const moe: MoeRows = { gather: false, scatterTopK: 0, batchedCounts: false, srcRows: M, dstRows: M, zeroFill: false, expertMap: false, experts: G };
    return { kind: 'grouped_k', M, K, N, dstN: Nd, G, batch: [], src, weights: wei, bias, dst, attr, offsetsFrom: 'desc', offsetsArg: 'src', moe, fusion: NO_FUSION };
  }

  /** Proposal #2: plain 2D src/dst whose rows are grouped by offsets given at execution. */
  private static initOffsetsAttr(kind: MatmulKind, src: MemoryDesc, wei: MemoryDesc, bias: MemoryDesc | undefined, dst: MemoryDesc, attr: PrimitiveAttr): MatmulProblem {
    const ga = attr.groupedOffsets!;
    check(kind === 'dense', 'matmul: grouped-offsets attribute needs plain src and dst, not grouped descriptors (use one or the other)');
    check(src.ndims === 2, `matmul: with grouped offsets, src must be 2D [total_M, K], got ${src.ndims} dims`);
    check(dst.ndims === 2, `matmul: with grouped offsets, dst must be 2D [total_M, N], got ${dst.ndims} dims`);
    check(wei.ndims === 3, `matmul: with grouped offsets, weights must be 3D [G, K, N], got ${wei.ndims} dims`);
    const K = src.dims[1];
    const M = attr.moeRows.gather ? dst.dims[0] : src.dims[0];
    const [E, , N] = wei.dims;
    const map = attr.moeRows.expertMap, G = map ? ga.groupCount : E;
    check(ga.groupCount === G, `matmul: grouped-offsets group count ${ga.groupCount} must equal weights dims[0] = ${G} (or map groups to experts: attr.setExpertMap)`);
    check(wei.dims[1] === K, `matmul: weights dims[1] = ${wei.dims[1]} must equal src K = ${K}`);
    const moe = PrimitiveDesc.moeRows(attr, M, src, dst, E);
    const Nd = PrimitiveDesc.dstCols(attr, N);
    check(dst.dims[1] === Nd, `matmul: dst dims[1] = ${dst.dims[1]} must equal weights N${PrimitiveDesc.gluNote(attr)} = ${Nd}`);
    PrimitiveDesc.checkBias(bias, [E, N], attr);
    return { kind: 'grouped_m', M, K, N, dstN: Nd, G, batch: [], src, weights: wei, bias, dst, attr, offsetsFrom: 'attr', offsetsArg: 'src', moe, fusion: NO_FUSION };
  }

  /** Bias covers the GEMM's N columns (all of them with a GLU: it is added before it). */
  private static checkBias(bias: MemoryDesc | undefined, want: readonly number[], attr: PrimitiveAttr): void {
    if (!bias) return;
    const note = attr.postOps.glu ? ' (with a glu, bias covers all N GEMM columns: it is added before the glu)' : '';
    check(bias.ndims === want.length, `matmul: bias must have ${want.length} dims [${want.join(',')}] (each may be 1), got [${bias.dims.join(',')}]${note}`);
    bias.dims.forEach((b, i) => check(b === want[i] || b === 1, `matmul: bias dims[${i}] = ${b} must equal ${want[i]} or be 1${note}`));
  }

  /** rfcs/0002: data types, scales, zero points, binary post-ops, GLU placement. Rules one per line. */
  private static initFusion(p: MatmulProblem): Fusion {
    const { attr } = p;
    const ops = attr.postOps.entries;
    check(ops.every((o, i) => o.kind !== 'glu' || i === 0), 'matmul: a glu post-op must be the first post-op');
    checkImpl(!p.bias || FLOAT_TYPES.includes(p.bias.dataType), `matmul: bias data type ${p.bias?.dataType} is not supported (f32, bf16, f16)`);
    const why = dataTypeRejection(p.src.dataType, p.weights.dataType, p.dst.dataType);
    checkImpl(why === undefined, `matmul: ${why}`);
    for (const a of [...attr.scalesArgs, ...attr.zeroPointsArgs]) check(a === ARG.SRC || a === ARG.WEIGHTS || a === ARG.DST, `matmul: scales and zero points take ARG.SRC, ARG.WEIGHTS or ARG.DST, got ${argName(a)} (the MULTIPLE_* ids are for grouped_gemm)`);
    check(ops.every((o, i) => o.kind !== 'glu_backward' || (i === 0 && ops.length === 1)), 'matmul: a glu_backward post-op must be the only post-op');
    const gluBackward = PrimitiveDesc.gluBackwardParam(p);
    const hasAny = attr.scalesArgs.length + attr.zeroPointsArgs.length > 0 || ops.some((o) => o.kind === 'binary' || o.kind === 'glu') || gluBackward !== undefined;
    if (!hasAny) return NO_FUSION;
    const shapes = PrimitiveDesc.quantShapes(p);
    const scales: Partial<Record<QuantArg, QuantParam>> = {};
    const zeroPoints: Partial<Record<QuantArg, QuantParam>> = {};
    for (const arg of QUANT_ARGS) {
      const sq = attr.getScales(MATMUL_QUANT_ARG_ID[arg]);
      if (sq) scales[arg] = resolveQuant(`matmul: scales of ${arg}`, 'scales', arg, sq, shapes[arg]);
      const zq = attr.getZeroPoints(MATMUL_QUANT_ARG_ID[arg]);
      if (zq) zeroPoints[arg] = resolveQuant(`matmul: zero points of ${arg}`, 'zero_points', arg, zq, shapes[arg]);
    }
    const binary = ops.flatMap((o, i) => (o.kind === 'binary' ? [PrimitiveDesc.binaryParam(p, o, i)] : []));
    return Object.freeze({ scales: Object.freeze(scales), zeroPoints: Object.freeze(zeroPoints), binary: Object.freeze(binary), glu: attr.postOps.glu, ...(gluBackward ? { gluBackward } : {}) });
  }

  /** rfcs/0002 section 10: the GLU backward post-op's problem rules and extra argument descriptors. */
  private static gluBackwardParam(p: MatmulProblem): GluBackwardParam | undefined {
    const op = p.attr.postOps.gluBackward;
    if (!op) return undefined;
    const what = 'matmul: glu_backward post-op';
    checkImpl(p.kind === 'grouped_m' || (p.kind === 'dense' && p.batch.length === 0), `${what}: needs grouped rows (Proposal #1 or #2) or a 2D dense matmul, not a ${p.kind === 'dense' ? 'batched' : 'variable-K'} matmul`);
    checkImpl(!p.moe.gather && !p.moe.scatterTopK, `${what}: does not combine with a gather or scatter`);
    checkImpl(FLOAT_TYPES.includes(p.dst.dataType), `${what}: dst data type ${p.dst.dataType} is not supported (f32, bf16, f16)`);
    check(p.attr.getScales(ARG.DST) === undefined && p.attr.getZeroPoints(ARG.DST) === undefined, `${what}: dst scales / zero points do not apply to gradients`);
    const rows = p.M;
    const src = new MemoryDesc({ dims: [rows, 2 * p.N], dataType: op.srcDataType, format: 'blocked', strides: [2 * p.N, 1] });
    const prob = op.prob ? new MemoryDesc({ dims: [rows, 1], dataType: 'f32', format: 'blocked', strides: [1, 1] }) : undefined;
    const grouped = op.groupAlpha || op.groupBeta;
    checkImpl(!grouped || p.kind === 'grouped_m', `${what}: per-group alpha / beta need grouped rows (Proposal #1 or #2)`);
    const groupScales = grouped ? new MemoryDesc({ dims: [p.moe.experts], dataType: 'f32', format: 'blocked', strides: [1] }) : undefined;
    return Object.freeze({ op, position: 0, src, prob, groupScales });
  }

  /** The logical tensors scales and zero points refer to, with the granularities each kind takes (rfcs/0002 section 2). */
  private static quantShapes(p: MatmulProblem): Record<QuantArg, QuantShape> {
    const { G, M, K, N, dstN } = p;
    if (p.kind === 'dense') {
      const nd = p.dst.ndims;
      const names = (a: string, b: string): string[] => [...p.batch.map((_, i) => `batch dim ${i}`), a, b];
      return {
        src: { dims: p.src.dims, names: names('M', 'K'), groupable: [nd - 1], perGroupG: undefined, table: undefined, tensorDt: p.src.dataType, rowsPartition: undefined },
        weights: { dims: p.weights.dims, names: names('K', 'N'), groupable: [nd - 2, nd - 1], perGroupG: undefined, table: undefined, tensorDt: p.weights.dataType, rowsPartition: undefined },
        dst: { dims: p.dst.dims, names: names('M', 'N'), groupable: [], perGroupG: undefined, table: undefined, tensorDt: p.dst.dataType, rowsPartition: undefined },
      };
    }
    if (p.kind === 'grouped_m') {
      // Gather: src rows are tokens ([T, K]); scatter: dst rows are token x slot ([T * topK, N]).
      const sr = p.moe.srcRows, dr = p.moe.dstRows;
      return {
        src: { dims: [sr, K], names: [p.moe.gather ? 'T' : 'total_M', 'K'], groupable: [1], perGroupG: G, table: [[0, []], [1, []], [3, [1]]], tensorDt: p.src.dataType, rowsPartition: p.offsetsFrom === 'desc' && p.src.isGrouped ? p.src : undefined },
        // Weights are indexed by expert: E = G unless groups are mapped to experts (attr.setExpertMap).
        weights: { dims: [p.moe.experts, K, N], names: [p.moe.expertMap ? 'E' : 'G', 'K', 'N'], groupable: [1, 2], perGroupG: undefined, table: [[0, []], [1, []], [5, []], [7, [1, 2]]], tensorDt: p.weights.dataType, rowsPartition: undefined },
        dst: { dims: [dr, dstN], names: [p.moe.scatterTopK ? 'T x topK' : 'total_M', 'N'], groupable: [], perGroupG: G, table: [[0, []]], tensorDt: p.dst.dataType, rowsPartition: undefined },
      };
    }
    return {
      src: { dims: [M, K], names: ['M', 'total_K'], groupable: [], perGroupG: G, table: [[0, []]], tensorDt: p.src.dataType, rowsPartition: undefined },
      weights: { dims: [K, N], names: ['total_K', 'N'], groupable: [], perGroupG: G, table: [[0, []]], tensorDt: p.weights.dataType, rowsPartition: undefined },
      dst: { dims: [G, M, dstN], names: ['G', 'M', 'N'], groupable: [], perGroupG: undefined, table: [[0, []]], tensorDt: p.dst.dataType, rowsPartition: undefined },
    };
  }

  /** src1 of a binary post-op: f32 / bf16 / f16 / s8 / u8 / s32, and a shape from rfcs/0002 section 4 (grouped M) or oneDNN broadcast (dense, variable K). */
  private static binaryParam(p: MatmulProblem, o: Extract<PostOp, { kind: 'binary' }>, position: number): BinaryParam {
    const md = o.src1;
    const what = `matmul: binary post-op ${position} src1`;
    const dims = `[${md.dims.join(',')}]`;
    checkImpl(BINARY_SRC1_TYPES.includes(md.dataType), `${what}: data type ${md.dataType} is not supported (${BINARY_SRC1_TYPES.join(', ')})`);
    check(!md.hasRuntimeDims, `${what}: dims ${dims} must be known (RUNTIME_DIM_VAL src1 is for grouped_gemm)`);
    const param = (map: BinaryParam['map']): BinaryParam => Object.freeze({ position, alg: o.alg, md, map, perExpert: false });
    if (p.kind !== 'grouped_m') {
      check(md.format === 'blocked', `${what}: must be a plain descriptor for a ${p.kind === 'dense' ? 'dense' : 'variable-K'} matmul`);
      check(md.ndims === p.dst.ndims && md.dims.every((d, i) => d === p.dst.dims[i] || d === 1), `${what}: dims ${dims} must have dst's ${p.dst.ndims} dims [${p.dst.dims.join(',')}], each equal or 1`);
      return param(broadcastMap(md));
    }
    const { G, dstN: N } = p;
    const rows = p.moe.dstRows;
    const cols = (d: number): boolean => d === N || d === 1;
    const shapes = `[total_M = ${rows}, ${N} or 1] (per row), [G = ${G}, ${N} or 1] (per group) or [G, 1, ${N} or 1] (per group, needed when G = total_M)`;
    if (md.isGrouped) {
      check(p.offsetsFrom === 'desc' && p.dst.isGrouped, `${what}: a grouped src1 needs grouped src/dst (Proposal #1); with the grouped-offsets attribute or a scatter pass a plain [${p.moe.scatterTopK ? 'T x topK' : 'total_M'} = ${rows}, ${N} or 1] src1`);
      check(md.ndims === 2 && md.grouped?.variableDim === 0 && md.dims[0] === rows && cols(md.dims[1]), `${what}: a grouped src1 must be [total_M = ${rows}, ${N} or 1] grouped by rows, got ${md}`);
      const gs = md.grouped!, gd = p.dst.grouped!;
      check(gs.groupCount === G && gs.offsetsDt === gd.offsetsDt && (gs.groupSizes ?? []).join() === (gd.groupSizes ?? []).join(), `${what}: a grouped src1 must share dst's partition (${G} groups, ${gd.offsetsDt} offsets, ${gd.groupSizes ? `sizes ${gd.groupSizes.join('+')}` : 'runtime sizes'})`);
      return param(broadcastMap(md));
    }
    if (md.ndims === 2 && md.dims[0] === rows && cols(md.dims[1])) return param(broadcastMap(md));
    // Per group: the group index g (not its expert map[g] under attr.setExpertMap) selects the row of
    // src1 (g * strides[0]); dst rows broadcast.
    const last = md.ndims - 1;
    const perGroup = { gStride: md.strides[0], strides: [0, md.dims[last] === 1 ? 0 : md.strides[last]], blocks: [1, 1] };
    if (md.ndims === 2 && md.dims[0] === G && cols(md.dims[1])) return param(perGroup);
    check(md.ndims === 3 && md.dims[0] === G && md.dims[1] === 1 && cols(md.dims[2]), `${what}: dims ${dims} must be ${shapes}`);
    return param(perGroup);
  }

  /**
   * The descriptor the primitive expects for an argument (`weights` resolved from `tag.any`), or for
   * a values memory of rfcs/0002 (see {@link MatmulQuery}); undefined when the primitive takes none.
   */
  queryMd(what: MatmulQuery): MemoryDesc | undefined {
    const f = this.problem.fusion;
    if (what === 'glu_backward:src') return f.gluBackward?.src;
    if (what === 'glu_backward:prob' || what === 'glu_backward:diff_prob') return f.gluBackward?.prob;
    if (what === 'glu_backward:alpha') return f.gluBackward?.op.groupAlpha ? f.gluBackward.groupScales : undefined;
    if (what === 'glu_backward:beta') return f.gluBackward?.op.groupBeta ? f.gluBackward.groupScales : undefined;
    if (what.startsWith('binary:')) return f.binary.find((b) => `binary:${b.position}` === what)?.md;
    if (what.startsWith('scales:') || what.startsWith('zero_points:')) {
      const [kind, arg, alt] = what.split(':');
      const q = (kind === 'scales' ? f.scales : f.zeroPoints)[arg as QuantArg];
      return alt === 'grouped' ? q?.altMd : q?.md;
    }
    if (what === 'token_index' || what === 'token_ks') {
      const m = this.problem.moe;
      if (!(m.gather || m.scatterTopK) || (what === 'token_ks' && !m.scatterTopK)) return undefined;
      return new MemoryDesc({ dims: [this.problem.M], dataType: 's32', format: 'blocked', strides: [1] });
    }
    if (what === 'expert_map') {
      if (!this.problem.moe.expertMap) return undefined;
      return new MemoryDesc({ dims: [this.problem.G], dataType: 's32', format: 'blocked', strides: [1] });
    }
    if (what === 'expert_num_tokens') {
      if (!this.problem.moe.batchedCounts) return undefined;
      return new MemoryDesc({ dims: [this.problem.dst.dims[0]], dataType: 's32', format: 'blocked', strides: [1] });
    }
    if (what === 'grouped_offsets') {
      if (this.problem.offsetsFrom !== 'attr') return undefined;
      this.offsetsMd ??= new MemoryDesc({ dims: [this.problem.G + 1], dataType: 's32', format: 'blocked', strides: [1] });
      return this.offsetsMd;
    }
    return what === 'src' ? this.problem.src : what === 'weights' ? this.problem.weights : what === 'bias' ? this.problem.bias : this.problem.dst;
  }

  /** Name of the chosen implementation (oneDNN `impl_info_str`). */
  get implInfo(): string {
    const { impl, engine } = this;
    if (engine.kind === 'gpu') return (impl as GpuMatmulImpl).describe?.(engine, this.problem) ?? impl.name;
    return (impl as MatmulImpl).describe?.(engine, this.problem) ?? impl.name;
  }

  /** @internal verbose rendering of all descriptors. */
  mdsString(): string {
    const p = this.problem ?? undefined;
    if (!p) return '';
    const parts = [`src:${p.src}`, `wei:${p.weights}`];
    if (p.bias) parts.push(`bia:${p.bias}`);
    parts.push(`dst:${p.dst}`);
    return parts.join(' ');
  }
}
