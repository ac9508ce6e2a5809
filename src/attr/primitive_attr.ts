import { check, checkImpl } from '../common/status.js';
import { isDataType, type DataType } from '../common/data_type.js';
import { PostOps } from './post_ops.js';
import { countObject } from '../common/census.js';

/** Proposal #2: groups of an argument defined by offsets passed at execution. */
export interface GroupedOffsetsAttr {
  readonly arg: number;
  readonly groupCount: number;
  readonly offsetsDt: DataType;
}

/**
 * Dynamic quantization of an activation (rfcs/0006): the primitive quantizes `arg` itself at execution,
 * each row to `dataType` with its own symmetric scale, and runs the integer path on it.
 */
export interface DynamicQuantizationAttr {
  readonly arg: number;
  readonly dataType: DataType;
}

/**
 * How a grouped matmul's rows map to its tensors in an MoE layer (cuDNN's MoE grouped matmul modes,
 * vLLM's batched format). See rfcs/0004-moe-layer.md.
 */
export interface MoeRowsAttr {
  /** GATHER: src is the un-permuted `[T, K]`; routed row r reads src row `ARG.MOE_TOKEN_INDEX[r]` (-1: padding, zeros). */
  readonly gather: boolean;
  /** SCATTER (> 0): dst is `[T * topK, N]`; routed row r writes dst row `token_index[r] * topK + token_ks[r]`. */
  readonly scatterTopK: number;
  /** Batched format: 3D src `[G, C, K]` / dst `[G, C, N]`; batch g has `ARG.MOE_EXPERT_NUM_TOKENS[g]` valid rows. */
  readonly batchedCounts: boolean;
  /** cuDNN none mode with rows outside every group: offsets[0] may be > 0; dst rows in no group are zero-filled. */
  readonly zeroFillUngrouped: boolean;
  /** Group g uses the weights of expert `ARG.MOE_EXPERT_MAP[g]` (`[G]` s32): weights `[E, K, N]` with any E. */
  readonly expertMap: boolean;
}

/**
 * oneDNN `dnnl::accumulation_mode`: how a primitive may order its accumulation. `strict` (default): the
 * kernels' fixed order (here: packed weights give the bits of plain ones). `relaxed`: reordered summation
 * allowed — the weight-only s8 / u8 / s4 / u4 matmul then runs its decode tiles on kernels that sum
 * code x activation per K block and apply the scale once per block (rfcs/0007). `any`: the library's
 * choice (here the same as `relaxed`). oneDNN's `s32`, `f32`, `f16` (accumulator data types) are not
 * implemented.
 */
export type AccumulationMode = 'strict' | 'relaxed' | 'any' | 's32' | 'f32' | 'f16';
const ACCUMULATION_MODES: readonly string[] = ['strict', 'relaxed', 'any', 's32', 'f32', 'f16'];

const NO_MOE_ROWS: MoeRowsAttr = Object.freeze({ gather: false, scatterTopK: 0, batchedCounts: false, zeroFillUngrouped: false, expertMap: false });

/**
 * Scales or zero points of one argument (oneDNN `set_scales` / `set_zero_points`): `mask` bits name
 * the dimensions of the argument's logical tensor that have their own value, `groups` (empty, or one
 * entry per dimension) how many consecutive elements of each masked dimension share one value, and
 * `dataType` the type of the values memory. See rfcs/0002 section 2 for the granularities.
 */
export interface QuantAttr {
  readonly mask: number;
  readonly groups: readonly number[];
  readonly dataType: DataType;
}

/** Argument ids that take scales / zero points (ids of ARG; the MULTIPLE_* ones mean "every expert" of grouped_gemm). */
const QUANT_ARGS: ReadonlyMap<number, string> = new Map([
  [1, 'src'], [33, 'wei'], [17, 'dst'], [1024, 'msrc'], [3072, 'mwei'], [2048, 'mdst'],
]);

/**
 * Primitive attributes (oneDNN `primitive_attr`): post-ops, scales and zero points, and the
 * grouped-offsets attribute of RFC Proposal #2.
 */
export class PrimitiveAttr {
  postOps = new PostOps();
  private grouped: GroupedOffsetsAttr | undefined;
  private moe: MoeRowsAttr = NO_MOE_ROWS;
  private dynQuant: DynamicQuantizationAttr | undefined;
  private accMode: AccumulationMode = 'strict';
  private readonly scaleMap = new Map<number, QuantAttr>();
  private readonly zpMap = new Map<number, QuantAttr>();
  /** grouped_gemm: scales of one expert (`${arg}:${expert}`), replacing the every-expert setting for it. */
  private readonly expertScaleMap = new Map<string, QuantAttr>();

