import { DnnlError } from '../../common/status.js';
import type { MatmulArgs } from './impl.js';
import type { MatmulProblem } from './problem.js';
import { ARG, argName } from '../args.js';
import type { Memory } from '../../memory/memory.js';

/** One offsets buffer an execution reads: where it lives and what to call it in messages. */
export interface OffsetsArg {
  readonly name: string;
  readonly handle: number;
  readonly view: Int32Array;
}

/** Where the groups of one execution are defined (P#1: grouped memory; P#2: attribute argument). */
export interface Grouping {
  readonly primary: OffsetsArg;
  /** Other offsets buffers that must agree with the primary one (unless they are the same buffer). */
  readonly others: readonly OffsetsArg[];
  readonly G: number;
  /** Extent of the variable dim: the offsets may not go past it. */
  readonly total: number;
  readonly variableDim: number;
  /** Host-known group sizes, from any grouped descriptor. */
  readonly sizes: readonly number[] | undefined;
  /** attr.setZeroFillUngroupedRows: offsets[0] may be > 0 (true), must be 0 but could be allowed (false), or the attribute does not apply (undefined). */
  readonly leadingRows?: boolean;
}

export function groupingOf(p: MatmulProblem, a: MatmulArgs): Grouping {
  const arg = (name: string, m: { handles: readonly number[]; offsets: Int32Array }): OffsetsArg => ({ name, handle: m.handles[1], view: m.offsets });
  const sizes = p.src.grouped?.groupSizes ?? p.dst.grouped?.groupSizes ?? p.weights.grouped?.groupSizes;
  if (p.kind === 'grouped_k') {
    return { primary: arg('src', a.src), others: [arg('weights', a.weights)], G: p.G, total: p.K, variableDim: 1, sizes };
  }
  if (p.offsetsFrom === 'attr') {
    const m = a.offsets!;
    return { primary: { name: 'ARG.ATTR_GROUPED_OFFSETS | ARG.SRC', handle: m.handles[0], view: m.values as Int32Array }, others: [], G: p.G, total: p.M, variableDim: 0, sizes, leadingRows: p.moe.gather || p.moe.scatterTopK ? undefined : p.moe.zeroFill };
  }
  // P#1: grouped per-row scales / zero points and grouped binary src1 share src's partition too.
  const extra: OffsetsArg[] = [];
  const grouped = (name: string, m: Memory | undefined): void => {
    if (m?.desc.isGrouped) extra.push(arg(name, m));
  };
  grouped(argName(ARG.ATTR_SCALES | ARG.SRC), a.scales.src);
  grouped(argName(ARG.ATTR_ZERO_POINTS | ARG.SRC), a.zeroPoints.src);
  p.fusion.binary.forEach((b, j) => grouped(argName(ARG.ATTR_MULTIPLE_POST_OP(b.position) | ARG.SRC_1), a.binary[j]));
  // MoE gather: src is plain, dst holds the partition; scatter: dst is plain.
  if (p.offsetsArg === 'dst') return { primary: arg('dst', a.dst), others: extra, G: p.G, total: p.M, variableDim: 0, sizes };
  const dst = p.dst.isGrouped ? [arg('dst', a.dst)] : [];
  return { primary: arg('src', a.src), others: [...dst, ...extra], G: p.G, total: p.M, variableDim: 0, sizes, leadingRows: p.moe.gather || p.moe.scatterTopK ? undefined : p.moe.zeroFill };
}

/** Error codes shared with the wasm driver (wasm/src/job.h). */
export const OFFS_ERR = { first: 1, decreasing: 2, total: 3, mismatch: 4, sizes: 5 } as const;

/** The message for an offsets violation; the reference and the kernels report identical text. */
export function offsetsError(g: Grouping, code: number, i: number, x: number, y: number, otherName = g.others[0]?.name ?? ''): DnnlError {
  const n = g.primary.name;
  const msg =
    code === OFFS_ERR.first ? `${n} offsets[0] must be 0, got ${x}${g.leadingRows === false ? ' (attr.setZeroFillUngroupedRows lets the first group start later)' : ''}` :
    code === OFFS_ERR.decreasing ? `${n} offsets must be non-decreasing: offsets[${i}] = ${x} < offsets[${i - 1}] = ${y}` :
    code === OFFS_ERR.total ? `${n} offsets[${i}] = ${x} exceeds the total extent ${y} of dims[${g.variableDim}]` :
    code === OFFS_ERR.sizes ? `${n} offsets give group ${i} ${x} rows but the descriptor's per-group dims say ${y}` :
    code === OFFS_ERR.mismatch ? `${otherName} offsets must equal ${n} offsets: ${otherName} offsets[${i}] = ${x}, ${n} offsets[${i}] = ${y}` :
    `kernel status ${code}`;
  return new DnnlError(code >= 1 && code <= 5 ? 'invalid_arguments' : 'runtime_error', msg);
}

/**
 * Execute-time validation of the offsets, done before any row is touched; returns a private copy so
 * the computation reads exactly what was validated. Rules, in order: offs[0] = 0 (>= 0 with leading rows), non-decreasing,
 * offs[G] <= total, equal to host-known sizes, other offsets buffers equal to the primary one.
 */
export function checkedOffsets(g: Grouping): Int32Array {
  const offs = Int32Array.from(g.primary.view.subarray(0, g.G + 1));
  const G = g.G;
  if (offs[0] < 0 || (offs[0] !== 0 && !g.leadingRows)) throw offsetsError(g, OFFS_ERR.first, 0, offs[0], 0);
  for (let i = 1; i <= G; i++) if (offs[i] < offs[i - 1]) throw offsetsError(g, OFFS_ERR.decreasing, i, offs[i], offs[i - 1]);
  if (offs[G] > g.total) throw offsetsError(g, OFFS_ERR.total, G, offs[G], g.total);
  if (g.sizes) {
    for (let i = 0; i < G; i++) if (offs[i + 1] - offs[i] !== g.sizes[i]) throw offsetsError(g, OFFS_ERR.sizes, i, offs[i + 1] - offs[i], g.sizes[i]);
  }
  for (const o of g.others) {
    if (o.handle === g.primary.handle) continue;
    for (let i = 0; i <= G; i++) if (o.view[i] !== offs[i]) throw offsetsError(g, OFFS_ERR.mismatch, i, o.view[i], offs[i], o.name);
  }
  return offs;
}
