/**
 * The driver's own float64 reference for grouped and dense matmul (written for the driver, sharing
 * nothing with src/ or test/reference.ts). Order of oneDNN v3 / rfcs/0002 section 1:
 *   acc = sum_k (src - zp_src) * s_src * (wei - zp_wei) * s_wei;  x = acc + bias;  x = post_ops(x);
 *   dst = x / s_dst + zp_dst
 * Inputs are logical row-major arrays; the result is dst in logical row-major order, unrounded.
 */
import type { Shape } from './problem.js';

/** Scales or zero points of one argument: values over the masked dims (each divided by its group). */
export interface RefQuant {
  readonly values: Float64Array;
  readonly mask: number;
  /** One entry per dim of the argument's logical tensor. */
  readonly groups: readonly number[];
  /** The argument's logical dims. */
  readonly dims: readonly number[];
  /** Grouped arguments with mask 0: one value per group. */
  readonly perGroup: boolean;
}

export interface RefArgQuant {
  readonly scales?: RefQuant;
  readonly zeroPoints?: RefQuant;
}

/** src1 of a binary post-op: dims with 1 = broadcast; coordinates are dst's, or (group, n) when byGroup. */
export interface RefBinary {
  readonly kind: 'binary';
  readonly alg: 'mul' | 'add';
  readonly values: Float64Array;
  readonly dims: readonly number[];
  readonly byGroup: boolean;
}

export type RefPostOp =
  | { readonly kind: 'eltwise'; readonly alg: string; readonly alpha: number; readonly beta: number }
  | { readonly kind: 'sum'; readonly scale: number }
  | RefBinary;

export interface RefInputs {
  readonly shape: Shape;
  readonly src: Float64Array;
  readonly wei: Float64Array;
  /** Bias over its dims (1 = broadcast) addressed like dst, or [G, N] for grouped M. */
  readonly bias?: { readonly values: Float64Array; readonly dims: readonly number[] };
  readonly quant: { readonly src: RefArgQuant; readonly wei: RefArgQuant; readonly dst: RefArgQuant };
  readonly postOps: readonly RefPostOp[];
  /** dst before execution (read by a sum post-op). */
  readonly dstBefore?: Float64Array;
  /** Post-op results beyond f32's range stay finite (the cpu's reference impl: float64 math, f32 stores). */
  readonly wideIntermediates?: boolean;
}

/** erf to ~1e-16: Maclaurin series below 2.5, Lentz's continued fraction for erfc above. */
export function erf64(x: number): number {
  const a = Math.abs(x);
  if (a < 2.5) {
    let term = x, sum = x;
    for (let n = 1; n < 200; n++) {
      term *= (-x * x) / n;
      const add = term / (2 * n + 1);
      sum += add;
      if (Math.abs(add) < 1e-18) break;
    }
    return sum * 1.1283791670955126;
  }
  if (a > 7) return Math.sign(x);
  // erfc(a) = exp(-a^2)/sqrt(pi) * 1/(a + 1/2/(a + 1/(a + 3/2/(a + ...)))), evaluated bottom-up.
  let f = a;
  for (let n = 120; n >= 1; n--) f = a + n / 2 / f;
  const erfc = Math.exp(-a * a) / 1.7724538509055159 / f;
  return Math.sign(x) * (1 - erfc);
}

/** nearbyint in the default rounding mode: halves go to the even integer. */
function roundHalfEven64(x: number): number {
  const f = Math.floor(x);
  const d = x - f;
  return d < 0.5 ? f : d > 0.5 ? f + 1 : f % 2 === 0 ? f : f + 1;
}

