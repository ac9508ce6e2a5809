/**
 * --mode=dglu: the fused GLU-backward epilogue (matmul post-op `glu_backward`, rfcs/0002 section 10)
 * against the GEMM it rides on, MoE-B GEMM2 diff_src shape: diff_out [R = 1536 routed rows over E = 64
 * experts, K = 2048] x W2^T [64, 2048, 1408] (packed `tag.any` weights, Proposal #1 rows).
 *   gemm        plain GEMM -> diff_act [R, 1408] (the fast f32 path: in-register epilogue)
 *   gemm(fused path)  the same GEMM through the fused-epilogue path (a binary_mul post-op by a per-expert
 *               [E, 1] tensor of ones forces it): the path the dGLU epilogue runs on, so the ratio to it is
 *               the epilogue's own cost
 *   gemm+dglu   the same GEMM with the glu_backward epilogue -> d(h13) [R, 2816] + dprob (with prob)
 *   standalone  glu_backward primitive alone on diff_act (what the fusion saves: gemm + standalone)
 * Variants alternate sample by sample within a round (same interference); each round gives the ratio
 * of medians; the result is the median over rounds. Target: gemm+dglu / gemm <= 1.10.
 *   npm run bench -- --mode=dglu --threads=1,2 --rounds=3 --min-ms=4000 [--glu=glu_swiglu:halves] [--isa=simd128] [--dglu-act=bf16]
 * --dglu-act=bf16: h13 and d(h13) in bf16 (saved activations), the GEMM's own output stays f32.
 */
import { ARG, Engine, Memory, PrimitiveAttr, RUNTIME_DIM_VAL, Stream, dt, glu_backward, matmul, memory, reorder, tag, type GluAlg, type GluLayout } from '../src/index.js';
import { fillRandom, timingOf } from './timing.js';
import { WORKLOADS } from './workloads.js';

export interface DgluRound {
  readonly threads: number;
  readonly round: number;
  readonly gemm_ms: number;
  readonly fused_ms: number;
  readonly standalone_ms: number;
  readonly gemm_fusedpath_ms: number;
  /** gemm+dglu / gemm (fast path), and / gemm (fused path). */
  readonly ratio: number;
  readonly ratio_fusedpath: number;
  readonly samples: number;
}

