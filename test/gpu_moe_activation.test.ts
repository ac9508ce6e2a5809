/**
 * moe.activation on the gpu engine (SwiftShader in CI): every GLU kind and layout against the float64
 * GLU of the cpu tests and against the cpu engine (the tolerance of the cpu tests: exp / erf are not
 * correctly rounded on either engine), the bits of the gpu GEMM's fused GLU epilogue (the same WGSL),
 * grouped src (rows at or past the last offset untouched, offsets read on the device), plain src, I not
 * a multiple of the 64-wide workgroup, bad offsets raised at wait() with nothing written, the same bits
 * on a second run.
 */
import { describe, expect, it } from 'vitest';
import {
  ARG, Engine, GpuEngine, Memory, PrimitiveAttr, RUNTIME_DIM_VAL, Stream, dt, matmul, memory, moe, tag, type GluAlg, type GluLayout, type GluOptions,
} from '../src/index.js';
import { useGpuAndCpuEngines } from './gpu_test_engines.js';
import { expectDnnlError, expectDnnlReject } from './helpers.js';
import { gluExpected } from './quant_helpers.js';
import { mulberry32, randomF32 } from './workloads.js';
import { ACT_GROUPS, ACT_ROWS, BAD_ACTIVATION_OFFSETS } from './moe_activation_cases.js';

let gpu: GpuEngine;
let cpu: Engine;
useGpuAndCpuEngines((g, c) => { gpu = g; cpu = c; });

const ALGS: readonly GluAlg[] = ['glu_swiglu', 'glu_geglu_erf', 'glu_geglu_tanh', 'glu_swiglu_oai'];
const LAYOUTS: readonly GluLayout[] = ['halves', 'interleaved', 'blocks32'];
const SENTINEL = -99;

/** The cpu engine's activation of the same h (plain rows). */
async function cpuAct(h: Float32Array, R: number, I: number, glu: GluOptions): Promise<Float32Array> {
  const hMd = memory.desc([R, 2 * I], dt.f32, tag.ab), aMd = memory.desc([R, I], dt.f32, tag.ab);
  const src = Memory.create(hMd, cpu);
  src.write(h.subarray(0, R * 2 * I));
  const dst = Memory.create(aMd, cpu);
  const strm = new Stream(cpu);
  new moe.activation.Primitive(new moe.activation.PrimitiveDesc(cpu, hMd, aMd, glu)).execute(strm, { [ARG.SRC]: src, [ARG.DST]: dst });
  await strm.wait();
  return Float32Array.from(dst.read());
}

function expectNear(got: ArrayLike<number>, want: (i: number) => number, n: number, rel: number, what: string): void {
  const bad: string[] = [];
  for (let i = 0; i < n; i++) {
    const w = want(i);
    if (!(Math.abs(got[i] - w) <= rel * (1 + Math.abs(w)))) bad.push(`[${i}] got ${got[i]} want ${w}`);
  }
  expect(bad.slice(0, 5), `${what}: ${bad.length} of ${n} out of tolerance`).toEqual([]);
}

