import { MemoryDesc } from '../../memory/desc.js';
import type { BinaryParam, Fusion, IndexMap, QuantArg, QuantParam } from '../../attr/fusion.js';
import type { MatmulProblem } from './problem.js';

/**
 * Dense matmul with more than one batch dim (numpy / oneDNN broadcast of size-1 dims). The kernels of
 * both engines take one batch dim, walked with one stride per operand. Consecutive batch dims that
 * every operand (src, weights, dst, bias, scales / zero points, binary src1) walks with nested
 * strides collapse into one (`s[i] = s[i + 1] * D[i + 1]`, 0 for an operand broadcast over both);
 * the largest such run becomes the kernels' batch, and each index of the other runs becomes a
 * launch of that 3D problem with every operand moved by an element offset. The per-element
 * accumulation is the 3D kernels', so results are those of the equivalent 3D matmuls, bit for bit.
 */

/** Element offsets of one outer launch, per operand (values of a scales / zero points / src1 memory included). */
export interface BatchOffsets {
  readonly src: number;
  readonly weights: number;
  readonly dst: number;
  readonly bias: number;
  readonly scales: Readonly<Partial<Record<QuantArg, number>>>;
  readonly zeroPoints: Readonly<Partial<Record<QuantArg, number>>>;
  readonly binary: readonly number[];
}

export interface BatchSplit {
  /** The 3D problem every launch runs (batch [B], B the collapsed run's extent, 1 when none). */
  readonly inner: MatmulProblem;
  /** One entry per launch, in row-major order of the outer batch indices. */
  readonly outer: readonly BatchOffsets[];
}

/** The most launches one execution may take before the pd refuses the problem. */
export const MAX_OUTER_LAUNCHES = 4096;

/** An operand's element stride along each dst batch dim (0 where it broadcasts). */
type Walk = readonly number[];

interface Operands {
  readonly src: Walk;
  readonly weights: Walk;
  readonly dst: Walk;
  readonly bias: Walk;
  readonly scales: Partial<Record<QuantArg, Walk>>;
  readonly zeroPoints: Partial<Record<QuantArg, Walk>>;
  readonly binary: readonly Walk[];
}

/** A run of collapsible batch dims: its extent and each operand's stride across it (in `all` order). */
interface Run {
  readonly extent: number;
  readonly strides: readonly number[];
}

function walks(p: MatmulProblem): Operands {
  const nb = p.batch.length;
  const along = (md: MemoryDesc | undefined): Walk => Array.from({ length: nb }, (_, b) => (md && md.dims[b] !== 1 ? md.strides[b] : 0));
  // Scales / zero points map src's and weights' own coordinates: 0 along a dim the tensor broadcasts.
  const quant = (q: QuantParam): Walk => {
    const owner = q.arg === 'src' ? p.src : q.arg === 'weights' ? p.weights : p.dst;
    return Array.from({ length: nb }, (_, b) => (owner.dims[b] === 1 ? 0 : q.map.strides[b]));
  };
  const table = (t: Readonly<Partial<Record<QuantArg, QuantParam>>>): Partial<Record<QuantArg, Walk>> =>
    Object.fromEntries(Object.entries(t).map(([a, q]) => [a, quant(q)]));
  return {
    src: along(p.src), weights: along(p.weights), dst: along(p.dst), bias: along(p.bias),
    scales: table(p.fusion.scales), zeroPoints: table(p.fusion.zeroPoints),
    binary: p.fusion.binary.map((b) => b.map.strides.slice(0, nb)),
  };
}

/** Every operand's walk in one fixed order (src, weights, dst, bias, scales, zero points, binary). */
function flatten(o: Operands): Walk[] {
  const q = (t: Partial<Record<QuantArg, Walk>>): Walk[] => (['src', 'weights', 'dst'] as const).flatMap((a) => (t[a] ? [t[a]] : []));
  return [o.src, o.weights, o.dst, o.bias, ...q(o.scales), ...q(o.zeroPoints), ...o.binary];
}

/** The runs of collapsible dims, innermost first; dims of extent 1 take no part. */
function runsOf(batch: readonly number[], all: readonly Walk[]): Run[] {
  const runs: { extent: number; strides: number[] }[] = [];
  for (let b = batch.length - 1; b >= 0; b--) {
    if (batch[b] === 1) continue;
    const cur = runs[runs.length - 1];
    if (cur && all.every((w, i) => w[b] === cur.strides[i] * cur.extent)) cur.extent *= batch[b];
    else runs.push({ extent: batch[b], strides: all.map((w) => w[b]) });
  }
  return runs;
}

/** The 3D view of a 4D+ descriptor: batch extent `extent` (1 where the run's stride is 0), then its last two dims. */
function view(md: MemoryDesc, stride: number, extent: number): MemoryDesc {
  const nd = md.ndims;
  return new MemoryDesc({ dims: [stride === 0 ? 1 : extent, md.dims[nd - 2], md.dims[nd - 1]], dataType: md.dataType, format: md.format, strides: [stride, md.strides[nd - 2], md.strides[nd - 1]] });
}

