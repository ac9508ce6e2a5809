/**
 * Quantization and fusion as the primitive descriptors resolve them (rfcs/0002): scales, zero points,
 * binary post-op inputs and the fused GLU of one problem, each with the descriptor its values memory
 * must have and an {@link IndexMap} from logical coordinates to an element of that memory. The
 * reference implementations read these; a kernel reads the same fields.
 */
import { check, checkImpl } from '../common/status.js';
import { isRuntime, RUNTIME_DIM_VAL } from '../common/dims.js';
import { fromStored, isSubByteType, type DataType, type ValuesView } from '../common/data_type.js';
import { MemoryDesc } from '../memory/desc.js';
import { tagToStrides } from '../memory/format_tag.js';
import type { QuantAttr } from './primitive_attr.js';
import type { PostOp } from './post_ops.js';
import type { BinaryAlg } from './eltwise.js';

export type QuantArg = 'src' | 'weights' | 'dst';
/** The arguments scales and zero points may be set on, in the order the rules check them. */
export const QUANT_ARGS: readonly QuantArg[] = ['src', 'weights', 'dst'];
export type QuantKind = 'scales' | 'zero_points';

/**
 * Element of a values memory for a logical coordinate: `g * gStride + sum_i strides[i] * floor(idx[i] / blocks[i])`,
 * where `idx` is the coordinate in the argument's logical tensor (see {@link Fusion}) and `g` the
 * group the element belongs to: with attr.setExpertMap the group itself, not its expert (values per
 * expert, as the weights', go through the weights coordinate's expert index instead). A stride of 0
 * broadcasts that dimension.
 */
export interface IndexMap {
  readonly gStride: number;
  readonly strides: readonly number[];
  readonly blocks: readonly number[];
}

/** Scales or zero points of one argument, resolved. */
export interface QuantParam {
  readonly kind: QuantKind;
  readonly arg: QuantArg;
  /** What the user set (`attr.setScales(arg, mask, groups, dt)`), groups expanded to one entry per dim. */
  readonly mask: number;
  readonly groups: readonly number[];
  readonly dataType: DataType;
  /** Descriptor of the values memory (plain, dense row-major). */
  readonly md: MemoryDesc;
  /** Also accepted: a grouped descriptor sharing src's partition (P#1 per-row src values). */
  readonly altMd: MemoryDesc | undefined;
  readonly map: IndexMap;
}

/** The second input of a binary post-op, resolved. */
export interface BinaryParam {
  /** Position of the post-op in the chain: the `i` of `ARG.ATTR_MULTIPLE_POST_OP(i) | ARG.SRC_1`. */
  readonly position: number;
  readonly alg: BinaryAlg;
  readonly md: MemoryDesc;
  /** Map over the destination's logical coordinate (after the GLU: N/2 columns). */
  readonly map: IndexMap;
  /** grouped_gemm only: one memory per expert (`[RUNTIME_DIM_VAL, 1|N]`) instead of one shared. */
  readonly perExpert: boolean;
}

export type GluParam = Extract<PostOp, { kind: 'glu' }>;

/** The GLU backward post-op (rfcs/0002 section 10), resolved: the descriptors of its extra arguments. */
export interface GluBackwardParam {
  readonly op: Extract<PostOp, { kind: 'glu_backward' }>;
  /** Position in the chain (always 0): the `i` of `ARG.ATTR_MULTIPLE_POST_OP(i) | ...`. */
  readonly position: number;
  /** The forward's GLU input h13 `[rows, 2N]` (plain, row-major). */
  readonly src: MemoryDesc;
  /** `[rows, 1]` f32 prob and dprob, when the op has `prob`. */
  readonly prob: MemoryDesc | undefined;
  /** `[E]` f32 per-expert alpha / beta (cuDNN dSwiGLU), when the op takes them; with attr.setExpertMap, at the group's expert. */
  readonly groupScales: MemoryDesc | undefined;
}