export async function dgluBench(threads: number, isa: 'auto' | 'simd128' | 'relaxed', rounds: number, minMs: number, alg: GluAlg, layout: GluLayout, act: 'f32' | 'bf16' = 'f32'): Promise<DgluRound[]> {
  const w = WORKLOADS['moe-b'];
  const sizes = w.sizes, G = sizes.length, K = w.K, N = w.N;
  const R = sizes.reduce((a, b) => a + b, 0);
  const eng = await Engine.create({ threads, kernels: isa });
  const strm = new Stream(eng);
  const RT = RUNTIME_DIM_VAL;
  const srcMd = memory.desc.grouped([R, K], dt.f32, G, [RT, K]);
  const diffMd = memory.desc.grouped([R, N], dt.f32, G, [RT, N]);
  const dstMd = memory.desc.grouped([R, 2 * N], act, G, [RT, 2 * N]);
  const weiAny = memory.desc([G, K, N], dt.f32, tag.any);
  const attr = new PrimitiveAttr();
  attr.postOps.appendGluBackward(alg, layout, undefined, undefined, { prob: true, srcDataType: act });
  const pdPlain = new matmul.PrimitiveDesc(eng, srcMd, weiAny, diffMd);
  const pdFused = new matmul.PrimitiveDesc(eng, srcMd, weiAny, dstMd, attr);
  const attrPath = new PrimitiveAttr();
  attrPath.postOps.appendBinary('binary_mul', memory.desc([G, 1], dt.f32, tag.ab));
  const pdPath = new matmul.PrimitiveDesc(eng, srcMd, weiAny, diffMd, attrPath);
  const plainP = new matmul.Primitive(pdPlain), fusedP = new matmul.Primitive(pdFused), pathP = new matmul.Primitive(pdPath);
  const ones = Memory.create(memory.desc([G, 1], dt.f32, tag.ab), eng);
  (ones.values as Float32Array).fill(1);
  const src = Memory.create(srcMd, eng);
  fillRandom(src.values as Float32Array, 1);
  let o = 0;
  src.offsets[0] = 0;
  sizes.forEach((s, i) => { o += s; src.offsets[i + 1] = o; });
  const userWeiMd = memory.desc([G, K, N], dt.f32, tag.abc);
  const userWei = Memory.create(userWeiMd, eng);
  fillRandom(userWei.values as Float32Array, 2, 0.05);
  const wei = Memory.create(pdPlain.queryMd('weights')!, eng);
  new reorder.Primitive(new reorder.PrimitiveDesc(eng, userWeiMd, wei.desc)).execute(strm, { [ARG.FROM]: userWei, [ARG.TO]: wei });
  await strm.wait();
  userWei.free();
  const diff = Memory.create(diffMd, eng, [undefined, src.handles[1]]);
  const dst = Memory.create(dstMd, eng, [undefined, src.handles[1]]);
  const h13 = Memory.create(pdFused.queryMd('glu_backward:src')!, eng);
  if (act === 'f32') fillRandom(h13.values as Float32Array, 3, 6);
  else h13.write(Float64Array.from({ length: R * 2 * N }, (_, i) => Math.sin(i) * 3));
  const probMd = pdFused.queryMd('glu_backward:prob')!;
  const prob = Memory.create(probMd, eng), dprob = Memory.create(probMd, eng);
  fillRandom(prob.values as Float32Array, 4);
  const plainView = (cols: number, t: 'f32' | 'bf16' = 'f32'): ReturnType<typeof memory.desc> => memory.desc([R, cols], t, tag.ab);
  const spd = new glu_backward.PrimitiveDesc(eng, plainView(2 * N, act), plainView(N), plainView(2 * N, act), { alg, layout, prob: probMd });
  const standalone = new glu_backward.Primitive(spd);
  const diffPlain = Memory.create(plainView(N), eng, diff.handles[0]);
  const dstPlain = Memory.create(plainView(2 * N, act), eng, dst.handles[0]);
  const po = (x: number): number => ARG.ATTR_MULTIPLE_POST_OP(0) | x;

  const runPlain = async (): Promise<void> => {
    plainP.execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: diff });
    await strm.wait();
  };
  const runPath = async (): Promise<void> => {
    pathP.execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: diff, [ARG.ATTR_MULTIPLE_POST_OP(0) | ARG.SRC_1]: ones });
    await strm.wait();
  };
  const runFused = async (): Promise<void> => {
    fusedP.execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst, [po(ARG.SRC_1)]: h13, [po(ARG.GLU_PROB)]: prob, [po(ARG.GLU_DIFF_PROB)]: dprob });
    await strm.wait();
  };
  const runStandalone = async (): Promise<void> => {
    standalone.execute(strm, { [ARG.SRC]: h13, [ARG.DIFF_DST]: diffPlain, [ARG.DIFF_SRC]: dstPlain, [ARG.GLU_PROB]: prob, [ARG.GLU_DIFF_PROB]: dprob });
    await strm.wait();
  };
  const out: DgluRound[] = [];
  for (let i = 0; i < 2; i++) { await runPlain(); await runPath(); await runFused(); await runStandalone(); }
  for (let r = 0; r < rounds; r++) {
    const a: number[] = [], b: number[] = [], c: number[] = [], d: number[] = [];
    const start = performance.now();
    while (a.length < 5 || performance.now() - start < minMs) {
      for (const [fn, t] of [[runPlain, a], [runPath, d], [runFused, b], [runStandalone, c]] as const) {
        const t0 = performance.now();
        await fn();
        t.push(performance.now() - t0);
      }
    }
    const ta = timingOf(a), tb = timingOf(b), tc = timingOf(c), td = timingOf(d);
    out.push({
      threads, round: r, gemm_ms: ta.median, fused_ms: tb.median, standalone_ms: tc.median, gemm_fusedpath_ms: td.median,
      ratio: tb.median / ta.median, ratio_fusedpath: tb.median / td.median, samples: a.length,
    });
  }
  eng.release();
  return out;
}