  constructor() {
    countObject('attr');
  }

  setPostOps(ops: PostOps): this {
    this.postOps = ops;
    return this;
  }

  /**
   * Proposal #2: `arg` (ARG.SRC) is a plain `[total_M, K]` tensor whose rows form `groupCount` groups
   * delimited by G+1 offsets passed at execution as `ARG.ATTR_GROUPED_OFFSETS | arg`.
   */
  setGroupedOffsets(arg: number, groupCount: number, offsetsDt: DataType = 's32'): this {
    check(arg === 1, `attr.setGroupedOffsets: only ARG.SRC can carry grouped offsets, got arg ${arg}`);
    check(Number.isSafeInteger(groupCount) && groupCount >= 1 && groupCount <= 0x7fffffff, `attr.setGroupedOffsets: groupCount must be a positive int32, got ${groupCount}`);
    check(isDataType(offsetsDt), `attr.setGroupedOffsets: unknown offsets data type '${String(offsetsDt)}'`);
    checkImpl(offsetsDt === 's32', `attr.setGroupedOffsets: offsetsDt must be s32, got ${offsetsDt}`);
    this.grouped = Object.freeze({ arg, groupCount, offsetsDt });
    return this;
  }

  get groupedOffsets(): GroupedOffsetsAttr | undefined {
    return this.grouped;
  }

  /**
   * cuDNN GATHER mode: src is the un-permuted `[T, K]` activations and routed row r of the grouped
   * matmul reads src row `ARG.MOE_TOKEN_INDEX[r]` (`[R]` s32, -1 = a padding row whose src is zero):
   * GEMM1 of an MoE layer without materialising the permuted copy. Src scales / zero points per row
   * are per token.
   */
  setGather(): this {
    this.moe = Object.freeze({ ...this.moe, gather: true });
    return this;
  }

  /**
   * cuDNN SCATTER mode: dst is `[T * topK, N]` in token order and routed row r writes dst row
   * `ARG.MOE_TOKEN_INDEX[r] * topK + ARG.MOE_TOKEN_KS[r]` (padding rows, index -1, are not written).
   * Dst scales / zero points and binary post-op inputs are indexed by that dst row, so the routing
   * weights `[T, topK]` viewed as `[T * topK, 1]` make a `binary_mul` post-op.
   */
  setScatter(topK: number): this {
    check(Number.isSafeInteger(topK) && topK >= 1 && topK <= 0x7fff, `attr.setScatter: topK must be an integer in [1, 32767], got ${topK}`);
    this.moe = Object.freeze({ ...this.moe, scatterTopK: topK });
    return this;
  }

  /**
   * vLLM's batched format: a 3D batched matmul (src `[G, C, K]`, weights `[G, K, N]`, dst `[G, C, N]`)
   * in which batch g has only `ARG.MOE_EXPERT_NUM_TOKENS[g]` (`[G]` s32, each in [0, C]) valid rows;
   * rows past the count are never read and never written.
   */
  setBatchedTokenCounts(): this {
    this.moe = Object.freeze({ ...this.moe, batchedCounts: true });
    return this;
  }

  /**
   * cuDNN's none mode with rows outside every group (grouped rows, no gather / scatter): the first
   * group may start after row 0 (offsets[0] > 0, e.g. `offsets.fromStarts(starts, total, out,
   * { leadingRows: true })` of a `first_token_offset`), and the dst rows that belong to no group,
   * `[0, offsets[0])` and `[offsets[G], M)`, are written with zeros. Without it offsets[0] must be 0 and
   * rows past the last offset are not written.
   */
  setZeroFillUngroupedRows(): this {
    this.moe = Object.freeze({ ...this.moe, zeroFillUngrouped: true });
    return this;
  }

  /**
   * Groups mapped to experts (cuDNN's batched offsets: B·E groups, group g uses expert g mod E): the
   * grouped matmul takes `ARG.MOE_EXPERT_MAP` `[G]` s32 at execution, and group g runs with the
   * weights, bias and per-expert weight scales of expert `map[g]` (in [0, E), E = weights dims[0], any
   * value: no need to repeat the weights per group).
   */
  setExpertMap(): this {
    this.moe = Object.freeze({ ...this.moe, expertMap: true });
    return this;
  }

  get moeRows(): MoeRowsAttr {
    return this.moe;
  }

