/**
 * One problem: a descriptor with one value of every matmul knob. `problems()` walks the cartesian
 * product of the knobs' comma lists in benchdnn's order (outermost first: dt, stag, wtag, dtag,
 * grouped, bia-dt, bia_mask, runtime_dims_masks, then the attributes: scales, zero points, post-ops,
 * fpmath); `shapeOf()` derives and checks the matmul's shape (INVALID_ARGUMENTS when inconsistent).
 */
import type { DataType } from '../../src/index.js';
import type { Descriptor } from './descriptor.js';
import { resolveSizes, type GroupedSpec } from './grouped_spec.js';
import type { FpmathSpec, PostOpsSpec, QuantSpec } from './attr_spec.js';
import type { DtTriple, MatmulSettings } from './settings.js';

export interface Problem {
  readonly dt: DtTriple;
  readonly stag: string;
  readonly wtag: string;
  readonly dtag: string;
  readonly grouped: GroupedSpec | undefined;
  readonly biaDt: DataType | 'undef';
  readonly biaMask: number;
  readonly rtDimsMasks: readonly [number, number];
  readonly scales: QuantSpec;
  readonly zeroPoints: QuantSpec;
  readonly postOps: PostOpsSpec;
  readonly fpmath: FpmathSpec;
  readonly desc: Descriptor;
}

export function* problems(s: MatmulSettings, desc: Descriptor): Generator<Problem> {
  for (const dt of s.dt) for (const stag of s.stag) for (const wtag of s.wtag) for (const dtag of s.dtag)
    for (const grouped of s.grouped) for (const biaDt of s.biaDt) for (const biaMask of s.biaMask)
      for (const rtDimsMasks of s.rtDimsMasks) for (const scales of s.scales) for (const zeroPoints of s.zeroPoints)
        for (const postOps of s.postOps) for (const fpmath of s.fpmath)
          yield { dt, stag, wtag, dtag, grouped, biaDt, biaMask, rtDimsMasks, scales, zeroPoints, postOps, fpmath, desc };
}

/** The minimal reproducer: non-default knobs only, in the order above, then the descriptor. */
export function reproLine(p: Problem, engine: 'cpu' | 'gpu' = 'cpu'): string {
  const o: string[] = [];
  if (engine !== 'cpu') o.push(`--engine=${engine}`);
  o.push('--matmul');
  const [a, b, c] = p.dt;
  if (!(a === 'f32' && b === 'f32' && c === 'f32')) o.push(`--dt=${a === b && b === c ? a : `${a}:${b}:${c}`}`);
  if (p.stag !== 'any') o.push(`--stag=${p.stag}`);
  if (p.wtag !== 'any') o.push(`--wtag=${p.wtag}`);
  if (p.dtag !== 'any') o.push(`--dtag=${p.dtag}`);
  if (p.grouped) o.push(`--grouped=${p.grouped.text}`);
  if (p.biaDt !== 'undef') o.push(`--bia-dt=${p.biaDt}`);
  if (p.biaMask !== 2) o.push(`--bia_mask=${p.biaMask}`);
  if (p.rtDimsMasks[0] || p.rtDimsMasks[1]) o.push(`--runtime_dims_masks=${p.rtDimsMasks[0]}:${p.rtDimsMasks[1]}`);
  if (p.scales.text) o.push(`--attr-scales=${p.scales.text}`);
  if (p.zeroPoints.text) o.push(`--attr-zero-points=${p.zeroPoints.text}`);
  if (p.postOps.text) o.push(`--attr-post-ops=${p.postOps.text}`);
  if (p.fpmath.text) o.push(`--attr-fpmath=${p.fpmath.text}`);
  o.push(p.desc.text);
  return o.join(' ');
}

/** The matmul a problem describes. Grouped sizes are resolved (profiles synthesized). */
export type Shape =
  /** src [M, K] grouped by rows, weights [G, K, N], dst [M, N] grouped. */
  | { readonly kind: 'grouped_m'; readonly G: number; readonly M: number; readonly K: number; readonly N: number; readonly sizes: readonly number[] }
  /** src [M, K] grouped by columns, weights [K, N] grouped by rows, dst [G, M, N]. */
  | { readonly kind: 'grouped_k'; readonly G: number; readonly M: number; readonly K: number; readonly N: number; readonly sizes: readonly number[] }
  /** (batched) dense: src [..., M, K], weights [..., K, N], dst [..., M, N], batch dims broadcast. */
  | { readonly kind: 'dense'; readonly src: readonly number[]; readonly wei: readonly number[]; readonly dst: readonly number[]; readonly M: number; readonly K: number; readonly N: number };