/**
 * Everything of rfcs/0002 section 1 a problem needs beyond the plain GEMM. Logical coordinates used
 * by the maps, per problem kind:
 *
 * | kind | src idx | weights idx | dst / binary idx | g |
 * |---|---|---|---|---|
 * | dense | `[...batch, m, k]` (src's own dims) | `[...batch, k, n]` | `[...batch, m, n]` | 0 |
 * | grouped_m (P#1, P#2) | `[row, k]`, row absolute (`offs[g] + m`) | `[e, k, n]` (e: g's expert) | `[row, n]` | group |
 * | grouped_k | `[m, k]`, k absolute | `[k, n]`, k absolute | `[g, m, n]` | group |
 * | grouped_gemm expert i | `[m, k]` | `[k, n]` | `[m, n]` | 0 (values are per expert) |
 *
 * Weights coordinates use the GEMM's N columns (before the GLU); dst and binary coordinates the
 * destination's columns (after it).
 */
export interface Fusion {
  readonly scales: Readonly<Partial<Record<QuantArg, QuantParam>>>;
  readonly zeroPoints: Readonly<Partial<Record<QuantArg, QuantParam>>>;
  /** Binary post-ops in chain order. */
  readonly binary: readonly BinaryParam[];
  readonly glu: GluParam | undefined;
  /** GLU backward post-op (matmul only); absent otherwise. */
  readonly gluBackward?: GluBackwardParam;
}

export const NO_FUSION: Fusion = Object.freeze({ scales: Object.freeze({}), zeroPoints: Object.freeze({}), binary: Object.freeze([]), glu: undefined });

export const FLOAT_TYPES: readonly DataType[] = ['f32', 'bf16', 'f16'];
/** Data types of a binary post-op's src1 (oneDNN's binary src1 types; every value exact in f32 but s32 past 2^24). */
export const BINARY_SRC1_TYPES: readonly DataType[] = ['f32', 'bf16', 'f16', 's8', 'u8', 's32'];
export const SCALE_TYPES: readonly DataType[] = ['f32', 'bf16', 'f16', 'e8m0', 'f8_e4m3'];
const INT8 = ['s8', 'u8'];
const INT_WEI = ['s8', 'u8', 's4', 'u4'];
const FP_LOW = ['f8_e4m3', 'f8_e5m2', 'f4_e2m1'];

/**
 * rfcs/0002 section 3: the data-type combinations (src x weights -> dst). Returns undefined when
 * supported, else the message.
 */
export function dataTypeRejection(src: DataType, wei: DataType, dst: DataType): string | undefined {
  const f = FLOAT_TYPES as readonly string[];
  const ok =
    (f.includes(src) && f.includes(wei) && f.includes(dst)) ||
    (f.includes(src) && INT_WEI.includes(wei) && f.includes(dst)) ||
    (f.includes(src) && FP_LOW.includes(wei) && f.includes(dst)) || // weight-only fp8 / fp4 (issue 12)
    (INT8.includes(src) && INT_WEI.includes(wei) && [...f, 's8', 'u8', 's32'].includes(dst)) ||
    (FP_LOW.includes(src) && FP_LOW.includes(wei) && [...f, 'f8_e4m3', 'f8_e5m2'].includes(dst));
  if (ok) return undefined;
  return `data type combination src ${src} x weights ${wei} -> dst ${dst} is not supported; supported: ` +
    'f32/bf16/f16 x f32/bf16/f16 -> f32/bf16/f16; f32/bf16/f16 x s8/u8/s4/u4/f8_e4m3/f8_e5m2/f4_e2m1 -> f32/bf16/f16 (weight-only); ' +
    's8/u8 x s8/u8/s4/u4 -> f32/bf16/f16/s8/u8/s32; f8_e4m3/f8_e5m2/f4_e2m1 x f8_e4m3/f8_e5m2/f4_e2m1 -> f32/bf16/f16/f8_e4m3/f8_e5m2';
}

