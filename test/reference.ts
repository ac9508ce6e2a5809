/**
 * An independent float64 reference for matmul, written without the library: it works on logical
 * row-major Float64Arrays, builds each group's dense matrices by copying from logical indices, and
 * multiplies them with an i-k-j loop in float64. Alongside each value it returns a magnitude
 * `sum_k |a_k * b_k| + |bias|` (propagated through post-ops), the scale an error bound is relative to.
 */

/** A dense row-major float64 matrix. */
export interface Mat {
  readonly rows: number;
  readonly cols: number;
  readonly data: Float64Array;
}

export function mat(rows: number, cols: number, fill?: (r: number, c: number) => number): Mat {
  const data = new Float64Array(rows * cols);
  if (fill) for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) data[r * cols + c] = fill(r, c);
  return { rows, cols, data };
}

/** C = A * B in float64 (i-k-j order) and |A| * |B| (the per-element magnitude of the sum). */
export function matmulF64(a: Mat, b: Mat): { value: Mat; mag: Mat } {
  if (a.cols !== b.rows) throw new Error(`reference: inner dims differ (${a.cols} vs ${b.rows})`);
  const value = mat(a.rows, b.cols);
  const mag = mat(a.rows, b.cols);
  for (let i = 0; i < a.rows; i++) {
    for (let k = 0; k < a.cols; k++) {
      const aik = a.data[i * a.cols + k];
      for (let j = 0; j < b.cols; j++) {
        const bkj = b.data[k * b.cols + j];
        value.data[i * b.cols + j] += aik * bkj;
        mag.data[i * b.cols + j] += Math.abs(aik * bkj);
      }
    }
  }
  return { value, mag };
}

/** A bias in logical row-major order; each dim equals the dst extent or is 1 (broadcast). */
export interface RefBias {
  readonly dims: readonly number[];
  readonly data: Float64Array;
}

/** Post-ops the reference understands, with oneDNN semantics. */
export type RefPostOp =
  | { readonly kind: 'relu'; readonly alpha: number }
  | { readonly kind: 'linear'; readonly alpha: number; readonly beta: number }
  | { readonly kind: 'clip'; readonly alpha: number; readonly beta: number }
  | { readonly kind: 'abs' | 'square' | 'tanh' | 'logistic' | 'exp' | 'sqrt' | 'log' | 'round' | 'mish' }
  | { readonly kind: 'elu' | 'soft_relu'; readonly alpha: number }
  | { readonly kind: 'clip_v2' | 'pow' | 'hardswish' | 'hardsigmoid'; readonly alpha: number; readonly beta: number }
  | { readonly kind: 'sum'; readonly scale: number };

/** Round half to even, from floor (independent of the library's roundHalfEven). */
function roundEven(v: number): number {
  const f = Math.floor(v), d = v - f;
  if (d !== 0.5) return d < 0.5 ? f : f + 1;
  return f % 2 === 0 ? f : f + 1;
}

export interface RefOptions {
  readonly bias?: RefBias;
  readonly postOps?: readonly RefPostOp[];
  /** The dst contents before execution (logical order), needed by a `sum` post-op. */
  readonly prevDst?: Float64Array;
}

export interface RefOut {
  readonly value: Float64Array;
  readonly mag: Float64Array;
}

function biasAt(bias: RefBias, idx: readonly number[]): number {
  let off = 0;
  for (let d = 0; d < bias.dims.length; d++) off = off * bias.dims[d] + (bias.dims[d] === 1 ? 0 : idx[d]);
  return bias.data[off];
}

