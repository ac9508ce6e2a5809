/* The matmul tests of dynamic int8 activations (attr.setDynamicQuantization, `:dq`) share the model of the row
   quantization, their engine matrix and one runner (pd, weights reorder, P#1 / P#2 arguments, read back);
   each test file keeps its own data and float64 reference. */
import { ARG, Engine, Memory, PrimitiveAttr, RUNTIME_DIM_VAL as RT, Stream, dt, matmul, memory, reorder, tag, type DataType } from '../src/index.js';

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
  readonly K: number;
  readonly N: number;
  readonly proposal?: 'P1' | 'P2';
  /** src [T, K]. */
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

/** Runs one `:dq` grouped matmul (P#1 grouped memory or P#2 offsets attribute); dst starts as NaN. */
export async function runDqMatmul(eng: Engine, strm: Stream, c: DqMatmulRun): Promise<{ got: Float32Array; impl: string; wmd: string }> {
  const { E, K, N, wdt } = c, T = c.sizes.reduce((a, b) => a + b, 0), form = c.form ?? 'any';
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
  const src = Memory.create(srcMd, eng), dst = Memory.create(dstMd, eng, p2 ? undefined : [undefined, src.handles[1]]);
  (src.values as Float32Array).set(c.x);
  if (!p2) src.offsets.set(offs);
  (dst.values as Float32Array).fill(Number.NaN);
  const user = Memory.create(userMd, eng).write(c.w);
  const mems = [src, dst, user];
  const scalesMd = pd.queryMd('scales:weights');
  const scales = scalesMd && c.scales ? Memory.create(scalesMd, eng).write(c.scales.data) : undefined;
  if (scales) mems.push(scales);
  const wmd = pd.queryMd('weights')!;
  const embedded = wmd.packed?.quant?.scales !== undefined;
  let wei = user;
  if (!wmd.equals(userMd)) {
    wei = Memory.create(wmd, eng);
    mems.push(wei);
    const ra: Record<number, Memory> = { [ARG.FROM]: user, [ARG.TO]: wei };
    if (embedded) ra[ARG.ATTR_SCALES | ARG.WEIGHTS] = scales!;
    new reorder.Primitive(new reorder.PrimitiveDesc(eng, userMd, wmd)).execute(strm, ra);
  }
  const args: Record<number, Memory> = { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst };
  if (scales && !embedded) args[ARG.ATTR_SCALES | ARG.WEIGHTS] = scales;
  if (c.bias) {
    const b = Memory.create(biasMd, eng).write(c.bias);
    args[ARG.BIAS] = b;
    mems.push(b);
  }
  if (p2) {
    const o = Memory.create(pd.queryMd('grouped_offsets')!, eng).write(offs);
    args[ARG.ATTR_GROUPED_OFFSETS | ARG.SRC] = o;
    mems.push(o);
  }
  const prim = new matmul.Primitive(pd);
  prim.execute(strm, args);
  await strm.wait();
  const got = Float32Array.from((dst.values as Float32Array).subarray(0, T * N));
  mems.forEach((m) => m.free());
  prim.destroy();
  return { got, impl: pd.implInfo, wmd: wmd.toString() };
}