describe('moe.activation on the gpu engine', () => {
  for (const alg of ALGS) for (const layout of LAYOUTS) {
    it(`${alg} ${layout}: float64, the cpu engine, the gpu GEMM's fused GLU bits, a second run`, async () => {
      const strm = new Stream(gpu);
      const G = 4, sizes = [5, 0, 11, 3], R = 19, K = 13, I = layout === 'blocks32' ? 96 : 23;
      const rng = mulberry32(I + ALGS.indexOf(alg));
      const xMd = memory.desc.grouped([R + 2, K], dt.f32, G, [RUNTIME_DIM_VAL, K]);
      const hMd = memory.desc.grouped([R + 2, 2 * I], dt.f32, G, [RUNTIME_DIM_VAL, 2 * I]);
      const aMd = memory.desc.grouped([R + 2, I], dt.f32, G, [RUNTIME_DIM_VAL, I]);
      const x = Memory.create(xMd, gpu).write(randomF32(rng, (R + 2) * K).map((v) => 2 * v));
      x.writeOffsets([0, 5, 5, 16, 19]);
      const w = Memory.create(memory.desc([G, K, 2 * I], dt.f32, tag.abc), gpu).write(randomF32(rng, G * K * 2 * I));
      const h = Memory.create(hMd, gpu, [undefined, x.buffers[1]]);
      new matmul.Primitive(new matmul.PrimitiveDesc(gpu, xMd, w.desc, hMd)).execute(strm, { [ARG.SRC]: x, [ARG.WEIGHTS]: w, [ARG.DST]: h });
      const pd = new moe.activation.PrimitiveDesc(gpu, hMd, aMd, { alg, layout });
      expect(pd.implInfo).toBe('webgpu:moe-activation');
      const prim = new moe.activation.Primitive(pd);
      const acts = [0, 1].map(() => Memory.create(aMd, gpu, [undefined, x.buffers[1]]).write(new Array<number>((R + 2) * I).fill(SENTINEL)));
      for (const act of acts) prim.execute(strm, { [ARG.SRC]: h, [ARG.DST]: act });
      const attr = new PrimitiveAttr();
      attr.postOps.appendGlu(alg, layout);
      const fused = Memory.create(aMd, gpu, [undefined, x.buffers[1]]);
      new matmul.Primitive(new matmul.PrimitiveDesc(gpu, xMd, w.desc, aMd, attr)).execute(strm, { [ARG.SRC]: x, [ARG.WEIGHTS]: w, [ARG.DST]: fused });
      await strm.wait();
      expect(sizes.reduce((a, b) => a + b)).toBe(R);
      const hv = (await h.read()) as Float32Array, av = (await acts[0].read()) as Float32Array;
      expectNear(av, (i) => gluExpected({ alg, layout }, 2 * I, i % I, (c) => hv[Math.floor(i / I) * 2 * I + c]), R * I, 4e-6, 'float64');
      expect(Array.from(av.subarray(R * I)), 'rows past offsets[G]').toEqual(new Array<number>(2 * I).fill(SENTINEL));
      const c = await cpuAct(hv, R, I, { alg, layout });
      expectNear(av, (i) => c[i], R * I, 4e-6, 'cpu engine');
      expect(Buffer.from(((await acts[1].read()) as Float32Array).buffer).equals(Buffer.from(av.buffer)), 'second run').toBe(true);
      const fv = (await fused.read()) as Float32Array;
      expect(Array.from(av.subarray(0, R * I)), 'fused GEMM GLU').toEqual(Array.from(fv.subarray(0, R * I)));
    });
  }

  it.each([
    { alg: 'glu_swiglu', layout: 'interleaved', alpha: 1.6 },
    { alg: 'glu_swiglu_oai', layout: 'halves', alpha: 1.2, limit: 1.5 },
    { alg: 'glu_swiglu_oai', layout: 'blocks32' },
  ] as const satisfies readonly GluOptions[])('plain src with alpha / limit (clamping exercised): %o', async (glu) => {
    const strm = new Stream(gpu);
    const R = 70, I = glu.layout === 'blocks32' ? 32 : 65;
    const hv = Float32Array.from(randomF32(mulberry32(71), R * 2 * I).map((v) => 8 * v));
    const hMd = memory.desc([R, 2 * I], dt.f32, tag.ab), aMd = memory.desc([R, I], dt.f32, tag.ab);
    const h = Memory.create(hMd, gpu).write(hv), act = Memory.create(aMd, gpu);
    new moe.activation.Primitive(new moe.activation.PrimitiveDesc(gpu, hMd, aMd, glu)).execute(strm, { [ARG.SRC]: h, [ARG.DST]: act });
    await strm.wait();
    const av = (await act.read()) as Float32Array;
    expectNear(av, (i) => gluExpected(glu, 2 * I, i % I, (c) => hv[Math.floor(i / I) * 2 * I + c]), R * I, 4e-6, 'float64');
    const c = await cpuAct(hv, R, I, glu);
    expectNear(av, (i) => c[i], R * I, 4e-6, 'cpu engine');
  });

  it('strided rows: src and dst row strides wider than 2I and I', async () => {
    const strm = new Stream(gpu);
    const R = 5, I = 7;
    const hMd = memory.desc([R, 2 * I], dt.f32, [2 * I + 3, 1]), aMd = memory.desc([R, I], dt.f32, [I + 2, 1]);
    const hv = Float32Array.from(randomF32(mulberry32(3), hMd.spanElems).map((v) => 3 * v));
    const h = Memory.create(hMd, gpu).write(hv), act = Memory.create(aMd, gpu).write(new Array<number>(aMd.spanElems).fill(SENTINEL));
    new moe.activation.Primitive(new moe.activation.PrimitiveDesc(gpu, hMd, aMd, { alg: 'glu_geglu_tanh' })).execute(strm, { [ARG.SRC]: h, [ARG.DST]: act });
    await strm.wait();
    const av = (await act.read()) as Float32Array;
    for (let r = 0; r < R; r++) for (let j = 0; j < I + 2; j++) {
      if (r * (I + 2) + j >= aMd.spanElems) continue;
      const got = av[r * (I + 2) + j];
      if (j >= I) { expect(got, `padding ${r},${j}`).toBe(SENTINEL); continue; }
      const ref = gluExpected({ alg: 'glu_geglu_tanh', layout: 'halves' }, 2 * I, j, (c) => hv[r * (2 * I + 3) + c]);
      expect(Math.abs(got - ref)).toBeLessThanOrEqual(4e-6 * (1 + Math.abs(ref)));
    }
  });

  it('grouped src: offsets[G] = 0 writes nothing; a bad last offset is raised at wait() with nothing written; descriptor rules', async () => {
    const strm = new Stream(gpu);
    const hMd = memory.desc.grouped([6, 8], dt.f32, 2, [RUNTIME_DIM_VAL, 8]);
    const aMd = memory.desc.grouped([6, 4], dt.f32, 2, [RUNTIME_DIM_VAL, 4]);
    const h = Memory.create(hMd, gpu).write(randomF32(mulberry32(1), 48));
    const a = Memory.create(aMd, gpu, [undefined, h.buffers[1]]).write(new Array<number>(24).fill(4));
    const prim = new moe.activation.Primitive(new moe.activation.PrimitiveDesc(gpu, hMd, aMd, { alg: 'glu_swiglu' }));
    h.writeOffsets([0, 0, 0]);
    prim.execute(strm, { [ARG.SRC]: h, [ARG.DST]: a });
    await strm.wait();
    expect(Array.from(await a.read()).every((v) => v === 4)).toBe(true);
    for (const [offs, msg] of [
      [[0, 3, 7], 'ARG.SRC offsets[2] = 7 exceeds the total extent 6 of dims[0]'],
      [[0, 3, -1], 'ARG.SRC offsets must be non-decreasing: offsets[2] = -1 < offsets[1] = 3'],
    ] as const) {
      h.writeOffsets(offs);
      prim.execute(strm, { [ARG.SRC]: h, [ARG.DST]: a });
      await expectDnnlReject(strm.wait(), 'invalid_arguments', `moe.activation.execute: ${msg}`);
      expect(Array.from(await a.read()).every((v) => v === 4)).toBe(true);
    }
    h.writeOffsets([0, 3, 6]);
    prim.execute(strm, { [ARG.SRC]: h, [ARG.DST]: a });
    await strm.wait();
    expect(Array.from(await a.read()).some((v) => v === 4)).toBe(false);
    expectDnnlError(() => new moe.activation.PrimitiveDesc(gpu, hMd, memory.desc([6, 3], dt.f32, tag.ab), { alg: 'glu_swiglu' }), 'invalid_arguments', 'dst dims [6,3] must be [rows = 6, I = 4]');
    expectDnnlError(() => new moe.activation.PrimitiveDesc(gpu, hMd, aMd, { alg: 'glu_swiglu', layout: 'blocks32' }), 'invalid_arguments', 'blocks32 needs I % 32 == 0');
    expectDnnlError(() => new moe.activation.PrimitiveDesc(gpu, memory.desc([6, 8], dt.bf16, tag.ab), memory.desc([6, 4], dt.f32, tag.ab), { alg: 'glu_swiglu' }), 'unimplemented', 'bf16 -> f32');
    expectDnnlError(() => prim.execute(strm, { [ARG.SRC]: h, [ARG.DST]: Memory.create(aMd, gpu, [h.buffers[0], h.buffers[1]]) }), 'invalid_arguments', 'ARG.DST values overlap ARG.SRC values');
  });

  it.each(BAD_ACTIVATION_OFFSETS)('grouped src, $what: the cpu engine\'s rule and message at wait(), nothing written; then a good run', async ({ src, dst, message }) => {
    const strm = new Stream(gpu);
    const R = ACT_ROWS, G = ACT_GROUPS;
    const hMd = memory.desc.grouped([R, 8], dt.f32, G, [RUNTIME_DIM_VAL, 8]);
    const aMd = memory.desc.grouped([R, 4], dt.f32, G, [RUNTIME_DIM_VAL, 4]);
    const hv = randomF32(mulberry32(3), R * 8);
    const h = Memory.create(hMd, gpu).write(hv).writeOffsets(src);
    const a = Memory.create(aMd, gpu, dst ? undefined : [undefined, h.buffers[1]]).write(new Array<number>(R * 4).fill(4));
    if (dst) a.writeOffsets(dst);
    const prim = new moe.activation.Primitive(new moe.activation.PrimitiveDesc(gpu, hMd, aMd, { alg: 'glu_swiglu' }));
    prim.execute(strm, { [ARG.SRC]: h, [ARG.DST]: a });
    await expectDnnlReject(strm.wait(), 'invalid_arguments', message);
    expect(Array.from(await a.read())).toEqual(new Array<number>(R * 4).fill(4));
    // Valid offsets on the same primitive: rows [0, 5) written, row 5 untouched.
    h.writeOffsets([0, 2, 2, 5]);
    if (dst) a.writeOffsets([0, 2, 2, 5]);
    prim.execute(strm, { [ARG.SRC]: h, [ARG.DST]: a });
    await strm.wait();
    const av = await a.read();
    expectNear(av, (i) => (i >= 20 ? 4 : gluExpected({ alg: 'glu_swiglu', layout: 'halves' }, 8, i % 4, (c) => hv[Math.floor(i / 4) * 8 + c])), R * 4, 4e-6, 'float64');
  });

  it('32770 rows (the grid folds rows past 32768 into z): the cpu engine within tolerance, the last rows written', async () => {
    const strm = new Stream(gpu);
    const R = 32770, I = 1;
    const hv = Float32Array.from(randomF32(mulberry32(8), R * 2).map((v) => 4 * v));
    const hMd = memory.desc([R, 2], dt.f32, tag.ab), aMd = memory.desc([R, 1], dt.f32, tag.ab);
    const h = Memory.create(hMd, gpu).write(hv), act = Memory.create(aMd, gpu).write(new Array<number>(R).fill(SENTINEL));
    new moe.activation.Primitive(new moe.activation.PrimitiveDesc(gpu, hMd, aMd, { alg: 'glu_swiglu' })).execute(strm, { [ARG.SRC]: h, [ARG.DST]: act });
    await strm.wait();
    const av = (await act.read()) as Float32Array;
    expectNear(av, (i) => gluExpected({ alg: 'glu_swiglu', layout: 'halves' }, 2 * I, 0, (c) => hv[i * 2 + c]), R, 4e-6, 'float64');
  });

  it('rows = 0 (plain) is a no-op', async () => {
    const strm = new Stream(gpu);
    const hMd = memory.desc([0, 8], dt.f32, tag.ab), aMd = memory.desc([0, 4], dt.f32, tag.ab);
    new moe.activation.Primitive(new moe.activation.PrimitiveDesc(gpu, hMd, aMd, { alg: 'glu_swiglu' })).execute(strm, { [ARG.SRC]: Memory.create(hMd, gpu), [ARG.DST]: Memory.create(aMd, gpu) });
    await strm.wait();
  });
});