  /**
   * Scales of `arg` (ARG.SRC, ARG.WEIGHTS, ARG.DST; for grouped_gemm ARG.MULTIPLE_SRC /
   * ARG.MULTIPLE_WEIGHTS / ARG.MULTIPLE_DST, meaning every expert). Values are passed at execution
   * as `ARG.ATTR_SCALES | arg` (grouped_gemm: `ARG.ATTR_SCALES | (ARG.MULTIPLE_SRC + i)` per expert).
   * Setting an argument again replaces its scales. Which masks, groups and data types a primitive
   * takes is checked by its primitive descriptor.
   */
  setScales(arg: number, mask: number, groups: readonly number[] = [], dataType: DataType = 'f32'): this {
    this.scaleMap.set(arg, quantAttr('attr.setScales', arg, mask, groups, dataType));
    return this;
  }

  /**
   * Proposal #3 (`grouped_gemm`): scales of `arg` (ARG.MULTIPLE_SRC, ARG.MULTIPLE_WEIGHTS or
   * ARG.MULTIPLE_DST) for expert `expert` alone, with their own granularity — e.g. one expert's weights
   * per column, another's K-blocked, as the pointer-array proposal allows. Values at execution as for
   * every expert (`ARG.ATTR_SCALES | (ARG.MULTIPLE_WEIGHTS + expert)`, descriptor
   * `pd.queryMd('scales:weights', expert)`); experts without their own setting use `setScales(arg, ...)`.
   * The wasm kernels take one scale layout for all experts: such a pd runs the reference implementation.
   */
  setExpertScales(arg: number, expert: number, mask: number, groups: readonly number[] = [], dataType: DataType = 'f32'): this {
    check(arg === 1024 || arg === 2048 || arg === 3072, `attr.setExpertScales: arg must be ARG.MULTIPLE_SRC, ARG.MULTIPLE_WEIGHTS or ARG.MULTIPLE_DST, got arg ${arg}`);
    check(Number.isSafeInteger(expert) && expert >= 0 && expert < 1024, `attr.setExpertScales: expert must be an integer in [0, 1024), got ${expert}`);
    this.expertScaleMap.set(`${arg}:${expert}`, quantAttr('attr.setExpertScales', arg, mask, groups, dataType));
    return this;
  }

  /** The scales `setExpertScales` gave expert `expert` of `arg`, if any. */
  getExpertScales(arg: number, expert: number): QuantAttr | undefined {
    return this.expertScaleMap.get(`${arg}:${expert}`);
  }

  /** Experts with their own scales, as `[arg, expert]`. */
  get expertScalesArgs(): readonly (readonly [number, number])[] {
    return [...this.expertScaleMap.keys()].map((k) => k.split(':').map(Number) as [number, number]);
  }

  /**
   * Dynamic int8 activations, an accuracy choice for weight-only matmuls (rfcs/0006; ONNX Runtime
   * MatMulNBits `accuracy_level = 4`, XNNPACK qd8-f32-qc4w): with s8 / u8 / s4 / u4 weights and f32 /
   * bf16 / f16 src, each src row is quantized at execution to s8 with its own scale (s = amax / 127 in
   * f32, q = round-half-even(x / s), |q| <= 127) and multiplied on the integer path; the weights' scales
   * (per column, or per K block, folded in f32 block by block) and the row scale are applied in f32.
   * Only `ARG.SRC` and `dt.s8`.
   */
  setDynamicQuantization(arg: number, dataType: DataType = 's8'): this {
    check(arg === 1, `attr.setDynamicQuantization: only ARG.SRC can be quantized dynamically, got arg ${arg}`);
    check(isDataType(dataType), `attr.setDynamicQuantization: unknown data type '${String(dataType)}'`);
    checkImpl(dataType === 's8', `attr.setDynamicQuantization: dataType must be s8 (symmetric per-row int8), got ${dataType}`);
    this.dynQuant = Object.freeze({ arg, dataType });
    return this;
  }

  get dynamicQuantization(): DynamicQuantizationAttr | undefined {
    return this.dynQuant;
  }

  /**
   * oneDNN `set_accumulation_mode` ({@link AccumulationMode}, rfcs/0007). `relaxed` / `any` allow the
   * reordered decode kernels of weight-only integer matmuls; results stay within the float64 reference's
   * tolerance, the same bits at any thread count and from run to run, but are no longer bitwise those of
   * plain weights. `s32`, `f32`, `f16` throw `unimplemented`; anything else `invalid_arguments`.
   */
  setAccumulationMode(mode: AccumulationMode): this {
    check(ACCUMULATION_MODES.includes(mode as string), `attr.setAccumulationMode: accumulation_mode must be one of ${ACCUMULATION_MODES.join(', ')}, got '${String(mode)}'`);
    checkImpl(mode === 'strict' || mode === 'relaxed' || mode === 'any', `attr.setAccumulationMode: accumulation_mode '${mode}' (an accumulator data type) is not implemented; use strict, relaxed or any`);
    this.accMode = mode;
    return this;
  }

  get accumulationMode(): AccumulationMode {
    return this.accMode;
  }

