/* The matmul tests of dynamic int8 activations (attr.setDynamicQuantization, `:dq`) share the model of the row
   quantization, the float64 reference (dqReference), their engine matrix and one runner (pd, weights reorder,
   P#1 / P#2 arguments, read back); each test file keeps its own data. */
import { mulberry32 } from './workloads.js';
import { ARG, Engine, GpuEngine, GpuMemory, Memory, PrimitiveAttr, RUNTIME_DIM_VAL as RT, Stream, dt, matmul, memory, reorder, tag, type DataType, type MemoryDesc } from '../src/index.js';

const f32 = Math.fround;

/** Round half to even (the kernels' nearest rounding). */
export const rne = (v: number): number => {
  const f = Math.floor(v), d = v - f;
  return d > 0.5 ? f + 1 : d < 0.5 ? f : f % 2 === 0 ? f : f + 1;
};

/** The quantized rows (exact model of the kernel's quantization): s = amax / 127 (1 for a row of zeros),
 * q = rne(x / s) clamped to [-128, 127]. */
export function quantizeRows(x: Float32Array, rows: number, K: number): { q: Int32Array; s: Float32Array } {
  const q = new Int32Array(rows * K), s = new Float32Array(rows);
  for (let r = 0; r < rows; r++) {
    let amax = 0;
    for (let k = 0; k < K; k++) amax = Math.max(amax, Math.abs(x[r * K + k]));
    const sc = amax > 0 ? f32(amax / 127) : 1;
    s[r] = sc;
    for (let k = 0; k < K; k++) q[r * K + k] = Math.max(-128, Math.min(127, rne(x[r * K + k] / sc)));
  }
  return { q, s };
}

/**
 * The float64 model of a `:dq` matmul's dst, rows grouped by `sizes`: each row to s8 (quantizeRows), exact
 * integer sums of q x value(g, k, n) (the integer the kernels multiply), then the epilogue's f32 roundings in
 * their order with scale(g, b, n), the weights scale of K block b (b = 0 per column): per column
 * f32(f32(f32(acc) * s_row) * scale); K blocks F = f32(f32(acc_0) * scale_0), F = f32(F + f32(f32(acc_b) *
 * scale_b)), then f32(F * s_row); bias [E, N] last.
 */
export function dqReference(c: { readonly sizes: readonly number[]; readonly K: number; readonly N: number; readonly blk: number }, x: Float32Array,
  value: (g: number, k: number, n: number) => number, scale: (g: number, b: number, n: number) => number, bias: Float32Array | undefined): Float32Array {
  const T = c.sizes.reduce((a, b) => a + b, 0), { K, N, blk } = c;
  const { q, s } = quantizeRows(x, T, K);
  const out = new Float32Array(T * N);
  const nb = blk ? Math.ceil(K / blk) : 1;
  let r0 = 0;
  c.sizes.forEach((rows, g) => {
    for (let r = r0; r < r0 + rows; r++) {
      for (let n = 0; n < N; n++) {
        let y: number;
        if (!blk) {
          let acc = 0;
          for (let k = 0; k < K; k++) acc += q[r * K + k] * value(g, k, n);
          y = f32(f32(f32(acc) * s[r]) * scale(g, 0, n));
        } else {
          let F = 0;
          for (let b = 0; b < nb; b++) {
            let acc = 0;
            for (let k = b * blk; k < Math.min(K, (b + 1) * blk); k++) acc += q[r * K + k] * value(g, k, n);
            const p = f32(f32(acc) * scale(g, b, n));
            F = b === 0 ? p : f32(F + p);
          }
          y = f32(F * s[r]);
        }
        if (bias) y = f32(y + bias[g * N + n]);
        out[r * N + n] = y;
      }
    }
    r0 += rows;
  });
  return out;
}

/** dqReference of integer weights [E, K, N] with scales [E, N] or [E, ceil(K / blk), N]. */
export function dqIntReference(c: { readonly sizes: readonly number[]; readonly K: number; readonly N: number; readonly blk: number }, x: Float32Array, w: Float64Array, sc: Float32Array, bias: Float32Array | undefined): Float32Array {
  const { K, N, blk } = c, nb = blk ? Math.ceil(K / blk) : 1;
  return dqReference(c, x, (g, k, n) => w[(g * K + k) * N + n], (g, b, n) => sc[(g * nb + b) * N + n], bias);
}

/** |got - want| within the float epilogue's rounding (the gpu engine's against the model or the cpu's): a few f32
 * ulps of the largest term. */