/** Applies bias and post-ops to element `i` (dst logical index `idx`) of `out`. */
function finish(out: { value: Float64Array; mag: Float64Array }, i: number, idx: readonly number[], opts: RefOptions): void {
  let v = out.value[i];
  let m = out.mag[i];
  if (opts.bias) {
    const b = biasAt(opts.bias, idx);
    v += b;
    m += Math.abs(b);
  }
  for (const op of opts.postOps ?? []) {
    if (op.kind === 'relu') {
      v = v > 0 ? v : op.alpha * v;
      m *= Math.max(1, Math.abs(op.alpha));
    } else if (op.kind === 'linear') {
      v = op.alpha * v + op.beta;
      m = Math.abs(op.alpha) * m + Math.abs(op.beta);
    } else if (op.kind === 'clip' || op.kind === 'clip_v2') {
      v = v < op.alpha ? op.alpha : v > op.beta ? op.beta : v;
      m += Math.max(Math.abs(op.alpha), Math.abs(op.beta));
    } else if (op.kind === 'abs') {
      v = v < 0 ? -v : v;
    } else if (op.kind === 'square') {
      m = 2 * Math.abs(v) * m + v * v + m * m;
      v = v * v;
    } else if (op.kind === 'tanh') {
      v = Math.tanh(v);
      m += 1;
    } else if (op.kind === 'logistic') {
      v = 1 / (1 + Math.exp(-v));
      m += 1;
    } else if (op.kind === 'exp') {
      v = Math.exp(v);
      m = v * (m + 1);
    } else if (op.kind === 'elu') {
      // slope <= max(1, |alpha|); + 1 for the f32 exp's rounding
      v = v > 0 ? v : op.alpha * (Math.exp(v) - 1);
      m = Math.max(1, Math.abs(op.alpha)) * m + 1;
    } else if (op.kind === 'sqrt') {
      m = m / (2 * Math.sqrt(v)) + Math.sqrt(v);
      v = Math.sqrt(v);
    } else if (op.kind === 'log') {
      m = m / Math.abs(v) + Math.abs(Math.log(v)) + 1;
      v = Math.log(v);
    } else if (op.kind === 'soft_relu') {
      const z = op.alpha * v;
      v = (z > 40 ? z : Math.log(1 + Math.exp(z))) / op.alpha;
      m += 1 / Math.abs(op.alpha);
    } else if (op.kind === 'mish') {
      v = v * Math.tanh(v > 40 ? v : Math.log(1 + Math.exp(v)));
      m = 1.2 * m + 1;
    } else if (op.kind === 'pow') {
      m = Math.abs(op.alpha) * (Math.abs(v) + m) ** op.beta;
      v = op.alpha * v ** op.beta;
    } else if (op.kind === 'round') {
      // Exact unless the f32 input may sit on the other side of a .5 boundary: then either integer.
      const r = roundEven(v);
      const near = Math.abs(v - Math.floor(v) - 0.5) <= 1e-5 * m;
      v = r;
      m = near ? 1e6 * (Math.abs(r) + 1) : Math.abs(r);
    } else if (op.kind === 'hardsigmoid') {
      v = Math.min(1, Math.max(0, op.alpha * v + op.beta));
      m = Math.abs(op.alpha) * m + 1;
    } else if (op.kind === 'hardswish') {
      m = m * (2 * Math.abs(op.alpha) * (Math.abs(v) + m) + Math.abs(op.beta) + 1) + 1;
      v = v * Math.min(1, Math.max(0, op.alpha * v + op.beta));
    } else if (op.kind === 'sum') {
      if (!opts.prevDst) throw new Error('reference: a sum post-op needs prevDst');
      const prev = opts.prevDst[i];
      v += op.scale * prev;
      m += Math.abs(op.scale * prev);
    }
  }
  out.value[i] = v;
  out.mag[i] = m;
}

/**
 * Grouped GEMM with variable M: x is [sum(sizes), K], w is [G, K, N] (both logical row-major).
 * Returns [sum(sizes), N].
 */
export function refGroupedM(x: Float64Array, w: Float64Array, sizes: readonly number[], K: number, N: number, opts: RefOptions = {}): RefOut {
  const G = sizes.length;
  const rows = sizes.reduce((a, b) => a + b, 0);
  if (x.length < rows * K) throw new Error('reference: src is too short');
  if (w.length !== G * K * N) throw new Error('reference: weights must be [G, K, N]');
  const value = new Float64Array(rows * N);
  const mag = new Float64Array(rows * N);
  let row0 = 0;
  for (let g = 0; g < G; g++) {
    const Mg = sizes[g];
    const a = mat(Mg, K, (r, c) => x[(row0 + r) * K + c]);
    const b = mat(K, N, (r, c) => w[(g * K + r) * N + c]);
    const c = matmulF64(a, b);
    value.set(c.value.data, row0 * N);
    mag.set(c.mag.data, row0 * N);
    row0 += Mg;
  }
  const out = { value, mag };
  let g = 0;
  let end = sizes[0] ?? 0;
  for (let r = 0; r < rows; r++) {
    while (r >= end) end += sizes[++g];
    for (let n = 0; n < N; n++) finish(out, r * N + n, [g, n], opts);
  }
  return out;
}

/**
 * Grouped GEMM with variable K (weight-gradient shape): x is [M, sum(sizes)], w is [sum(sizes), N].
 * Group g contracts over its own column range. Returns [G, M, N]; an empty group gives zeros (+ bias).
 */
export function refGroupedK(x: Float64Array, w: Float64Array, sizes: readonly number[], M: number, N: number, opts: RefOptions = {}): RefOut {
  const G = sizes.length;
  const totalK = sizes.reduce((a, b) => a + b, 0);
  const ldx = M === 0 ? totalK : x.length / M;
  if (!Number.isInteger(ldx) || ldx < totalK) throw new Error('reference: src must be [M, >= total K]');
  const value = new Float64Array(G * M * N);
  const mag = new Float64Array(G * M * N);
  let k0 = 0;
  for (let g = 0; g < G; g++) {
    const Kg = sizes[g];
    const a = mat(M, Kg, (r, c) => x[r * ldx + k0 + c]);
    const b = mat(Kg, N, (r, c) => w[(k0 + r) * N + c]);
    const c = matmulF64(a, b);
    value.set(c.value.data, g * M * N);
    mag.set(c.mag.data, g * M * N);
    k0 += Kg;
  }
  const out = { value, mag };
  for (let g = 0; g < G; g++) for (let m = 0; m < M; m++) for (let n = 0; n < N; n++) finish(out, (g * M + m) * N + n, [g, m, n], opts);
  return out;
}

