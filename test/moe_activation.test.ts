/**
 * moe.activation (the GLU as a stage of its own, for training): against a float64 GLU written here,
 * the same bits as the GEMM's fused GLU epilogue (GEMM without post-op, then this stage), every GLU
 * kind and layout, I not a multiple of 4, grouped src (rows past the last offset untouched), threads
 * 1/2/3 bitwise, bad offsets and descriptors are errors with nothing written.
 */
import { afterAll, describe, expect, it } from 'vitest';
import {
  ARG, Engine, Memory, PrimitiveAttr, RUNTIME_DIM_VAL, Stream, dt, glu_backward, matmul, memory, moe, offsets, tag,
  type EngineOptions, type GluAlg, type GluLayout, type GluOptions,
} from '../src/index.js';
import { expectDnnlError, expectDnnlReject } from './helpers.js';
import { gluExpected } from './quant_helpers.js';
import { gluBackwardRow } from './glu_backward_reference.js';
import { mulberry32, randomF32 } from './workloads.js';
import { ACT_GROUPS, ACT_ROWS, BAD_ACTIVATION_OFFSETS } from './moe_activation_cases.js';

const engines: Engine[] = [];
afterAll(() => engines.forEach((e) => e.release()));

const ALGS: readonly GluAlg[] = ['glu_swiglu', 'glu_geglu_erf', 'glu_geglu_tanh', 'glu_swiglu_oai'];
const LAYOUTS: readonly GluLayout[] = ['halves', 'interleaved', 'blocks32'];