export function expectClose(got: Float32Array, want: Float32Array, what: string): void {
  if (got.length !== want.length) throw new Error(`${what}: ${got.length} values, want ${want.length}`);
  let scale = 0;
  for (const v of want) scale = Math.max(scale, Math.abs(v));
  for (let i = 0; i < want.length; i++) {
    if (!(Math.abs(got[i] - want[i]) <= 4e-6 * scale)) throw new Error(`${what}: element ${i} = ${got[i]}, want ${want[i]} (max |want| ${scale})`);
  }
}

const RANGE: Record<string, [number, number]> = { s8: [-128, 127], u8: [0, 255], s4: [-8, 7], u4: [0, 15] };

/** A `:dq` case with integer weights (s8 / u8 / s4 / u4). */
export interface DqIntCase {
  readonly E: number;
  /** Rows per expert (empty experts allowed). */
  readonly sizes: readonly number[];
  readonly K: number;
  readonly N: number;
  readonly wdt: DataType;
  /** K-block size of the weights scales, or 0 for per-column. */
  readonly blk: number;
  readonly bias?: boolean;
  readonly proposal?: 'P1' | 'P2';
}

/** Seeded data of a case: src with 5% outliers and a zero row, every code of the type, f32 scales and bias. */
export function dqIntData(c: DqIntCase, seed: number): { x: Float32Array; w: Float64Array; sc: Float32Array; bias: Float32Array | undefined } {
  const T = c.sizes.reduce((a, b) => a + b, 0), r = mulberry32(seed);
  const x = Float32Array.from({ length: T * c.K }, () => (r() * 2 - 1) * (r() < 0.05 ? 40 : 1));
  if (T > 1) x.fill(0, c.K, 2 * c.K); // a row of zeros: scale 1
  const [lo, hi] = RANGE[c.wdt];
  const w = Float64Array.from({ length: c.E * c.K * c.N }, () => lo + Math.floor(r() * (hi - lo + 1)));
  const nb = c.blk ? Math.ceil(c.K / c.blk) : 1;
  const sc = Float32Array.from({ length: c.E * nb * c.N }, () => f32(0.001 + r() * 0.02));
  const bias = c.bias ? Float32Array.from({ length: c.E * c.N }, () => f32(r() - 0.5)) : undefined;
  return { x, w, sc, bias };
}

/** Every cpu kernel build the `:dq` path runs on: simd128, relaxed, relaxed with the opt-in relaxed dot, at 1
 * and 2 threads. */
export async function dqEngines(): Promise<[string, Engine, Stream][]> {
  const engines: [string, Engine, Stream][] = [];
  for (const kernels of ['simd128', 'relaxed'] as const) {
    for (const threads of [1, 2]) {
      const e = await Engine.create({ threads, kernels });
      engines.push([`${kernels} ${threads}T`, e, new Stream(e)]);
    }
  }
  // The relaxed dot is opt-in (slower than the int16 kernel on x64 without VNNI): these engines ask for it.
  for (const threads of [1, 2]) {
    const e = await Engine.create({ threads, kernels: 'relaxed', relaxedDot: true });
    engines.push([`relaxed+dot ${threads}T`, e, new Stream(e)]);
  }
  return engines;
}

export interface DqMatmulRun {
  readonly E: number;
  /** Rows per expert (empty experts allowed). */
  readonly sizes: readonly number[];
  /** Rows the src / dst allocations hold (default: the sizes' sum); src rows past the last offset are NaN. */
  readonly capacity?: number;
  readonly K: number;
  readonly N: number;
  readonly proposal?: 'P1' | 'P2';
  /** src [sum of sizes, K]. */
  readonly x: Float32Array;
  /** Weights values [E, K, N] of type `wdt`. */
  readonly w: Float64Array;
  readonly wdt: DataType;
  /** Weights scales: [E, N] per column (blk 0) or [E, ceil(K / blk), N]; absent for none. */
  readonly scales?: { readonly data: Float32Array; readonly blk: number; readonly sdt?: DataType };
  /** [E, N]. */
  readonly bias?: Float32Array;
  /** How the weights reach the matmul: tag.any (scales embedded where the pd embeds them), the codes-only
   * panels a pd without weights scales picks (scales at execute time), or plain tag.abc. */
  readonly form?: 'any' | 'codes' | 'plain';
}

/**
 * Runs one `:dq` grouped matmul (P#1 grouped memory or P#2 offsets attribute) on a cpu or gpu engine; dst starts as
 * NaN. `got`: the rows of the sizes; the rows of capacity past them must stay NaN (never written).
 */