export function eltwise64(alg: string, x: number, alpha: number, beta: number): number {
  switch (alg) {
    case 'relu': return x > 0 ? x : alpha * x;
    case 'gelu_erf': return 0.5 * x * (1 + erf64(x / Math.SQRT2));
    // 0.5 (1 + tanh z) as 1 / (1 + e^-2z): 1 + tanh z is 0 in float64 below z = -19, the result is not
    case 'gelu_tanh': return x / (1 + Math.exp(-2 * Math.sqrt(2 / Math.PI) * x * (1 + 0.044715 * x * x)));
    case 'swish': return x / (1 + Math.exp(-alpha * x));
    case 'logistic': return 1 / (1 + Math.exp(-x));
    case 'tanh': return Math.tanh(x);
    case 'linear': return alpha * x + beta;
    case 'clip': return Math.min(beta, Math.max(alpha, x));
    case 'abs': return Math.abs(x);
    case 'square': return x * x;
    case 'exp': return Math.exp(x);
    case 'elu': return x > 0 ? x : alpha * (Math.exp(x) - 1);
    case 'sqrt': return Math.sqrt(x);
    // log1p: log(1 + e^z) is 0 in float64 for z < -37, the exact value (e^z) is a normal f32 down to -87
    case 'soft_relu': return (alpha * x > 40 ? alpha * x : Math.log1p(Math.exp(alpha * x))) / alpha;
    case 'log': return Math.log(x);
    case 'clip_v2': return x >= beta ? beta : x <= alpha ? alpha : x;
    case 'pow': return alpha * x ** beta;
    case 'round': return roundHalfEven64(x);
    case 'mish': return x * Math.tanh(x > 40 ? x : Math.log1p(Math.exp(x)));
    case 'hardswish': return x * Math.min(1, Math.max(0, alpha * x + beta));
    case 'hardsigmoid': return Math.min(1, Math.max(0, alpha * x + beta));
    default: throw new Error(`reference: eltwise ${alg} has no reference`);
  }
}

/** Row-major offset of `coords` in a tensor of `dims`, dims of 1 broadcasting. */
function broadcastIndex(dims: readonly number[], coords: readonly number[]): number {
  let off = 0;
  for (let i = 0; i < dims.length; i++) off = off * dims[i] + (dims[i] === 1 ? 0 : coords[i]);
  return off;
}

function quantAt(q: RefQuant | undefined, coords: readonly number[], g: number, dflt: number): number {
  if (!q) return dflt;
  if (q.perGroup) return q.values[g];
  // Row-major over the masked dims, each of extent dims[d] / groups[d].
  let off = 0;
  for (let d = 0; d < coords.length; d++) {
    if (((q.mask >> d) & 1) === 0) continue;
    off = off * (q.dims[d] / q.groups[d]) + Math.floor(coords[d] / q.groups[d]);
  }
  return q.values[off];
}

/** Dequantized operand: (v - zp) * scale at `coords` of its argument. */
function deq(v: number, q: RefArgQuant, coords: readonly number[], g: number): number {
  return (v - quantAt(q.zeroPoints, coords, g, 0)) * quantAt(q.scales, coords, g, 1);
}

/** Past this magnitude an f32 result rounds to +-Infinity (max finite + half an ulp). */
export const F32_OVERFLOW = 2 ** 128 * (1 - 2 ** -25);

/**
 * The library computes post-ops in f32: a result beyond f32's range is +-Infinity there, and stays
 * infinite through the later post-ops (exp of 90 then `linear:0.25` is Inf, not 3.06e38).
 */
const f32Overflow = (x: number): number => (Math.abs(x) >= F32_OVERFLOW ? (x > 0 ? Infinity : -Infinity) : x);

/** bias, post-ops, dst scale / zero point for one output element. */
function epilogue(inp: RefInputs, acc: number, g: number, dstCoords: readonly number[], biasCoords: readonly number[], groupCoords: readonly number[], dstIndex: number): number {
  let x = acc;
  if (inp.bias) x += inp.bias.values[broadcastIndex(inp.bias.dims, biasCoords)];
  for (const op of inp.postOps) {
    if (op.kind === 'eltwise') x = eltwise64(op.alg, x, op.alpha, op.beta);
    else if (op.kind === 'sum') x += op.scale * (inp.dstBefore?.[dstIndex] ?? 0);
    else {
      const y = op.values[broadcastIndex(op.dims, op.byGroup ? groupCoords : dstCoords)];
      x = op.alg === 'mul' ? x * y : x + y;
    }
    if (!inp.wideIntermediates) x = f32Overflow(x);
  }
  return x / quantAt(inp.quant.dst.scales, dstCoords, g, 1) + quantAt(inp.quant.dst.zeroPoints, dstCoords, g, 0);
}