/** A problem the driver rejects before calling the library, with benchdnn's status for it. */
export class ProblemRejection extends Error {
  constructor(readonly status: 'invalid_arguments' | 'unimplemented', message: string) {
    super(message);
  }
}

const invalid = (msg: string): never => {
  throw new ProblemRejection('invalid_arguments', msg);
};
const fmt = (d: readonly number[]): string => d.join('x');

function groupedShape(p: Problem, g: GroupedSpec): Shape {
  const { src, wei, dst } = p.desc;
  if (g.dimIdx > 1) throw new ProblemRejection('unimplemented', `--grouped=${g.text}: grouping dimension ${g.dimIdx} (N) is not implemented; groupdnn groups M (0) or K (1)`);
  if (src.length !== 2) invalid(`--grouped: src must be 2D, got ${fmt(src)}`);
  const G = g.groups;
  let shape: Shape;
  if (g.dimIdx === 0) {
    if (wei.length !== 3 && wei.length !== 2) invalid(`--grouped=${g.text}: weights must be GxKxN (or KxN, G inserted), got ${fmt(wei)}`);
    const [M, K] = src, [Gw, Kw, N] = wei.length === 3 ? wei : [G, ...wei];
    if (Gw !== G) invalid(`--grouped=${g.text}: weights dims[0] = ${Gw} must equal NUM_GROUPS ${G}`);
    if (Kw !== K) invalid(`weights K = ${Kw} must equal src K = ${K}`);
    if (dst && (dst.length !== 2 || dst[0] !== M || dst[1] !== N)) invalid(`dst ${fmt(dst)} must be ${M}x${N}`);
    shape = { kind: 'grouped_m', G, M, K, N, sizes: resolveSizes(g, M) };
  } else {
    if (wei.length !== 2) invalid(`--grouped=${g.text}: weights must be 2D total_KxN, got ${fmt(wei)}`);
    const [M, K] = src, [Kw, N] = wei;
    if (Kw !== K) invalid(`weights total K = ${Kw} must equal src total K = ${K}`);
    if (dst && (dst.length !== 3 || dst[0] !== G || dst[1] !== M || dst[2] !== N)) invalid(`dst ${fmt(dst)} must be ${G}x${M}x${N}`);
    shape = { kind: 'grouped_k', G, M, K, N, sizes: resolveSizes(g, K) };
  }
  const total = g.dimIdx === 0 ? shape.M : shape.K;
  if (shape.sizes.length !== G) invalid(`--grouped=${g.text}: ${shape.sizes.length} sizes for ${G} groups`);
  const sum = shape.sizes.reduce((a, b) => a + b, 0);
  if (sum !== total) invalid(`--grouped=${g.text}: sizes sum to ${sum}, the grouped dimension is ${total}`);
  return shape;
}

function denseShape(p: Problem): Shape {
  const { src, wei, dst } = p.desc;
  const nd = src.length;
  if (nd < 2 || wei.length !== nd) invalid(`src ${fmt(src)} and weights ${fmt(wei)} must have the same number of dims (>= 2)`);
  const M = src[nd - 2], K = src[nd - 1], N = wei[nd - 1];
  if (wei[nd - 2] !== K) invalid(`weights K = ${wei[nd - 2]} must equal src K = ${K}`);
  const out: number[] = [];
  for (let i = 0; i < nd - 2; i++) {
    if (src[i] !== wei[i] && src[i] !== 1 && wei[i] !== 1) invalid(`batch dim ${i}: src ${src[i]} and weights ${wei[i]} must be equal or 1`);
    out.push(Math.max(src[i], wei[i]));
  }
  out.push(M, N);
  if (dst && fmt(dst) !== fmt(out)) invalid(`dst ${fmt(dst)} must be ${fmt(out)}`);
  return { kind: 'dense', src, wei, dst: out, M, K, N };
}

export function shapeOf(p: Problem): Shape {
  return p.grouped ? groupedShape(p, p.grouped) : denseShape(p);
}

/** Useful flops: 2 x (dst elements) x (the contraction each one sums over). */
export function flops(s: Shape): number {
  if (s.kind === 'grouped_m') return 2 * s.M * s.K * s.N;
  if (s.kind === 'grouped_k') return 2 * s.M * s.K * s.N;
  return 2 * s.dst.reduce((a, b) => a * b, 1) * s.K;
}