export async function runDqMatmul(eng: Engine | GpuEngine, strm: Stream, c: DqMatmulRun): Promise<{ got: Float32Array; impl: string; wmd: string }> {
  const { E, K, N, wdt } = c, used = c.sizes.reduce((a, b) => a + b, 0), T = c.capacity ?? used, form = c.form ?? 'any';
  if (T < used) throw new Error(`runDqMatmul: capacity ${T} < ${used} rows`);
  const attr = new PrimitiveAttr().setDynamicQuantization(ARG.SRC, dt.s8);
  if (c.scales?.blk) attr.setScales(ARG.WEIGHTS, 7, [1, c.scales.blk, 1], c.scales.sdt);
  else if (c.scales) attr.setScales(ARG.WEIGHTS, 5, [], c.scales.sdt);
  const p2 = c.proposal === 'P2';
  if (p2) attr.setGroupedOffsets(ARG.SRC, E);
  const srcMd = p2 ? memory.desc([T, K], dt.f32, tag.ab) : memory.desc.grouped([T, K], dt.f32, E, [RT, K]);
  const dstMd = p2 ? memory.desc([T, N], dt.f32, tag.ab) : memory.desc.grouped([T, N], dt.f32, E, [RT, N]);
  const biasMd = memory.desc([E, N], dt.f32, tag.ab);
  const userMd = memory.desc([E, K, N], wdt, tag.abc);
  const anyMd = memory.desc([E, K, N], wdt, tag.any);
  const weiReq = form === 'plain' ? userMd
    : form === 'codes' ? new matmul.PrimitiveDesc(eng, srcMd, anyMd, dstMd, new PrimitiveAttr().setDynamicQuantization(ARG.SRC, dt.s8)).queryMd('weights')!
      : anyMd;
  const pd = c.bias ? new matmul.PrimitiveDesc(eng, srcMd, weiReq, biasMd, dstMd, attr) : new matmul.PrimitiveDesc(eng, srcMd, weiReq, dstMd, attr);
  const offs = [0];
  for (const s of c.sizes) offs.push(offs[offs.length - 1] + s);
  const gpu = eng instanceof GpuEngine;
  // A memory on either engine kind, optionally sharing the offsets buffer of `share` (P#1's src and dst).
  const mk = (md: MemoryDesc, share?: Memory | GpuMemory): Memory | GpuMemory => (gpu
    ? Memory.create(md, eng, share && [undefined, (share as GpuMemory).buffers[1]])
    : Memory.create(md, eng, share && [undefined, (share as Memory).handles[1]]));
  const x = new Float32Array(T * K).fill(Number.NaN);
  x.set(c.x);
  const src = mk(srcMd).write(x), dst = mk(dstMd, p2 ? undefined : src);
  if (!p2) {
    if (src instanceof GpuMemory) src.writeOffsets(offs);
    else src.offsets.set(offs);
  }
  dst.write(new Float32Array(T * N).fill(Number.NaN));
  const user = mk(userMd).write(c.w);
  const mems = [src, dst, user];
  const scalesMd = pd.queryMd('scales:weights');
  const scales = scalesMd && c.scales ? mk(scalesMd).write(c.scales.data) : undefined;
  if (scales) mems.push(scales);
  const wmd = pd.queryMd('weights')!;
  const embedded = wmd.packed?.quant?.scales !== undefined;
  let wei = user;
  if (!wmd.equals(userMd)) {
    wei = mk(wmd);
    mems.push(wei);
    const ra: Record<number, Memory | GpuMemory> = { [ARG.FROM]: user, [ARG.TO]: wei };
    if (embedded) ra[ARG.ATTR_SCALES | ARG.WEIGHTS] = scales!;
    new reorder.Primitive(new reorder.PrimitiveDesc(eng, userMd, wmd)).execute(strm, ra);
  }
  const args: Record<number, Memory | GpuMemory> = { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst };
  if (scales && !embedded) args[ARG.ATTR_SCALES | ARG.WEIGHTS] = scales;
  if (c.bias) {
    const b = mk(biasMd).write(c.bias);
    args[ARG.BIAS] = b;
    mems.push(b);
  }
  if (p2) {
    const o = mk(pd.queryMd('grouped_offsets')!).write(offs);
    args[ARG.ATTR_GROUPED_OFFSETS | ARG.SRC] = o;
    mems.push(o);
  }
  const prim = new matmul.Primitive(pd);
  prim.execute(strm, args);
  await strm.wait();
  const out = Float32Array.from((await dst.read()).subarray(0, T * N));
  const written = out.subarray(used * N).findIndex((v) => !Number.isNaN(v));
  if (written >= 0) throw new Error(`runDqMatmul: dst row ${used + Math.floor(written / N)} past the last offset was written`);
  const got = out.subarray(0, used * N);
  mems.forEach((m) => m.free());
  prim.destroy();
  return { got, impl: pd.implInfo, wmd: wmd.toString() };
}