/** Integer tensor types that may carry zero points, per argument. */
export function zeroPointTensorTypes(arg: QuantArg): readonly DataType[] {
  return arg === 'weights' ? ['s8', 'u8', 's4', 'u4'] : arg === 'src' ? ['s8', 'u8'] : ['s8', 'u8', 's32'];
}

/** Data types of zero-point values, per argument. */
export function zeroPointValueTypes(arg: QuantArg): readonly DataType[] {
  return arg === 'weights' ? ['s32', 's8', 'u8', 's4', 'u4'] : ['s32', 's8', 'u8'];
}

/** Does this problem use anything of rfcs/0002 beyond f32/bf16/f16 GEMM + eltwise/sum post-ops? */
export function usesQuantOrFusion(f: Fusion, types: readonly DataType[]): boolean {
  return Object.keys(f.scales).length > 0 || Object.keys(f.zeroPoints).length > 0 || f.binary.length > 0 || f.glu !== undefined ||
    f.gluBackward !== undefined || types.some((t) => !FLOAT_TYPES.includes(t));
}

/** How one argument's scales / zero points may be laid out in a given problem. */
export interface QuantShape {
  /** Logical dims of the argument (RUNTIME_DIM_VAL allowed for grouped_gemm rows). */
  readonly dims: readonly number[];
  /** Dimension names for messages, e.g. ['total_M', 'K']. */
  readonly names: readonly string[];
  /** Dims on which groups > 1 are supported. */
  readonly groupable: readonly number[];
  /** Grouped argument: mask 0 means one value per group, values `[G]`. */
  readonly perGroupG: number | undefined;
  /** Allowed (mask, groupable dims) pairs; undefined = any mask (oneDNN's rule for plain tensors). */
  readonly table: ReadonlyArray<readonly [mask: number, groupable: readonly number[]]> | undefined;
  /** The tensor's data type (zero points need an integer one). */
  readonly tensorDt: DataType;
  /** Grouped partition for the alternative per-row descriptor (P#1 src). */
  readonly rowsPartition: MemoryDesc | undefined;
}

const rowMajor = (n: number): string => 'abcdefghijkl'.slice(0, n);

function describeTable(s: QuantShape): string {
  return (s.table ?? []).map(([m, g]) => `mask ${m}${g.length ? ` with groups on ${g.map((d) => s.names[d]).join(', ')}` : ''}`).join('; ');
}

/**
 * Validates one argument's scales or zero points against its shape (rules one per line) and resolves
 * the values descriptor and index map. `what` prefixes messages (`matmul: scales of src`).
 */
