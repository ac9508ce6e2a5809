/**
 * NaN, infinities and zero through every eltwise post-op, on both engines: the result is the
 * f32 evaluation of the formula in attr/eltwise.ts (eltwiseScalar), so a NaN x stays NaN (pow with
 * beta 0 aside: x^0 = 1) and alpha = 0 keeps IEEE's NaN of 0 * Inf. The gpu engine used to give
 * 0 for relu / linear / pow with alpha 0 of a NaN, Inf for exp and soft_relu of a NaN, a number for
 * log of a NaN; the cpu gave alpha for clip of a NaN and 1 for hardsigmoid of a NaN. The GLUs
 * likewise (moe.activation and the matmul's fused GLU): the gpu's swiglu_oai made a number of a NaN gate
 * or up (WGSL min / clamp), its swiglu an infinity of an infinite gate whose swish is Inf * 0.
 */
import { describe, expect, it } from 'vitest';
import { ARG, Engine, Memory, PrimitiveAttr, Stream, dt, matmul, memory, moe, tag, type EltwiseAlg, type GpuEngine } from '../src/index.js';
import { eltwiseScalar, gluScalar, type GluAlg } from '../src/attr/eltwise.js';
import { useGpuAndCpuEngines } from './gpu_test_engines.js';

let gpu: GpuEngine;
let cpu: Engine;
useGpuAndCpuEngines((g, c) => { gpu = g; cpu = c; });

/** x reaches the post-op as the GEMM's 1 * x, accumulated from +0: -0 arrives as +0. */
const XS = [NaN, Infinity, -Infinity, 0, 2.5, -1.5, 1e30, -7];

/** [algorithm, alpha, beta]: every algorithm, alpha 0 wherever alpha multiplies x. */
const OPS: ReadonlyArray<readonly [EltwiseAlg, number, number]> = [
  ['eltwise_relu', 0, 0], ['eltwise_relu', 0.5, 0], ['eltwise_gelu_erf', 0, 0], ['eltwise_gelu_tanh', 0, 0],
  ['eltwise_swish', 0, 0], ['eltwise_swish', 1, 0], ['eltwise_logistic', 0, 0], ['eltwise_tanh', 0, 0],
  ['eltwise_linear', 0, 0.5], ['eltwise_linear', 2, -1], ['eltwise_clip', -1, 2], ['eltwise_clip_v2', -1, 2],
  ['eltwise_abs', 0, 0], ['eltwise_square', 0, 0], ['eltwise_exp', 0, 0], ['eltwise_elu', 0, 0], ['eltwise_elu', 1.5, 0],
  ['eltwise_sqrt', 0, 0], ['eltwise_soft_relu', 1, 0], ['eltwise_soft_relu', 0.5, 0], ['eltwise_log', 0, 0],
  ['eltwise_pow', 0, 0.5], ['eltwise_pow', 1, 0], ['eltwise_pow', 1.5, 3], ['eltwise_pow', 1, -1],
  ['eltwise_round', 0, 0], ['eltwise_mish', 0, 0], ['eltwise_hardswish', 0, 0.5], ['eltwise_hardswish', 1 / 6, 0.5],
  ['eltwise_hardsigmoid', 0, 0.5], ['eltwise_hardsigmoid', 0.2, 0.5],
];

/** What the result must be: NaN, an infinity, or a finite value (to ~1e-5, the engines' vector math). */
function expected(alg: EltwiseAlg, x: number, alpha: number, beta: number): number | undefined {
  // IEEE's pow(-Inf, y) is +Inf for a y that is not an odd integer; both engines give NaN there, as for
  // any negative base of a non-integral power (exp(y log x)): not a case this test decides.
  if (alg === 'eltwise_pow' && x === -Infinity && !Number.isInteger(beta)) return undefined;
  return Math.fround(eltwiseScalar(alg, x, alpha, beta));
}