/**
 * Dense (batched) matmul with numpy-style broadcast of batch dims of extent 1:
 * x is [...bx, M, K], w is [...bw, K, N]; the result is [...broadcast(bx, bw), M, N].
 */
export function refDense(x: Float64Array, xDims: readonly number[], w: Float64Array, wDims: readonly number[], opts: RefOptions = {}): RefOut & { dims: number[] } {
  const nd = xDims.length;
  if (wDims.length !== nd || nd < 2) throw new Error('reference: src and weights need the same rank >= 2');
  const M = xDims[nd - 2], K = xDims[nd - 1], N = wDims[nd - 1];
  if (wDims[nd - 2] !== K) throw new Error('reference: K differs');
  const batch = xDims.slice(0, nd - 2).map((b, i) => (b === 1 ? wDims[i] : b));
  const nb = batch.reduce((a, b) => a * b, 1);
  const value = new Float64Array(nb * M * N);
  const mag = new Float64Array(nb * M * N);
  const flat = (dims: readonly number[], idx: readonly number[]): number => {
    let off = 0;
    for (let d = 0; d < idx.length; d++) off = off * dims[d] + (dims[d] === 1 ? 0 : idx[d]);
    return off;
  };
  const idx = new Array<number>(batch.length).fill(0);
  for (let b = 0; b < nb; b++) {
    let rem = b;
    for (let d = batch.length - 1; d >= 0; d--) {
      idx[d] = rem % batch[d];
      rem = Math.floor(rem / batch[d]);
    }
    const xb = flat(xDims.slice(0, nd - 2), idx) * M * K;
    const wb = flat(wDims.slice(0, nd - 2), idx) * K * N;
    const c = matmulF64(mat(M, K, (r, cc) => x[xb + r * K + cc]), mat(K, N, (r, cc) => w[wb + r * N + cc]));
    value.set(c.value.data, b * M * N);
    mag.set(c.mag.data, b * M * N);
  }
  const out = { value, mag };
  for (let b = 0; b < nb; b++) {
    let rem = b;
    for (let d = batch.length - 1; d >= 0; d--) {
      idx[d] = rem % batch[d];
      rem = Math.floor(rem / batch[d]);
    }
    for (let m = 0; m < M; m++) for (let n = 0; n < N; n++) finish(out, (b * M + m) * N + n, [...idx, m, n], opts);
  }
  return { ...out, dims: [...batch, M, N] };
}

/** Tolerance: |got - ref| <= rel * mag + abs, per element. */
export interface Tolerance {
  readonly rel: number;
  readonly abs: number;
}

/** f32 results: far above f32 rounding (6e-8), far below any real indexing/accumulation error. */
export const TOL_F32: Tolerance = { rel: 1e-5, abs: 1e-30 };
/** bf16 results: one bf16 ulp (8 significant bits) relative to the magnitude. */
export const TOL_BF16: Tolerance = { rel: 2 ** -7, abs: 1e-30 };
/** f16 results: one f16 ulp (11 significant bits), plus the smallest f16 subnormal. */
export const TOL_F16: Tolerance = { rel: 2 ** -10, abs: 2 ** -24 };

export interface Mismatch {
  readonly index: number;
  readonly got: number;
  readonly want: number;
  readonly bound: number;
}

/** Every element outside the tolerance (NaN counts as a mismatch). */
export function mismatches(got: ArrayLike<number>, ref: RefOut, tol: Tolerance): Mismatch[] {
  if (got.length !== ref.value.length) throw new Error(`compare: got ${got.length} values, reference has ${ref.value.length}`);
  const bad: Mismatch[] = [];
  for (let i = 0; i < got.length; i++) {
    const bound = tol.rel * ref.mag[i] + tol.abs;
    const err = Math.abs(got[i] - ref.value[i]);
    if (!(err <= bound)) bad.push({ index: i, got: got[i], want: ref.value[i], bound });
  }
  return bad;
}

/** Throws, listing the first few bad elements, unless every element is within tolerance. */
export function assertClose(got: ArrayLike<number>, ref: RefOut, tol: Tolerance = TOL_F32, what = 'result'): void {
  const bad = mismatches(got, ref, tol);
  if (bad.length === 0) return;
  const shown = bad.slice(0, 5).map((b) => `[${b.index}] got ${b.got}, want ${b.want} (bound ${b.bound.toExponential(2)})`);
  throw new Error(`${what}: ${bad.length} of ${got.length} elements out of tolerance: ${shown.join('; ')}`);
}