describe.each([
  ['simd128 1T', { threads: 1, kernels: 'simd128' }],
  ['relaxed 3T', { threads: 3, kernels: 'relaxed' }],
  ['reference', { threads: 1, kernels: 'none' }],
] as const)('moe.activation [%s]', (_n, opts: EngineOptions) => {
  for (const alg of ALGS) for (const layout of LAYOUTS) {
    it(`${alg} ${layout}: float64, and the bits of the fused GEMM epilogue`, async () => {
      const eng = await Engine.create(opts);
      engines.push(eng);
      const strm = new Stream(eng);
      const G = 4, sizes = [5, 0, 11, 3], R = 19, K = 13, I = layout === 'blocks32' ? 64 : 23;
      const rng = mulberry32(I + ALGS.indexOf(alg));
      const xMd = memory.desc.grouped([R + 2, K], dt.f32, G, [RUNTIME_DIM_VAL, K]);
      const hMd = memory.desc.grouped([R + 2, 2 * I], dt.f32, G, [RUNTIME_DIM_VAL, 2 * I]);
      const aMd = memory.desc.grouped([R + 2, I], dt.f32, G, [RUNTIME_DIM_VAL, I]);
      const x = Memory.create(xMd, eng);
      x.write(randomF32(rng, (R + 2) * K).map((v) => 2 * v));
      offsets.fromSizes(sizes, x.offsets);
      const w = Memory.create(memory.desc([G, K, 2 * I], dt.f32, tag.abc), eng);
      w.write(randomF32(rng, G * K * 2 * I));
      const h = Memory.create(hMd, eng, [undefined, x.handles[1]]);
      new matmul.Primitive(new matmul.PrimitiveDesc(eng, xMd, w.desc, hMd)).execute(strm, { [ARG.SRC]: x, [ARG.WEIGHTS]: w, [ARG.DST]: h });
      const act = Memory.create(aMd, eng, [undefined, x.handles[1]]);
      (act.values as Float32Array).fill(-99);
      const pd = new moe.activation.PrimitiveDesc(eng, hMd, aMd, { alg, layout });
      new moe.activation.Primitive(pd).execute(strm, { [ARG.SRC]: h, [ARG.DST]: act });
      const attr = new PrimitiveAttr();
      attr.postOps.appendGlu(alg, layout);
      const fused = Memory.create(aMd, eng, [undefined, x.handles[1]]);
      new matmul.Primitive(new matmul.PrimitiveDesc(eng, xMd, w.desc, aMd, attr)).execute(strm, { [ARG.SRC]: x, [ARG.WEIGHTS]: w, [ARG.DST]: fused });
      await strm.wait();
      const hv = h.values as Float32Array, av = act.values as Float32Array, fv = fused.values as Float32Array;
      for (let r = 0; r < R; r++) for (let j = 0; j < I; j++) {
        const ref = gluExpected({ alg, layout }, 2 * I, j, (c) => hv[r * 2 * I + c]);
        expect(Math.abs(av[r * I + j] - ref), `row ${r} col ${j}`).toBeLessThanOrEqual(4e-6 * (1 + Math.abs(ref)));
      }
      expect(Array.from(av.subarray(R * I))).toEqual(new Array(2 * I).fill(-99)); // rows past offsets[G]
      if (opts.kernels !== 'none') expect(Array.from(av.subarray(0, R * I))).toEqual(Array.from(fv.subarray(0, R * I)));
    });
  }

  it.each([
    { alg: 'glu_swiglu', layout: 'interleaved', alpha: 1.6 },
    { alg: 'glu_swiglu_oai', layout: 'halves', alpha: 1.2, limit: 1.5 },
    { alg: 'glu_geglu_tanh', layout: 'interleaved' },
  ] as const satisfies readonly GluOptions[])('one GLU options object drives the forward and glu_backward: %o', async (glu) => {
    const eng = await Engine.create(opts);
    engines.push(eng);
    const strm = new Stream(eng);
    const R = 5, I = 7;
    const rng = mulberry32(71);
    const hMd = memory.desc([R, 2 * I], dt.f32, tag.ab), aMd = memory.desc([R, I], dt.f32, tag.ab);
    const h = Memory.create(hMd, eng).write(randomF32(rng, R * 2 * I).map((v) => 3 * v));
    const act = Memory.create(aMd, eng), diff = Memory.create(aMd, eng).write(randomF32(rng, R * I)), dh = Memory.create(hMd, eng);
    new moe.activation.Primitive(new moe.activation.PrimitiveDesc(eng, hMd, aMd, glu)).execute(strm, { [ARG.SRC]: h, [ARG.DST]: act });
    new glu_backward.Primitive(new glu_backward.PrimitiveDesc(eng, hMd, aMd, hMd, glu)).execute(strm, { [ARG.SRC]: h, [ARG.DIFF_DST]: diff, [ARG.DIFF_SRC]: dh });
    await strm.wait();
    const hv = h.values as Float32Array, av = act.values as Float32Array, dv = diff.values as Float32Array, gv = dh.values as Float32Array;
    for (let r = 0; r < R; r++) {
      for (let j = 0; j < I; j++) {
        const ref = gluExpected(glu, 2 * I, j, (c) => hv[r * 2 * I + c]);
        expect(Math.abs(av[r * I + j] - ref), `forward row ${r} col ${j}`).toBeLessThanOrEqual(4e-6 * (1 + Math.abs(ref)));
      }
      const want = gluBackwardRow(glu, I, hv.subarray(r * 2 * I, (r + 1) * 2 * I), dv.subarray(r * I, (r + 1) * I), undefined);
      for (let c = 0; c < 2 * I; c++) expect(Math.abs(gv[r * 2 * I + c] - want.dh[c]), `backward row ${r} col ${c}`).toBeLessThanOrEqual(1e-5 * (1 + Math.abs(want.dh[c])));
    }
  });

  it('alpha and limit where a GLU has no such parameter are rejected with the reason, forward and backward alike', async () => {
    const eng = await Engine.create(opts);
    engines.push(eng);
    const hMd = memory.desc([4, 8], dt.f32, tag.ab), aMd = memory.desc([4, 4], dt.f32, tag.ab);
    for (const alg of ['glu_geglu_erf', 'glu_geglu_tanh'] as const) {
      expectDnnlError(() => new moe.activation.PrimitiveDesc(eng, hMd, aMd, { alg, alpha: 2 }), 'invalid_arguments', `moe.activation: glu: alpha applies to glu_swiglu and glu_swiglu_oai only, not ${alg} (GELU has no slope parameter)`);
      expectDnnlError(() => new glu_backward.PrimitiveDesc(eng, hMd, aMd, hMd, { alg, alpha: 2 }), 'invalid_arguments', `glu_backward: options: alpha applies to glu_swiglu and glu_swiglu_oai only, not ${alg} (GELU has no slope parameter)`);
    }
    expectDnnlError(() => new moe.activation.PrimitiveDesc(eng, hMd, aMd, { alg: 'glu_swiglu', limit: 3 }), 'invalid_arguments', 'moe.activation: glu: limit applies to glu_swiglu_oai only, not glu_swiglu');
    expectDnnlError(() => new glu_backward.PrimitiveDesc(eng, hMd, aMd, hMd, { alg: 'glu_swiglu', limit: 3 }), 'invalid_arguments', 'glu_backward: options: limit applies to glu_swiglu_oai only, not glu_swiglu');
  });

  it.each(BAD_ACTIVATION_OFFSETS)('grouped src, $what: the grouped matmul\'s offsets rule and message, nothing written', async ({ src, dst, message }) => {
    const eng = await Engine.create(opts);
    engines.push(eng);
    const strm = new Stream(eng);
    const R = ACT_ROWS, G = ACT_GROUPS;
    const hMd = memory.desc.grouped([R, 8], dt.f32, G, [RUNTIME_DIM_VAL, 8]);
    const aMd = memory.desc.grouped([R, 4], dt.f32, G, [RUNTIME_DIM_VAL, 4]);
    const h = Memory.create(hMd, eng);
    h.write(randomF32(mulberry32(3), R * 8));
    h.offsets.set(src);
    const a = Memory.create(aMd, eng, dst ? undefined : [undefined, h.handles[1]]);
    if (dst) a.offsets.set(dst);
    (a.values as Float32Array).fill(4);
    new moe.activation.Primitive(new moe.activation.PrimitiveDesc(eng, hMd, aMd, { alg: 'glu_swiglu' })).execute(strm, { [ARG.SRC]: h, [ARG.DST]: a });
    await expectDnnlReject(strm.wait(), 'invalid_arguments', message);
    expect(Array.from(a.values as Float32Array)).toEqual(new Array<number>(R * 4).fill(4));
  });

  it('bad offsets are an error with nothing written; descriptor rules', async () => {
    const eng = await Engine.create(opts);
    engines.push(eng);
    const strm = new Stream(eng);
    const hMd = memory.desc.grouped([6, 8], dt.f32, 2, [RUNTIME_DIM_VAL, 8]);
    const aMd = memory.desc.grouped([6, 4], dt.f32, 2, [RUNTIME_DIM_VAL, 4]);
    const h = Memory.create(hMd, eng);
    h.write(randomF32(mulberry32(1), 48));
    h.offsets.set([0, 3, 7]);
    const a = Memory.create(aMd, eng, [undefined, h.handles[1]]);
    (a.values as Float32Array).fill(4);
    new moe.activation.Primitive(new moe.activation.PrimitiveDesc(eng, hMd, aMd, { alg: 'glu_swiglu' })).execute(strm, { [ARG.SRC]: h, [ARG.DST]: a });
    await expectDnnlReject(strm.wait(), 'invalid_arguments', 'moe.activation.execute: ARG.SRC offsets[2] = 7 exceeds the total extent 6 of dims[0]');
    expect((a.values as Float32Array).every((v) => v === 4)).toBe(true);
    expectDnnlError(() => new moe.activation.PrimitiveDesc(eng, hMd, memory.desc([6, 3], dt.f32, tag.ab), { alg: 'glu_swiglu' }), 'invalid_arguments', 'dst dims [6,3] must be [rows = 6, I = 4]');
    expectDnnlError(() => new moe.activation.PrimitiveDesc(eng, hMd, aMd, { alg: 'glu_swiglu', layout: 'blocks32' }), 'invalid_arguments', 'blocks32 needs I % 32 == 0');
    expectDnnlError(() => new moe.activation.PrimitiveDesc(eng, memory.desc([6, 7], dt.f32, tag.ab), aMd, { alg: 'glu_swiglu' }), 'invalid_arguments', 'must be even');
    expectDnnlError(() => new moe.activation.PrimitiveDesc(eng, memory.desc([6, 8], dt.bf16, tag.ab), memory.desc([6, 4], dt.f32, tag.ab), { alg: 'glu_swiglu' }), 'unimplemented', 'bf16 -> f32');
    expectDnnlError(() => new moe.activation.PrimitiveDesc(eng, hMd, aMd, { alg: 'eltwise_relu' as GluAlg }), 'invalid_arguments', 'glu.alg must be a GLU algorithm');
  });
});