/** alg(x) in every column of [rows, 1] x [1, 8] of ones, the rows repeating XS (8 rows: the gpu's GEMV; 72: its tiled GEMM). */
async function run(eng: Engine | GpuEngine, alg: EltwiseAlg, alpha: number, beta: number, rows: number): Promise<Float32Array> {
  const N = 8;
  const srcMd = memory.desc([rows, 1], dt.f32, tag.ab), weiMd = memory.desc([1, N], dt.f32, tag.ab), dstMd = memory.desc([rows, N], dt.f32, tag.ab);
  const attr = new PrimitiveAttr();
  attr.postOps.appendEltwise(alg, alpha, beta);
  const pd = new matmul.PrimitiveDesc(eng, srcMd, weiMd, dstMd, attr);
  if (eng.kind === 'gpu') expect(pd.implInfo).toMatch(/^webgpu:/);
  const src = Memory.create(srcMd, eng).write(Float64Array.from({ length: rows }, (_, i) => XS[i % XS.length]));
  const wei = Memory.create(weiMd, eng).write(new Float64Array(N).fill(1));
  const dst = Memory.create(dstMd, eng);
  const strm = new Stream(eng);
  new matmul.Primitive(pd).execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst });
  await strm.wait();
  return Float32Array.from(await dst.read());
}

function mismatches(ys: Float32Array, rows: number, alg: EltwiseAlg, alpha: number, beta: number): string[] {
  const bad: string[] = [];
  for (let i = 0; i < ys.length; i++) {
    const x = XS[Math.floor(i / 8) % XS.length], want = expected(alg, x, alpha, beta), got = ys[i];
    if (want === undefined) continue;
    const ok = Number.isNaN(want) ? Number.isNaN(got) : !Number.isFinite(want) ? got === want : Math.abs(got - want) <= 1e-5 * Math.max(1, Math.abs(want));
    if (!ok) bad.push(`x = ${x}: ${got}, want ${want} (${rows} rows)`);
  }
  return [...new Set(bad)];
}

/** The ops also run through the gpu's tiled GEMM (72 rows; the epilogue text is shared, so a few suffice on SwiftShader). */
const TILED = new Set(['eltwise_relu 0', 'eltwise_linear 0', 'eltwise_exp 0', 'eltwise_clip -1', 'eltwise_hardsigmoid 0', 'eltwise_log 0']);

describe.each(['cpu', 'gpu'] as const)('eltwise post-ops of NaN, +-Inf and 0 on the %s engine', (kind) => {
  it.each(OPS.map((o) => [`${o[0]} alpha ${o[1]} beta ${o[2]}`, o] as const))('%s', async (_n, [alg, alpha, beta]) => {
    const eng = kind === 'gpu' ? gpu : cpu;
    const rowsList = kind === 'cpu' || TILED.has(`${alg} ${alpha}`) ? [8, 72] : [8];
    for (const rows of rowsList) expect(mismatches(await run(eng, alg, alpha, beta, rows), rows, alg, alpha, beta)).toEqual([]);
  });
});

const GLU_XS = [NaN, Infinity, -Infinity, 0, 1.5, -2];
const GLU_PAIRS = GLU_XS.flatMap((gate) => GLU_XS.map((up) => [gate, up] as const));
const GLUS: ReadonlyArray<readonly [GluAlg, number]> = [
  ['glu_swiglu', 1], ['glu_swiglu', -1], ['glu_swiglu', 0], ['glu_geglu_erf', 0], ['glu_geglu_tanh', 0],
  ['glu_swiglu_oai', 1.702], ['glu_swiglu_oai', -1], ['glu_swiglu_oai', 0],
];

