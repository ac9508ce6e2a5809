/**
 * Issue 12, "scales beside the panels": with weights `tag.any` of an 8-bit / 4-bit type and weights
 * scales / zero points in the attr, the pd picks `x8:p8+q` / `x4:p8k2+q` (the values stored beside the
 * panels), `reorder` takes the values under the matmul's arg ids and the matmul no longer takes them.
 * Every format x granularity x tail must give exactly the spec's values (float64 reference, exact
 * inputs) and bitwise what the same weights and scales give as execute-time arguments, on plain weights
 * and on codes-only packed weights, at 1, 2 and 3 threads, through P#1, P#2 and P#3.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ARG, DnnlError, Engine, Memory, PrimitiveAttr, RUNTIME_DIM_VAL as RT, Stream, dt, grouped_gemm, matmul, memory, reorder, tag, type DataType } from '../src/index.js';
import { GM, expectBitwise, expectSameBits, runGM, runP3Q, type GMCase, type Outcome, type P3QCase } from './quant_helpers.js';
import { expectDnnlError } from './helpers.js';

const THREADS = [1, 2, 3] as const;
const X8: readonly DataType[] = [dt.s8, dt.u8, dt.f8_e4m3, dt.f8_e5m2];
const X4: readonly DataType[] = [dt.s4, dt.u4, dt.f4_e2m1];
const INTS: readonly DataType[] = [dt.s8, dt.u8, dt.s4, dt.u4];

// Tails: a 70-row expert (two M-blocks), an empty one, 1-row ones; N = 21 (a 5-column panel).
const SHAPE = { G: 5, N: 21, sizes: [70, 0, 9, 1, 33] } as const;
const ONE_EXPERT = { G: 1, N: 13, sizes: [37] } as const;
const ALL_IN_ONE = { G: 4, N: 19, sizes: [0, 0, 41, 0] } as const;

function cases(wdt: DataType): [string, GMCase][] {
  const W = GM.weights;
  const c: [string, GMCase][] = [
    ['per column, K = 99 (odd)', { ...SHAPE, K: 99, weiDt: wdt, scales: { weights: { gran: W.expertCol } } }],
    ['per column, E = 1 (all rows), K = 35', { ...ONE_EXPERT, K: 35, weiDt: wdt, scales: { weights: { gran: W.expertCol } } }],
    ['per tensor (repeated per column), K = 64', { ...SHAPE, K: 64, weiDt: wdt, scales: { weights: { gran: W.tensor } } }],
    ['K-blocks of 3 (blocks start at odd k), K = 99', { ...SHAPE, K: 99, weiDt: wdt, scales: { weights: { gran: W.kBlock(3) } } }],
    ['K-blocks of 32 (f32, as w4k32), K = 96, one expert holds every row', { ...ALL_IN_ONE, K: 96, weiDt: wdt, scales: { weights: { gran: W.kBlock(32) } } }],
    ['8x7 blocks (K x N), K = 96', { ...SHAPE, K: 96, weiDt: wdt, scales: { weights: { gran: W.block2d(8, 7) } } }],
    ['bf16 K-block-16 scales, bf16 activations -> bf16, K = 48', { ...SHAPE, K: 48, srcDt: dt.bf16, dstDt: dt.bf16, weiDt: wdt, scales: { weights: { gran: W.kBlock(16), dt: dt.bf16 } } }],
    ['f16 per-column scales, K = 40', { ...SHAPE, K: 40, weiDt: wdt, scales: { weights: { gran: W.expertCol, dt: dt.f16 } } }],
    ['MX: e8m0 per 32, K = 64', { ...SHAPE, K: 64, weiDt: wdt, scales: { weights: { gran: W.kBlock(32), dt: dt.e8m0 } } }],
    ['NVFP4-style: f8_e4m3 per 16 + per-expert dst scale, K = 48', { ...SHAPE, K: 48, weiDt: wdt, scales: { weights: { gran: W.kBlock(16), dt: dt.f8_e4m3 }, dst: { gran: GM.dst.expert } } }],
    ['per column + bias + swiglu (halves: GLU segments off the panels), K = 40', { ...SHAPE, K: 40, N: 42, weiDt: wdt, scales: { weights: { gran: W.expertCol } }, bias: true, glu: { alg: 'glu_swiglu', layout: 'halves' } }],
  ];
  if (INTS.includes(wdt)) {
    const unsigned = wdt === dt.u8 || wdt === dt.u4;
    const zdt = unsigned ? dt.u8 : dt.s8;
    c.push(['zero points and scales per column, K = 37', { ...SHAPE, K: 37, weiDt: wdt, scales: { weights: { gran: W.expertCol } }, zps: { weights: { gran: W.expertCol, dt: zdt } } }]);
    c.push(['zero points and scales in K-blocks of 5, K = 45', { ...SHAPE, K: 45, weiDt: wdt, scales: { weights: { gran: W.kBlock(5) } }, zps: { weights: { gran: W.kBlock(5), dt: zdt } } }]);
    c.push([`4-bit zero points (${unsigned ? 'u4' : 's4'}) per K-block 16 + e8m0 scales per 32, K = 64`, { ...SHAPE, K: 64, weiDt: wdt, scales: { weights: { gran: W.kBlock(32), dt: dt.e8m0 } }, zps: { weights: { gran: W.kBlock(16), dt: unsigned ? dt.u4 : dt.s4 } } }]);
    c.push(['zero points per column + scales in K-blocks of 16, K = 128', { ...SHAPE, K: 128, weiDt: wdt, scales: { weights: { gran: W.kBlock(16) } }, zps: { weights: { gran: W.expertCol, dt: zdt } } }]);
    c.push(['s32 zero points only (per column), E = 1, K = 33', { ...ONE_EXPERT, K: 33, weiDt: wdt, zps: { weights: { gran: W.expertCol, dt: dt.s32 } } }]);
  }
  return c;
}

const SUFFIX = (t: DataType): string => (t === 'f4_e2m1' ? '-wf4' : t.startsWith('f8') ? '-wf8' : X4.includes(t) ? '-w4' : '-w8');

describe('scales / zero points beside the x8 / x4 panels (+q)', () => {
  const engines: Engine[] = [];
  const streams: Stream[] = [];
  beforeAll(async () => {
    for (const threads of THREADS) {
      const e = await Engine.create({ threads, kernels: 'simd128' });
      engines.push(e);
      streams.push(new Stream(e));
    }
  });
  afterAll(() => engines.forEach((e) => e.release()));

  for (const wdt of [...X8, ...X4]) {
    it.each(cases(wdt))(`${wdt}: P1 / P2, %s: exact, = runtime scales (plain and packed codes), 1/2/3 threads`, async (_n, c) => {
      for (const proposal of ['P1', 'P2'] as const) {
        let first: Outcome | undefined;
        for (let i = 0; i < engines.length; i++) {
          const emb = await runGM(engines[i], streams[i], { ...c, proposal, packed: true });
          expect(emb.pd.implInfo).toBe(`wasm:simd128:f32-gemm-4x8${SUFFIX(wdt)}`);
          if (!c.glu) expectBitwise(emb, `${proposal} +q ${THREADS[i]}T`);
          const rt = await runGM(engines[i], streams[i], { ...c, proposal, packed: 'runtime' });
          expectSameBits(emb, rt, `${proposal} ${THREADS[i]}T: +q vs packed codes + runtime scales`);
          const plain = await runGM(engines[i], streams[i], { ...c, proposal, packed: false });
          expectSameBits(emb, plain, `${proposal} ${THREADS[i]}T: +q vs plain weights + runtime scales`);
          if (first) expectSameBits(emb, first, `${proposal}: ${THREADS[i]} threads vs 1`);
          else first = emb;
        }
        expect(first!.want.some((v) => v !== 0), 'a non-trivial result').toBe(true);
      }
    });
  }

  it.each([...X8, ...X4])('P#3 grouped_gemm, %s (experts of different K and N, an empty one): +q = runtime scales = plain, exact, 1/2/3 threads', async (wdt) => {
    const experts = [{ K: 64, N: 21, rows: 70 }, { K: 32, N: 21, rows: 0 }, { K: 96, N: 21, rows: 5 }];
    const ragged = [{ K: 64, N: 21, rows: 70 }, { K: 33, N: 16, rows: 0 }, { K: 95, N: 9, rows: 1 }];
    const list: P3QCase[] = [
      { experts: ragged, weiDt: wdt, scales: { weights: { kind: 'col' } } },
      { experts: ragged, weiDt: wdt, scales: { weights: { kind: 'col', dt: dt.f16 } } },
      { experts, weiDt: wdt, scales: { weights: { kind: 16 } } },
      { experts, weiDt: wdt, scales: { weights: { kind: 32, dt: dt.e8m0 } } },
      { experts, weiDt: wdt, scales: { weights: { kind: 16, dt: dt.f8_e4m3 } } },
      { experts: [{ K: 50, N: 13, rows: 9 }], weiDt: wdt, scales: { weights: { kind: 'tensor', dt: dt.bf16 } } },
    ];
    if (INTS.includes(wdt)) list.push({ experts: ragged, weiDt: wdt, scales: { weights: { kind: 'col' } }, zps: { weights: { kind: 'col', dt: wdt === dt.u8 || wdt === dt.u4 ? dt.u8 : dt.s8 } } });
    for (const c of list) {
      let first: Outcome | undefined;
      for (let i = 0; i < engines.length; i++) {
        const emb = await runP3Q(engines[i], streams[i], { ...c, packed: true });
        expect(emb.pd.implInfo).toBe(`wasm:simd128:f32-gemm-4x8${SUFFIX(wdt)}`);
        expectBitwise(emb, `P3 +q ${THREADS[i]}T`);
        expectSameBits(emb, await runP3Q(engines[i], streams[i], { ...c, packed: 'runtime' }), `P3 ${THREADS[i]}T: +q vs packed codes + runtime scales`);
        expectSameBits(emb, await runP3Q(engines[i], streams[i], { ...c, packed: false }), `P3 ${THREADS[i]}T: +q vs plain`);
        if (first) expectSameBits(emb, first, `P3: ${THREADS[i]} threads vs 1`);
        else first = emb;
      }
    }
  });

  it('the layout: per panel the codes (padded to 16 bytes), then each K block\'s 8 scales in their stored type, then the zero points; padded columns scale 1 / zero point 0', async () => {
    const eng = engines[1];
    const strm = streams[1];
    const [G, K, N] = [2, 10, 11], gK = 5, nkb = 2; // odd K blocks: the second one starts on the high nibble of a k-pair
    const attr = new PrimitiveAttr();
    attr.setScales(ARG.WEIGHTS, 7, [1, gK, 1], dt.bf16);
    attr.setZeroPoints(ARG.WEIGHTS, 7, [1, gK, 1], dt.u4);
    const pd = new matmul.PrimitiveDesc(eng, memory.desc.grouped([4, K], dt.f32, G, [RT, K]), memory.desc([G, K, N], dt.u4, tag.any), memory.desc.grouped([4, N], dt.f32, G, [RT, N]), attr);
    const md = pd.queryMd('weights')!;
    expect(md.packed?.name).toBe('x4:p8k2');
    expect(md.toString()).toContain('x4:p8k2+q(s:bf16/m7/g1x5x1,z:u4/m7/g1x5x1)');
    // codes 10 x 4 = 40 -> 48; scales 2 blocks x 8 x 2 = 32; zero points 2 x 8 x 0.5 = 8 -> 16
    const sOff = 48, zOff = 80, panel = 96, panels = 2;
    expect(md.getSize(0)).toBe(G * panels * panel);
    const plain = Memory.create(memory.desc([G, K, N], dt.u4, tag.abc), eng);
    plain.write(Float64Array.from({ length: G * K * N }, (_, i) => (i * 7) % 16));
    const s = Memory.create(pd.queryMd('scales:weights')!, eng), z = Memory.create(pd.queryMd('zero_points:weights')!, eng);
    expect(s.desc.dims).toEqual([G, nkb, N]);
    const sv = Float64Array.from({ length: G * nkb * N }, (_, i) => 0.5 + i / 64), zv = Float64Array.from({ length: G * nkb * N }, (_, i) => (i * 5) % 16);
    s.write(sv);
    z.write(zv);
    const outs: Uint8Array[] = [];
    // The kernels' packing and the TypeScript one (an engine without kernels) write the same bytes.
    const bare = await Engine.create({ threads: 1, kernels: 'none' });
    try {
      for (const e of [eng, bare]) {
        const st = e === eng ? strm : new Stream(e);
        const cp = (m: Memory): Memory => Memory.create(m.desc, e).write(m.read());
        const [p2, s2, z2] = e === eng ? [plain, s, z] : [cp(plain), cp(s), cp(z)];
        const w = Memory.create(md, e);
        w.bytes().fill(0xee);
        new reorder.Primitive(new reorder.PrimitiveDesc(e, p2.desc, md)).execute(st, { [ARG.FROM]: p2, [ARG.TO]: w, [ARG.ATTR_SCALES | ARG.WEIGHTS]: s2, [ARG.ATTR_ZERO_POINTS | ARG.WEIGHTS]: z2 });
        await st.wait();
        outs.push(w.bytes().slice());
      }
    } finally {
      bare.release();
    }
    expect(Array.from(outs[1])).toEqual(Array.from(outs[0]));
    const out = outs[0];
    const bad: string[] = [];
    const want = (at: number, v: number, what: string): void => {
      if (out[at] !== v) bad.push(`${what} @${at}: ${out[at]} want ${v}`);
    };
    const bf16 = (x: number): number => new Uint16Array(new Float32Array([x]).buffer)[1]; // values are exact in bf16
    for (let g = 0; g < G; g++)
      for (let p = 0; p < panels; p++) {
        const base = (g * panels + p) * panel;
        for (let b = 40; b < 48; b++) want(base + b, 0, 'code padding');
        for (let kb = 0; kb < nkb; kb++)
          for (let q = 0; q < 8; q++) {
            const n = p * 8 + q, i = (g * nkb + kb) * N + n;
            const sc = n < N ? bf16(sv[i]) : 0x3f80, zp = n < N ? zv[i] : 0;
            want(base + sOff + (kb * 8 + q) * 2, sc & 0xff, `scale g${g} kb${kb} n${n} lo`);
            want(base + sOff + (kb * 8 + q) * 2 + 1, sc >> 8, `scale g${g} kb${kb} n${n} hi`);
            const zb = out[base + zOff + ((kb * 8 + q) >> 1)];
            if (((zb >> ((q & 1) * 4)) & 0xf) !== zp) bad.push(`zero point g${g} kb${kb} n${n}: ${(zb >> ((q & 1) * 4)) & 0xf} want ${zp}`);
          }
        for (let b = zOff + nkb * 4; b < panel; b++) want(base + b, 0, 'zero point padding');
      }
    expect(bad.slice(0, 6)).toEqual([]);
    [plain, s, z].forEach((m) => m.free());
  });

  it('bytes per weight stay what the recipe says: codes + scales in their stored type (w4k32 f32, MXFP4 e8m0, NVFP4 e4m3)', () => {
    const eng = engines[0];
    const [G, K, N] = [4, 2048, 1408];
    const bytes = (wdt: DataType, gK: number, sdt: DataType): number => {
      const attr = new PrimitiveAttr();
      attr.setScales(ARG.WEIGHTS, 7, [1, gK, 1], sdt);
      return new matmul.PrimitiveDesc(eng, memory.desc.grouped([4, K], dt.f32, G, [RT, K]), memory.desc([G, K, N], wdt, tag.any), memory.desc.grouped([4, N], dt.f32, G, [RT, N]), attr).queryMd('weights')!.getSize(0);
    };
    // K = 2048 and 8-column panels: no padding, so exactly codes + scales.
    expect(bytes(dt.s4, 32, dt.f32)).toBe(G * K * N * (0.5 + 4 / 32));
    expect(bytes(dt.f4_e2m1, 32, dt.e8m0)).toBe(G * K * N * (0.5 + 1 / 32));
    expect(bytes(dt.f4_e2m1, 16, dt.f8_e4m3)).toBe(G * K * N * (0.5 + 1 / 16));
    expect(bytes(dt.s8, 128, dt.bf16)).toBe(G * K * N * (1 + 2 / 128));
  });
});

describe('+q rules: the values go to the reorder, never twice', () => {
  let eng: Engine;
  let strm: Stream;
  beforeAll(async () => {
    eng = await Engine.create({ threads: 1, kernels: 'simd128' });
    strm = new Stream(eng);
  });
  afterAll(() => eng.release());
  const [G, K, N] = [3, 64, 20];
  const setup = (): { pd: matmul.PrimitiveDesc; plain: Memory; s: Memory; z: Memory; wei: Memory } => {
    const attr = new PrimitiveAttr();
    attr.setScales(ARG.WEIGHTS, 7, [1, 32, 1], dt.f32);
    attr.setZeroPoints(ARG.WEIGHTS, 5, [], dt.u8);
    const pd = new matmul.PrimitiveDesc(eng, memory.desc.grouped([4, K], dt.f32, G, [RT, K]), memory.desc([G, K, N], dt.u4, tag.any), memory.desc.grouped([4, N], dt.f32, G, [RT, N]), attr);
    const plain = Memory.create(memory.desc([G, K, N], dt.u4, tag.abc), eng);
    const s = Memory.create(pd.queryMd('scales:weights')!, eng), z = Memory.create(pd.queryMd('zero_points:weights')!, eng);
    return { pd, plain, s, z, wei: Memory.create(pd.queryMd('weights')!, eng) };
  };

  it('reorder into +q: missing scales / zero points, or values of the wrong shape, are invalid_arguments naming the argument', () => {
    const { plain, s, z, wei } = setup();
    const r = new reorder.Primitive(new reorder.PrimitiveDesc(eng, plain.desc, wei.desc));
    expect(new reorder.PrimitiveDesc(eng, plain.desc, wei.desc).implInfo).toBe('wasm:simd128:pack-x4p8k2q');
    expectDnnlError(() => r.execute(strm, { [ARG.FROM]: plain, [ARG.TO]: wei, [ARG.ATTR_ZERO_POINTS | ARG.WEIGHTS]: z }), 'invalid_arguments', /missing argument ARG\.ATTR_SCALES \| ARG\.WEIGHTS: ARG\.TO .* stores the weights' scales/);
    expectDnnlError(() => r.execute(strm, { [ARG.FROM]: plain, [ARG.TO]: wei, [ARG.ATTR_SCALES | ARG.WEIGHTS]: s }), 'invalid_arguments', /missing argument ARG\.ATTR_ZERO_POINTS \| ARG\.WEIGHTS/);
    const wrong = Memory.create(memory.desc([G, 4, N], dt.f32, tag.abc), eng); // K blocks of 16, not 32
    expectDnnlError(() => r.execute(strm, { [ARG.FROM]: plain, [ARG.TO]: wei, [ARG.ATTR_SCALES | ARG.WEIGHTS]: wrong, [ARG.ATTR_ZERO_POINTS | ARG.WEIGHTS]: z }), 'invalid_arguments', /ARG\.ATTR_SCALES \| ARG\.WEIGHTS descriptor .* does not match the scales ARG\.TO embeds \(mask 7, groups \[1,32,1\], f32\)/);
    const wrongDt = Memory.create(memory.desc([G, N], dt.s8, tag.ab), eng);
    expectDnnlError(() => r.execute(strm, { [ARG.FROM]: plain, [ARG.TO]: wei, [ARG.ATTR_SCALES | ARG.WEIGHTS]: s, [ARG.ATTR_ZERO_POINTS | ARG.WEIGHTS]: wrongDt }), 'invalid_arguments', /ARG\.ATTR_ZERO_POINTS \| ARG\.WEIGHTS descriptor .* does not match the zero points ARG\.TO embeds/);
    // Codes-only packed weights store none: values given to that reorder would be dropped.
    const codesMd = new matmul.PrimitiveDesc(eng, memory.desc.grouped([4, K], dt.f32, G, [RT, K]), memory.desc([G, K, N], dt.u4, tag.any), memory.desc.grouped([4, N], dt.f32, G, [RT, N])).queryMd('weights')!;
    const codes = Memory.create(codesMd, eng);
    expectDnnlError(() => new reorder.Primitive(new reorder.PrimitiveDesc(eng, plain.desc, codesMd)).execute(strm, { [ARG.FROM]: plain, [ARG.TO]: codes, [ARG.ATTR_SCALES | ARG.WEIGHTS]: s }), 'invalid_arguments', /ARG\.ATTR_SCALES \| ARG\.WEIGHTS was given but ARG\.TO .* stores no scales/);
    [plain, s, z, wei, wrong, wrongDt, codes].forEach((m) => m.free());
  });

  it('matmul on +q weights refuses the scales / zero points at execution (they are stored in the packed weights)', async () => {
    const { pd, plain, s, z, wei } = setup();
    new reorder.Primitive(new reorder.PrimitiveDesc(eng, plain.desc, wei.desc)).execute(strm, { [ARG.FROM]: plain, [ARG.TO]: wei, [ARG.ATTR_SCALES | ARG.WEIGHTS]: s, [ARG.ATTR_ZERO_POINTS | ARG.WEIGHTS]: z });
    const src = Memory.create(pd.queryMd('src')!, eng), dst = Memory.create(pd.queryMd('dst')!, eng, [undefined, src.handles[1]]);
    src.offsets.set([0, 1, 1, 4]);
    const prim = new matmul.Primitive(pd);
    const base = { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst };
    expectDnnlError(() => prim.execute(strm, { ...base, [ARG.ATTR_SCALES | ARG.WEIGHTS]: s }), 'invalid_arguments', /ARG\.ATTR_SCALES \| ARG\.WEIGHTS must not be given: the weights' scales are stored in the packed weights/);
    expectDnnlError(() => prim.execute(strm, { ...base, [ARG.ATTR_ZERO_POINTS | ARG.WEIGHTS]: z }), 'invalid_arguments', /ARG\.ATTR_ZERO_POINTS \| ARG\.WEIGHTS must not be given: the weights' zero points are stored in the packed weights/);
    prim.execute(strm, base);
    await strm.wait();
    [plain, s, z, wei, src, dst].forEach((m) => m.free());
  });

  it('an explicit +q descriptor must match the attr (type, mask, groups), and a codes-only one still takes runtime scales', () => {
    const { pd, wei } = setup();
    const srcMd = memory.desc.grouped([4, K], dt.f32, G, [RT, K]), dstMd = memory.desc.grouped([4, N], dt.f32, G, [RT, N]);
    const other = new PrimitiveAttr();
    other.setScales(ARG.WEIGHTS, 7, [1, 16, 1], dt.f32);
    other.setZeroPoints(ARG.WEIGHTS, 5, [], dt.u8);
    const e = expectDnnlError(() => new matmul.PrimitiveDesc(eng, srcMd, wei.desc, dstMd, other), 'unimplemented', /embed scales \/ zero points \(s:f32\/m7\/g1x32x1,z:u8\/m5\/g1x1x1\) that the attribute's .* \(s:f32\/m7\/g1x16x1,z:u8\/m5\/g1x1x1\) do not match/);
    expect(e).toBeInstanceOf(DnnlError);
    expectDnnlError(() => new matmul.PrimitiveDesc(eng, srcMd, wei.desc, dstMd), 'unimplemented', /do not match/);
    // The same +q descriptor with the same attr is accepted (e.g. a pd rebuilt from a saved layout).
    expect(new matmul.PrimitiveDesc(eng, srcMd, wei.desc, dstMd, pd.problem.attr).queryMd('weights')!.equals(wei.desc)).toBe(true);
    wei.free();
  });

  it('P#3: the experts\' scales are refused at execution when their weights embed them', async () => {
    const attr = new PrimitiveAttr();
    attr.setScales(ARG.MULTIPLE_WEIGHTS, 2, [], dt.f32);
    const Ks = [32, 48];
    const pd = new grouped_gemm.PrimitiveDesc(eng, Ks.map((k) => memory.desc([RT, k], dt.f32, tag.ab)), Ks.map((k) => memory.desc([k, N], dt.s8, tag.any)), Ks.map(() => memory.desc([RT, N], dt.f32, tag.ab)), memory.desc([2], dt.s32, tag.x), attr);
    const args: Record<number, Memory> = {};
    Ks.forEach((k, i) => {
      const plain = Memory.create(memory.desc([k, N], dt.s8, tag.ab), eng);
      const w = Memory.create(pd.queryMd('weights', i)!, eng);
      const sc = Memory.create(pd.queryMd('scales:weights', i)!, eng);
      sc.write(new Float32Array(N).fill(0.5));
      new reorder.Primitive(new reorder.PrimitiveDesc(eng, plain.desc, w.desc)).execute(strm, { [ARG.FROM]: plain, [ARG.TO]: w, [ARG.ATTR_SCALES | ARG.WEIGHTS]: sc });
      args[ARG.MULTIPLE_SRC + i] = Memory.create(memory.desc([RT, k], dt.f32, tag.ab), eng, Memory.create(memory.desc([2, k], dt.f32, tag.ab), eng).handles[0]);
      args[ARG.MULTIPLE_WEIGHTS + i] = w;
      args[ARG.MULTIPLE_DST + i] = Memory.create(memory.desc([RT, N], dt.f32, tag.ab), eng, Memory.create(memory.desc([2, N], dt.f32, tag.ab), eng).handles[0]);
      if (i === 1) args[ARG.ATTR_SCALES | (ARG.MULTIPLE_WEIGHTS + i)] = sc;
    });
    const dims = Memory.create(memory.desc([2], dt.s32, tag.x), eng);
    (dims.values as Int32Array).set([2, 1]);
    args[ARG.RUNTIME_DIMS] = dims;
    const prim = new grouped_gemm.Primitive(pd);
    expectDnnlError(() => prim.execute(strm, args), 'invalid_arguments', /ARG\.ATTR_SCALES \| \(?ARG\.MULTIPLE_WEIGHTS ?\+ ?1\)? must not be given: the weights' scales are stored in the packed weights/);
    delete args[ARG.ATTR_SCALES | (ARG.MULTIPLE_WEIGHTS + 1)];
    prim.execute(strm, args);
    await strm.wait();
  });
});

describe('+q SIMD decoders = the scalar ones, every code (subnormals, NaN, Inf)', () => {
  const JOB_DT: Record<string, number> = { f32: 0, bf16: 1, f16: 2, s8: 3, u8: 4, s4: 5, u4: 6, f8_e4m3: 7, s32: 10, e8m0: 11 };
  it.each([
    [dt.f16, 0, 65536], [dt.bf16, 0, 65536], [dt.f8_e4m3, 0, 256], [dt.e8m0, 0, 256], [dt.f32, 0, 4096],
    [dt.s8, 1, 256], [dt.u8, 1, 256], [dt.s4, 1, 16], [dt.u4, 1, 16], [dt.s32, 1, 4096],
  ] as const)('%s (zero point: %i)', async (t, zp, count) => {
    const eng = await Engine.create({ threads: 1, kernels: 'simd128' });
    try {
      const k = eng.kernels!;
      const bits = t === dt.f32 || t === dt.s32 ? 32 : t === dt.f16 || t === dt.bf16 ? 16 : t === dt.s4 || t === dt.u4 ? 4 : 8;
      const n = Math.max(count, 8);
      const inp = eng.alloc((n * bits) / 8), a = eng.alloc(4 * n), b = eng.alloc(4 * n);
      const bytes = new Uint8Array(eng.buffer, inp, (n * bits) / 8);
      // Every code of the type (4-bit: the 16 codes in 8-element groups; 32-bit: random bit patterns).
      if (bits === 32) {
        const u = new Uint32Array(eng.buffer, inp, n);
        let x = 12345;
        for (let i = 0; i < n; i++) u[i] = x = (Math.imul(x, 1103515245) + 12345) >>> 0;
        if (t === dt.f32) u.set([0x00000001, 0x007fffff, 0x7f800000, 0xff800000, 0x7fc00001, 0x80000000, 0x3f800000, 0x00800000]);
      } else if (bits === 16) new Uint16Array(eng.buffer, inp, n).forEach((_, i, arr) => (arr[i] = i));
      else if (bits === 8) bytes.forEach((_, i, arr) => (arr[i] = i));
      else bytes.forEach((_, i, arr) => (arr[i] = (2 * i) | ((2 * i + 1) << 4)));
      const dtCode = JOB_DT[t];
      k.check_decode(dtCode, inp, a, n); // load_any (exact as f32; s32 beyond 2^24 rounds like (float))
      k.check_decode_emb(dtCode, zp, inp, b, n);
      const want = new Uint32Array(eng.buffer, a, n), got = new Uint32Array(eng.buffer, b, n);
      const bad: string[] = [];
      for (let i = 0; i < n; i++) if (want[i] !== got[i]) bad.push(`element ${i}: ${got[i].toString(16)} want ${want[i].toString(16)}`);
      expect(bad.slice(0, 5)).toEqual([]);
    } finally {
      eng.release();
    }
  });
});

describe('+q on dense 2D and batched 3D matmuls', () => {
  it.each([
    ['2D, s4, f32 scales per 32 K', [5, 64], [64, 21], [5, 21], dt.s4, 3, [32, 1], dt.f32],
    ['2D, u8, zero points + bf16 scales per column', [1, 40], [40, 19], [1, 19], dt.u8, 2, [], dt.bf16],
    ['batched 3D, f4_e2m1, e8m0 per 32', [3, 4, 64], [3, 64, 17], [3, 4, 17], dt.f4_e2m1, 7, [1, 32, 1], dt.e8m0],
    ['batched 3D with broadcast weights [1, K, N], f8_e4m3, f8_e4m3 scales per 16', [2, 1, 48], [1, 48, 16], [2, 1, 16], dt.f8_e4m3, 6, [1, 16, 1], dt.f8_e4m3],
  ] as const)('%s: +q = plain weights with runtime scales, bitwise', async (_n, sd, wd, dd, wdt, mask, groups, sdt) => {
    for (const threads of [1, 3]) {
      const eng = await Engine.create({ threads, kernels: 'simd128' });
      const strm = new Stream(eng);
      try {
        const tg = (n: number): string => 'abc'.slice(0, n);
        const attr = new PrimitiveAttr();
        attr.setScales(ARG.WEIGHTS, mask, [...groups], sdt);
        const zp = wdt === dt.u8;
        if (zp) attr.setZeroPoints(ARG.WEIGHTS, mask, [], dt.u8);
        const srcMd = memory.desc([...sd], dt.f32, tg(sd.length)), dstMd = memory.desc([...dd], dt.f32, tg(dd.length));
        const plainMd = memory.desc([...wd], wdt, tg(wd.length));
        const pdQ = new matmul.PrimitiveDesc(eng, srcMd, memory.desc([...wd], wdt, tag.any), dstMd, attr);
        const pdP = new matmul.PrimitiveDesc(eng, srcMd, plainMd, dstMd, attr);
        expect(pdQ.queryMd('weights')!.packed?.quant?.scales).toBeDefined();
        const nW = wd.reduce((a: number, b: number) => a * b, 1);
        const plain = Memory.create(plainMd, eng).write(Float64Array.from({ length: nW }, (_, i) => [1, -2, 3, 0.5, -1.5, 4, 6, -0.5][(i * 5) % 8] * (wdt === dt.u8 ? 0 : 1) + (wdt === dt.u8 ? (i * 7) % 200 : 0)));
        const s = Memory.create(pdQ.queryMd('scales:weights')!, eng);
        s.write(Float64Array.from({ length: s.elementCount }, (_, i) => 2 ** ((i % 5) - 3)));
        const z = zp ? Memory.create(pdQ.queryMd('zero_points:weights')!, eng).write(Float64Array.from({ length: wd[wd.length - 1] }, (_, i) => (i * 13) % 50)) : undefined;
        const src = Memory.create(srcMd, eng).write(Float64Array.from({ length: sd.reduce((a: number, b: number) => a * b, 1) }, (_, i) => ((i * 3) % 11) / 4 - 1));
        const wq = Memory.create(pdQ.queryMd('weights')!, eng);
        new reorder.Primitive(new reorder.PrimitiveDesc(eng, plain.desc, wq.desc)).execute(strm, { [ARG.FROM]: plain, [ARG.TO]: wq, [ARG.ATTR_SCALES | ARG.WEIGHTS]: s, ...(z ? { [ARG.ATTR_ZERO_POINTS | ARG.WEIGHTS]: z } : {}) });
        const d1 = Memory.create(dstMd, eng), d2 = Memory.create(dstMd, eng);
        new matmul.Primitive(pdQ).execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wq, [ARG.DST]: d1 });
        new matmul.Primitive(pdP).execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: plain, [ARG.DST]: d2, [ARG.ATTR_SCALES | ARG.WEIGHTS]: s, ...(z ? { [ARG.ATTR_ZERO_POINTS | ARG.WEIGHTS]: z } : {}) });
        await strm.wait();
        const a = d1.read(), b = d2.read();
        expect(Array.from(b).some((v) => v !== 0)).toBe(true);
        const bad: number[] = [];
        for (let i = 0; i < a.length; i++) if (!Object.is(a[i], b[i])) bad.push(i);
        expect(bad.slice(0, 5), `${threads}T: ${bad.length} differ`).toEqual([]);
      } finally {
        eng.release();
      }
    }
  });
});