function groupedM(inp: RefInputs, s: Extract<Shape, { kind: 'grouped_m' }>): Float64Array {
  const { M, K, N, sizes } = s;
  const out = new Float64Array(M * N);
  let r0 = 0;
  sizes.forEach((rows, g) => {
    for (let r = r0; r < r0 + rows; r++) {
      for (let n = 0; n < N; n++) {
        let acc = 0;
        for (let k = 0; k < K; k++) {
          acc += deq(inp.src[r * K + k], inp.quant.src, [r, k], g) * deq(inp.wei[(g * K + k) * N + n], inp.quant.wei, [g, k, n], g);
        }
        out[r * N + n] = epilogue(inp, acc, g, [r, n], [g, n], [g, n], r * N + n);
      }
    }
    r0 += rows;
  });
  return out;
}

function groupedK(inp: RefInputs, s: Extract<Shape, { kind: 'grouped_k' }>): Float64Array {
  const { G, M, K, N, sizes } = s;
  const out = new Float64Array(G * M * N);
  let k0 = 0;
  for (let g = 0; g < G; g++) {
    for (let m = 0; m < M; m++) {
      for (let n = 0; n < N; n++) {
        let acc = 0;
        for (let k = k0; k < k0 + sizes[g]; k++) {
          acc += deq(inp.src[m * K + k], inp.quant.src, [m, k], g) * deq(inp.wei[k * N + n], inp.quant.wei, [k, n], g);
        }
        const c = [g, m, n], i = (g * M + m) * N + n;
        out[i] = epilogue(inp, acc, g, c, c, c, i);
      }
    }
    k0 += sizes[g];
  }
  return out;
}

function dense(inp: RefInputs, s: Extract<Shape, { kind: 'dense' }>): Float64Array {
  const { src, wei, dst, M, K, N } = s;
  const nd = dst.length;
  const total = dst.reduce((a, b) => a * b, 1);
  const out = new Float64Array(total);
  const coords = new Array<number>(nd).fill(0);
  for (let i = 0; i < total; i++) {
    let rem = i;
    for (let d = nd - 1; d >= 0; d--) {
      coords[d] = rem % dst[d];
      rem = Math.floor(rem / dst[d]);
    }
    const m = coords[nd - 2], n = coords[nd - 1];
    const batch = coords.slice(0, nd - 2);
    const sb = batch.map((c, d) => (src[d] === 1 ? 0 : c)), wb = batch.map((c, d) => (wei[d] === 1 ? 0 : c));
    const srcBase = broadcastIndex([...src.slice(0, nd - 2), 1, 1], [...sb, 0, 0]) * M * K;
    const weiBase = broadcastIndex([...wei.slice(0, nd - 2), 1, 1], [...wb, 0, 0]) * K * N;
    let acc = 0;
    for (let k = 0; k < K; k++) {
      acc += deq(inp.src[srcBase + m * K + k], inp.quant.src, [...sb, m, k], 0) * deq(inp.wei[weiBase + k * N + n], inp.quant.wei, [...wb, k, n], 0);
    }
    out[i] = epilogue(inp, acc, 0, coords, coords, coords, i);
  }
  return out;
}

/** The exact (float64) dst of a problem, logical row-major. */
export function referenceMatmul(inp: RefInputs): Float64Array {
  const s = inp.shape;
  return s.kind === 'grouped_m' ? groupedM(inp, s) : s.kind === 'grouped_k' ? groupedK(inp, s) : dense(inp, s);
}