/** glu(gate, up) of every pair: moe.activation over [pairs, 2] (halves: gate column 0, up column 1). */
async function gluOf(eng: Engine | GpuEngine, alg: GluAlg, alpha: number): Promise<Float32Array> {
  const P = GLU_PAIRS.length;
  const sMd = memory.desc([P, 2], dt.f32, tag.ab), dMd = memory.desc([P, 1], dt.f32, tag.ab);
  const pd = new moe.activation.PrimitiveDesc(eng, sMd, dMd, alg === 'glu_swiglu_oai' ? { alg, alpha, limit: 7 } : alg === 'glu_swiglu' ? { alg, alpha } : { alg });
  if (eng.kind === 'gpu') expect(pd.implInfo).toMatch(/^webgpu/);
  const src = Memory.create(sMd, eng).write(Float64Array.from(GLU_PAIRS.flat())), dst = Memory.create(dMd, eng);
  const strm = new Stream(eng);
  new moe.activation.Primitive(pd).execute(strm, { [ARG.SRC]: src, [ARG.DST]: dst });
  await strm.wait();
  return Float32Array.from(await dst.read());
}

function gluMismatches(ys: Float32Array, alg: GluAlg, alpha: number): string[] {
  const bad: string[] = [];
  GLU_PAIRS.forEach(([gate, up], i) => {
    const want = Math.fround(gluScalar(alg, gate, up, alpha, 7)), got = ys[i];
    const ok = Number.isNaN(want) ? Number.isNaN(got) : !Number.isFinite(want) ? got === want : Math.abs(got - want) <= 1e-5 * Math.max(1, Math.abs(want));
    if (!ok) bad.push(`gate ${gate}, up ${up}: ${got}, want ${want}`);
  });
  return bad;
}

describe.each(['cpu', 'gpu'] as const)('GLUs of NaN, +-Inf and 0 on the %s engine', (kind) => {
  it.each(GLUS.map((g) => [`${g[0]} alpha ${g[1]}`, g] as const))('moe.activation %s', async (_n, [alg, alpha]) => {
    expect(gluMismatches(await gluOf(kind === 'gpu' ? gpu : cpu, alg, alpha), alg, alpha)).toEqual([]);
  });

  it('the matmul\'s fused GLU epilogue (swiglu_oai, swiglu alpha -1): [pairs, 1] x [1, 2] of ones', async () => {
    const eng = kind === 'gpu' ? gpu : cpu;
    for (const [alg, alpha] of [['glu_swiglu_oai', 1.702], ['glu_swiglu', -1]] as const) {
      // row r of the GEMM is (x_r, x_r): gate = up = x
      const P = GLU_XS.length;
      const srcMd = memory.desc([P, 1], dt.f32, tag.ab), weiMd = memory.desc([1, 2], dt.f32, tag.ab), dstMd = memory.desc([P, 1], dt.f32, tag.ab);
      const attr = new PrimitiveAttr();
      attr.postOps.appendGlu(alg, 'halves', alpha, alg === 'glu_swiglu_oai' ? 7 : undefined);
      const pd = new matmul.PrimitiveDesc(eng, srcMd, weiMd, dstMd, attr);
      if (eng.kind === 'gpu') expect(pd.implInfo).toMatch(/^webgpu/);
      const src = Memory.create(srcMd, eng).write(Float64Array.from(GLU_XS)), wei = Memory.create(weiMd, eng).write([1, 1]), dst = Memory.create(dstMd, eng);
      const strm = new Stream(eng);
      new matmul.Primitive(pd).execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst });
      await strm.wait();
      const ys = Float32Array.from(await dst.read());
      const bad = GLU_XS.map((x, i) => [x, Math.fround(gluScalar(alg, x + 0, x + 0, alpha, 7)), ys[i]] as const)
        .filter(([, want, got]) => (Number.isNaN(want) ? !Number.isNaN(got) : !Number.isFinite(want) ? got !== want : Math.abs(got - want) > 1e-5 * Math.max(1, Math.abs(want))));
      expect(bad, `${alg} ${pd.implInfo}`).toEqual([]);
    }
  });
});
