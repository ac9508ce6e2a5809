/**
 * Issue 12: groupdnn's packed int4 weights (s4, f32 scales per 32 K, `f32-gemm-4x8-w4`) against
 * onnxruntime-web's `com.microsoft.MatMulNBits` (bits 4, block_size 32, f32 activations), one session
 * per expert run in a per-expert loop the way an ORT-web user would (as bench/ort_peer.ts does for
 * f32 MatMul). Both sides get the same 4-bit codes and scales (ORT: uint4 with its default zero
 * point 8 = our s4 + 8), run in one process on one thread each, alternating run by run; the outputs
 * are compared (same dequantized weights, f32 accumulation in both).
 *
 *   npm run bench -- --mode=nbits --workload=decode,moe-b --min-ms=1000
 */
import * as ort from 'onnxruntime-web';
import { ARG, Engine, Memory, PrimitiveAttr, RUNTIME_DIM_VAL, Stream, dt, matmul, memory, reorder, tag } from '../src/index.js';
import { configureOrt, f32le, fBytes, fInt, fStr, msg, SESSION_OPTIONS } from './ort_peer.js';
import { fillRandom, timingOf, type Timing } from './timing.js';
import type { Workload } from './workloads.js';

const FLOAT = 1, UINT8 = 2;
const BLOCK = 32;
const attrInt = (name: string, v: number): Uint8Array => msg(fStr(1, name), fInt(3, v), fInt(20, 2));

/** `Y[m, N] = MatMulNBits(A[m, K], B, scales)`: B [N, K/32, 16] uint8 (uint4 codes, low nibble first), scales [N * K/32]. */
function buildNBitsModel(K: number, N: number, b: Uint8Array, scales: Float32Array): Uint8Array {
  const nb = K / BLOCK;
  const tB = msg(fInt(1, N), fInt(1, nb), fInt(1, BLOCK / 2), fInt(2, UINT8), fStr(8, 'B'), fBytes(9, b));
  const tS = msg(fInt(1, N * nb), fInt(2, FLOAT), fStr(8, 'S'), fBytes(9, f32le(scales)));
  const node = msg(fStr(1, 'A'), fStr(1, 'B'), fStr(1, 'S'), fStr(2, 'Y'), fStr(3, 'mmnb'), fStr(4, 'MatMulNBits'),
    fBytes(5, attrInt('K', K)), fBytes(5, attrInt('N', N)), fBytes(5, attrInt('bits', 4)), fBytes(5, attrInt('block_size', BLOCK)),
    fStr(7, 'com.microsoft'));
  const vi = (name: string, dims: (number | string)[]): Uint8Array =>
    msg(fStr(1, name), fBytes(2, msg(fBytes(1, msg(fInt(1, FLOAT), fBytes(2, msg(...dims.map((d) => fBytes(1, typeof d === 'number' ? fInt(1, d) : fStr(2, d))))))))));
  const graph = msg(fBytes(1, node), fStr(2, 'expert_nbits'), fBytes(5, tB), fBytes(5, tS), fBytes(11, vi('A', ['m', K])), fBytes(12, vi('Y', ['m', N])));
  return msg(fInt(1, 8), fStr(2, 'groupdnn-ort-nbits-peer'), fBytes(7, graph), fBytes(8, msg(fStr(1, ''), fInt(2, 17))), fBytes(8, msg(fStr(1, 'com.microsoft'), fInt(2, 1))));
}

export interface NbitsRow {
  readonly workload: string;
  readonly ours: Timing;
  readonly ort: Timing;
  /** Median over rounds of ORT time / our time. */
  readonly ratio: number;
  readonly maxRelDiff: number;
  readonly impl: string;
}