/** A map over [...batch, x, y] as the 3D map [b, x, y] with the run's stride. */
function map3(m: IndexMap, stride: number): IndexMap {
  const n = m.strides.length;
  return Object.freeze({ gStride: 0, strides: [stride, m.strides[n - 2], m.strides[n - 1]], blocks: [1, m.blocks[n - 2], m.blocks[n - 1]] });
}

function quant3(q: QuantParam, stride: number): QuantParam {
  const n = q.map.strides.length;
  const mask = (stride !== 0 ? 1 : 0) | (((q.mask >> (n - 2)) & 3) << 1);
  return Object.freeze({ ...q, mask, groups: Object.freeze([1, q.groups[n - 2] ?? 1, q.groups[n - 1] ?? 1]), map: map3(q.map, stride) });
}

/**
 * The inner 3D problem and the outer launches of a dense problem with more than one batch dim;
 * undefined for any other problem, a string when it would take more than MAX_OUTER_LAUNCHES launches.
 */
export function splitBatch(p: MatmulProblem): BatchSplit | string | undefined {
  if (p.kind !== 'dense' || p.batch.length < 2) return undefined;
  const ops = walks(p);
  const all = flatten(ops);
  // An empty batch: nothing to launch (the inner problem's batch is empty too).
  if (p.batch.includes(0)) return { inner: innerProblem(p, { extent: 0, strides: all.map(() => 0) }), outer: [] };
  const runs = runsOf(p.batch, all);
  // The kernels' batch: the longest run (the innermost of equal ones).
  const pick = runs.reduce((best, r, i) => (r.extent > runs[best].extent ? i : best), 0);
  const innerRun: Run = runs[pick] ?? { extent: 1, strides: all.map(() => 0) };
  const outerRuns = runs.filter((_, i) => i !== pick);
  const launches = outerRuns.reduce((n, r) => n * r.extent, 1);
  if (launches > MAX_OUTER_LAUNCHES) return `a batch that does not collapse into fewer than ${MAX_OUTER_LAUNCHES} launches of one 3D matmul (${launches})`;
  return { inner: innerProblem(p, innerRun), outer: outerOffsets(ops, all.length, outerRuns, launches) };
}

function innerProblem(p: MatmulProblem, run: Run): MatmulProblem {
  const [s, w, d, b] = run.strides;
  let i = 4;
  const q = (t: Readonly<Partial<Record<QuantArg, QuantParam>>>): Partial<Record<QuantArg, QuantParam>> => {
    const out: Partial<Record<QuantArg, QuantParam>> = {};
    for (const a of ['src', 'weights', 'dst'] as const) if (t[a]) out[a] = quant3(t[a], run.strides[i++]);
    return Object.freeze(out);
  };
  const scales = q(p.fusion.scales), zeroPoints = q(p.fusion.zeroPoints);
  const binary = p.fusion.binary.map((bp): BinaryParam => Object.freeze({ ...bp, map: map3(bp.map, run.strides[i++]) }));
  const fusion: Fusion = p.fusion.binary.length + Object.keys(p.fusion.scales).length + Object.keys(p.fusion.zeroPoints).length === 0 ? p.fusion
    : Object.freeze({ ...p.fusion, scales, zeroPoints, binary: Object.freeze(binary) });
  const E = run.extent;
  return Object.freeze({
    ...p, batch: [E], src: view(p.src, s, E), weights: view(p.weights, w, E), dst: view(p.dst, d, E),
    bias: p.bias && view(p.bias, b, E), fusion,
  });
}

/** Each launch's offsets: the sum over the outer runs of index x stride. */
function outerOffsets(ops: Operands, n: number, runs: readonly Run[], launches: number): BatchOffsets[] {
  const out: BatchOffsets[] = [];
  for (let l = 0; l < launches; l++) {
    const off = new Array<number>(n).fill(0);
    // Runs are innermost first: the last run is the slowest index.
    let rem = l;
    for (const r of runs) {
      const idx = rem % r.extent;
      rem = Math.floor(rem / r.extent);
      for (let i = 0; i < n; i++) off[i] += idx * r.strides[i];
    }
    let i = 4;
    const q = (t: Partial<Record<QuantArg, Walk>>): Partial<Record<QuantArg, number>> => {
      const o: Partial<Record<QuantArg, number>> = {};
      for (const a of ['src', 'weights', 'dst'] as const) if (t[a]) o[a] = off[i++];
      return o;
    };
    const scales = q(ops.scales), zeroPoints = q(ops.zeroPoints);
    out.push({ src: off[0], weights: off[1], dst: off[2], bias: off[3], scales, zeroPoints, binary: ops.binary.map(() => off[i++]) });
  }
  return out;
}

/** Does any launch move operand offsets other than src, weights and dst (bias, scales, zero points, src1)? */
export function movesFusionOperands(s: BatchSplit): boolean {
  return s.outer.some((o) => o.bias !== 0 || o.binary.some((x) => x !== 0) ||
    [...Object.values(o.scales), ...Object.values(o.zeroPoints)].some((x) => x !== 0));
}