export function resolveQuant(what: string, kind: QuantKind, arg: QuantArg, q: QuantAttr, s: QuantShape): QuantParam {
  const nd = s.dims.length;
  const bit = (i: number): boolean => ((q.mask >> i) & 1) === 1;
  const groups = q.groups.length === 0 ? new Array<number>(nd).fill(1) : [...q.groups];
  if (kind === 'scales') checkImpl(SCALE_TYPES.includes(q.dataType), `${what}: data type ${q.dataType} is not supported (f32, bf16, f16, e8m0, f8_e4m3)`);
  if (kind === 'zero_points') check(zeroPointTensorTypes(arg).includes(s.tensorDt), `${what}: zero points apply to integer tensors only (${zeroPointTensorTypes(arg).join(', ')}), ${arg} is ${s.tensorDt}`);
  if (kind === 'zero_points') checkImpl(zeroPointValueTypes(arg).includes(q.dataType), `${what}: data type ${q.dataType} is not supported (${zeroPointValueTypes(arg).join(', ')})`);
  check(q.mask < 1 << nd, `${what}: mask ${q.mask} names dimensions beyond ${arg}'s ${nd} (${s.names.join(', ')})`);
  check(q.groups.length === 0 || q.groups.length === nd, `${what}: groups must be empty or have ${nd} entries (${s.names.join(', ')}), got ${q.groups.length}`);
  groups.forEach((g, i) => check(g === 1 || bit(i), `${what}: groups[${i}] = ${g} is on ${s.names[i]}, which mask ${q.mask} does not cover`));
  groups.forEach((g, i) => checkImpl(g === 1 || s.groupable.includes(i), `${what}: groups on ${s.names[i]} are not supported (only on ${s.groupable.map((d) => s.names[d]).join(', ') || 'no dimension'} of ${arg})`));
  groups.forEach((g, i) => check(g === 1 || s.dims[i] % g === 0, `${what}: ${s.names[i]} = ${s.dims[i]} is not a multiple of its group size ${g}`));
  const row = s.table?.find(([m]) => m === q.mask);
  checkImpl(!s.table || row !== undefined, `${what}: mask ${q.mask} is not supported for this ${arg}; supported: ${describeTable(s)}`);
  checkImpl(!row || groups.every((g, i) => g === 1 || row[1].includes(i)), `${what}: mask ${q.mask} takes no groups on ${s.names[groups.findIndex((g, i) => g !== 1 && !row?.[1].includes(i))]}; supported: ${describeTable(s)}`);
  const dt = q.dataType;
  if (s.perGroupG !== undefined && q.mask === 0) {
    const md = new MemoryDesc({ dims: [s.perGroupG], dataType: dt, format: 'blocked', strides: [1] });
    return Object.freeze({ kind, arg, mask: q.mask, groups, dataType: dt, md, altMd: undefined, map: { gStride: 1, strides: new Array<number>(nd).fill(0), blocks: groups } });
  }
  const qdims: number[] = [];
  for (let i = 0; i < nd; i++) if (bit(i)) qdims.push(isRuntime(s.dims[i]) ? RUNTIME_DIM_VAL : s.dims[i] / groups[i]);
  if (qdims.length === 0) qdims.push(1);
  const strides = tagToStrides(rowMajor(qdims.length), qdims, what);
  const md = new MemoryDesc({ dims: qdims, dataType: dt, format: 'blocked', strides });
  const mapStrides: number[] = [];
  let j = 0;
  for (let i = 0; i < nd; i++) mapStrides.push(bit(i) ? strides[j++] : 0);
  // A per-row tensor of a P#1 src may also come as a grouped descriptor with src's partition.
  const alt = s.rowsPartition && bit(0) ? new MemoryDesc({ dims: qdims, dataType: dt, format: 'grouped', strides, grouped: s.rowsPartition.grouped }) : undefined;
  return Object.freeze({ kind, arg, mask: q.mask, groups, dataType: dt, md, altMd: alt, map: { gStride: 0, strides: mapStrides, blocks: groups } });
}

/** Index map over dst coordinates (same rank as `md`) for a src1 whose dims are each equal or 1 (broadcast). */
export function broadcastMap(md: MemoryDesc): IndexMap {
  const strides = md.dims.map((d, i) => (d === 1 ? 0 : md.strides[i]));
  return { gStride: 0, strides, blocks: strides.map(() => 1) };
}

// ------------------------------------------------------------------------------------------------
// Execution helpers shared by the reference implementations.

/** Element `i` of a values view as a number (4-bit types: element i is nibble i). */
export function elementReader(t: DataType, v: ValuesView): (i: number) => number {
  if (isSubByteType(t)) return (i) => fromStored(t, (v[i >>> 1] >>> ((i & 1) << 2)) & 0xf);
  if (t === 'f32' || t === 's8' || t === 'u8' || t === 's32') return (i) => v[i];
  return (i) => fromStored(t, v[i]);
}

/** `g * gStride + sum_i strides[i] * floor(idx[i] / blocks[i])`. */
export function mapIndex(m: IndexMap, g: number, idx: readonly number[]): number {
  let o = g * m.gStride;
  for (let i = 0; i < m.strides.length; i++) {
    const s = m.strides[i];
    if (s !== 0) o += s * (m.blocks[i] === 1 ? idx[i] : Math.floor(idx[i] / m.blocks[i]));
  }
  return o;
}