export async function nbitsCompare(w: Workload, minMs: number): Promise<NbitsRow> {
  const E = w.sizes.length, { K, N } = w, T = w.sizes.reduce((a, b) => a + b, 0), nb = K / BLOCK;
  // Codes s4 in [-8, 7] and scales per (expert, K-block, column).
  const codes = new Int8Array(E * K * N);
  let x = 12345;
  for (let i = 0; i < codes.length; i++) { x = (x * 1103515245 + 12345) >>> 0; codes[i] = ((x >>> 16) & 15) - 8; }
  const scales = new Float32Array(E * nb * N);
  fillRandom(scales, 7, 0.01);
  for (let i = 0; i < scales.length; i++) scales[i] = 0.002 + Math.abs(scales[i]);
  const a = new Float32Array(T * K);
  fillRandom(a, 3);

  // groupdnn: s4 [E, K, N] tag.any, scales mask 7 groups [1, 32, 1] ([E, K/32, N]).
  const eng = await Engine.create({ threads: 1, kernels: 'simd128' });
  const strm = new Stream(eng);
  const attr = new PrimitiveAttr();
  attr.setScales(ARG.WEIGHTS, 7, [1, BLOCK, 1], dt.f32);
  const srcMd = memory.desc.grouped([T, K], dt.f32, E, [RUNTIME_DIM_VAL, K]), dstMd = memory.desc.grouped([T, N], dt.f32, E, [RUNTIME_DIM_VAL, N]);
  const pd = new matmul.PrimitiveDesc(eng, srcMd, memory.desc([E, K, N], dt.s4, tag.any), dstMd, attr);
  const plain = Memory.create(memory.desc([E, K, N], dt.s4, tag.abc), eng).write(Float32Array.from(codes));
  const wei = Memory.create(pd.queryMd('weights')!, eng);
  const sm = Memory.create(pd.queryMd('scales:weights')!, eng).write(scales);
  // The pd's layout stores the scales beside the panels (`+q`): the reorder takes them, the matmul does not.
  new reorder.Primitive(new reorder.PrimitiveDesc(eng, plain.desc, wei.desc)).execute(strm, { [ARG.FROM]: plain, [ARG.TO]: wei, [ARG.ATTR_SCALES | ARG.WEIGHTS]: sm });
  await strm.wait();
  plain.free();
  const src = Memory.create(srcMd, eng).write(a);
  let acc = 0;
  src.offsets[0] = 0;
  w.sizes.forEach((s, i) => (src.offsets[i + 1] = acc += s));
  const dst = Memory.create(dstMd, eng, [undefined, src.handles[1]]);
  const prim = new matmul.Primitive(pd);
  const runOurs = async (): Promise<void> => {
    prim.execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst });
    await strm.wait();
  };

  // ORT: one MatMulNBits session per non-empty expert; B [N, K/32, 16] = (s4 + 8) nibbles along K.
  configureOrt(1);
  const sessions: (ort.InferenceSession | undefined)[] = [];
  for (let e = 0; e < E; e++) {
    if (w.sizes[e] === 0) { sessions.push(undefined); continue; }
    const b = new Uint8Array(N * K / 2), s = new Float32Array(N * nb);
    for (let n = 0; n < N; n++) {
      for (let k = 0; k < K; k++) {
        const q = codes[(e * K + k) * N + n] + 8;
        b[(n * K + k) >> 1] |= k & 1 ? q << 4 : q;
      }
      for (let j = 0; j < nb; j++) s[n * nb + j] = scales[(e * nb + j) * N + n];
    }
    sessions.push(await ort.InferenceSession.create(buildNBitsModel(K, N, b, s), SESSION_OPTIONS));
  }
  const y = new Float32Array(T * N);
  const runOrt = async (): Promise<void> => {
    let row = 0;
    for (let e = 0; e < E; e++) {
      const m = w.sizes[e];
      if (!m) continue;
      const out = await sessions[e]!.run({ A: new ort.Tensor('float32', a.subarray(row * K, (row + m) * K), [m, K]) });
      y.set(out.Y.data as Float32Array, row * N);
      out.Y.dispose();
      row += m;
    }
  };

  for (let i = 0; i < 2; i++) { await runOurs(); await runOrt(); }
  const ours = dst.values as Float32Array;
  let maxRelDiff = 0, mag = 0;
  for (let i = 0; i < T * N; i++) mag = Math.max(mag, Math.abs(y[i]));
  for (let i = 0; i < T * N; i++) maxRelDiff = Math.max(maxRelDiff, Math.abs(ours[i] - y[i]) / mag);
  const to: number[] = [], tr: number[] = [];
  const t0 = performance.now();
  while (to.length < 9 || (performance.now() - t0 < 2 * minMs && to.length < 200)) {
    let s = performance.now();
    await runOurs();
    to.push(performance.now() - s);
    s = performance.now();
    await runOrt();
    tr.push(performance.now() - s);
  }
  const ratios = tr.map((t, i) => t / to[i]).sort((p, q) => p - q);
  const impl = pd.implInfo;
  await Promise.all(sessions.map((s) => s?.release()));
  [wei, sm, src, dst].forEach((m) => m.free());
  eng.release();
  return { workload: w.name, ours: timingOf(to), ort: timingOf(tr), ratio: ratios[ratios.length >> 1], maxRelDiff, impl };
}