  /** Whether reordered summation is allowed (`relaxed` or `any`). */
  get relaxedAccumulation(): boolean {
    return this.accMode === 'relaxed' || this.accMode === 'any';
  }

  /** `setScales(arg, mask)`: f32 values, no groups (oneDNN `set_scales_mask`). */
  setScalesMask(arg: number, mask: number): this {
    return this.setScales(arg, mask);
  }

  /** Zero points of `arg` (same arguments and meaning as {@link setScales}; default data type s32). */
  setZeroPoints(arg: number, mask: number, groups: readonly number[] = [], dataType: DataType = 's32'): this {
    this.zpMap.set(arg, quantAttr('attr.setZeroPoints', arg, mask, groups, dataType));
    return this;
  }

  getScales(arg: number): QuantAttr | undefined {
    return this.scaleMap.get(arg);
  }

  getZeroPoints(arg: number): QuantAttr | undefined {
    return this.zpMap.get(arg);
  }

  /** Arguments that have scales, in the order they were first set. */
  get scalesArgs(): readonly number[] {
    return [...this.scaleMap.keys()];
  }

  /** Arguments that have zero points. */
  get zeroPointsArgs(): readonly number[] {
    return [...this.zpMap.keys()];
  }

  get isDefault(): boolean {
    return this.postOps.length === 0 && !this.grouped && this.scaleMap.size === 0 && this.zpMap.size === 0 && this.expertScaleMap.size === 0 && this.moe === NO_MOE_ROWS && !this.dynQuant && this.accMode === 'strict';
  }

  /** oneDNN-verbose-like rendering: `attr-scales:src:1:f32+wei:7:e8m0:1x32x1 attr-zero-points:src:0:s32 attr-post-ops:...`. */
  toString(): string {
    const parts: string[] = [];
    const q = (m: Map<number, QuantAttr>): string =>
      [...m].map(([a, v]) => `${QUANT_ARGS.get(a)}:${v.mask}:${v.dataType}${v.groups.length ? `:${v.groups.join('x')}` : ''}`).join('+');
    if (this.scaleMap.size) parts.push(`attr-scales:${q(this.scaleMap)}`);
    if (this.zpMap.size) parts.push(`attr-zero-points:${q(this.zpMap)}`);
    if (this.dynQuant) parts.push(`attr-dynamic-quantization:src:${this.dynQuant.dataType}`);
    if (this.accMode !== 'strict') parts.push(`attr-acc-mode:${this.accMode}`);
    if (this.grouped) parts.push(`attr-grouped-offsets:src:g${this.grouped.groupCount}:${this.grouped.offsetsDt}`);
    if (this.moe.gather) parts.push('attr-moe:gather');
    if (this.moe.scatterTopK) parts.push(`attr-moe:scatter:k${this.moe.scatterTopK}`);
    if (this.moe.batchedCounts) parts.push('attr-moe:batched-counts');
    if (this.moe.zeroFillUngrouped) parts.push('attr-moe:zero-fill-ungrouped');
    if (this.moe.expertMap) parts.push('attr-moe:expert-map');
    if (this.expertScaleMap.size) parts.push(`attr-expert-scales:${[...this.expertScaleMap].map(([k, v]) => `${QUANT_ARGS.get(Number(k.split(':')[0]))}${k.split(':')[1]}:${v.mask}:${v.dataType}${v.groups.length ? `:${v.groups.join('x')}` : ''}`).join('+')}`);
    if (this.postOps.length) parts.push(`attr-post-ops:${this.postOps.toString()}`);
    return parts.join(' ');
  }
}

function quantAttr(fn: string, arg: number, mask: number, groups: readonly number[], dataType: DataType): QuantAttr {
  check(QUANT_ARGS.has(arg), `${fn}: arg must be ARG.SRC, ARG.WEIGHTS or ARG.DST (ARG.MULTIPLE_SRC, ARG.MULTIPLE_WEIGHTS or ARG.MULTIPLE_DST for every expert of grouped_gemm), got arg ${arg}`);
  check(Number.isSafeInteger(mask) && mask >= 0 && mask < 1 << 12, `${fn}: mask must be an integer in [0, 4096), got ${mask}`);
  check(Array.isArray(groups), `${fn}: groups must be an array`);
  check(groups.length <= 12, `${fn}: groups must have at most 12 entries, got ${groups.length}`);
  groups.forEach((g, i) => check(Number.isSafeInteger(g) && g >= 1, `${fn}: groups[${i}] must be a positive integer, got ${g}`));
  check(isDataType(dataType), `${fn}: unknown data type '${String(dataType)}'`);
  return Object.freeze({ mask, groups: Object.freeze([...groups]), dataType });
}
