/**
 * Dynamic int8 activations (`attr.setDynamicQuantization`, `:dq`, rfcs/0006) on the gpu engine (SwiftShader in
 * CI): the rows quantized on the device (the cpu's codes and scales bit for bit), then the integer GEMM. Checked
 * against the float64 model of the cpu tests (dynamic_int8_runner.ts) within the rounding of the float epilogue,
 * and against the cpu engine's `:dq`: s8 / u8 / s4 / u4 weights, per-column and K-block scales, bias, P#1 and
 * P#2, empty experts, one expert taking every row, E = 1, K and N off the tiles; rows past the last offset
 * never read (NaN there is no error); a NaN row and bad offsets raised at wait(); a second run, the same bits.
 */
import { describe, expect, it } from 'vitest';
import { ARG, DnnlError, Engine, GpuEngine, Memory, PrimitiveAttr, RUNTIME_DIM_VAL as RT, Stream, dt, matmul, memory, moe, tag } from '../src/index.js';
import { useGpuAndCpuEngines } from './gpu_test_engines.js';
import { dqIntData, dqIntReference, expectClose, runDqMatmul, type DqIntCase } from './dynamic_int8_runner.js';
import { mulberry32 } from './workloads.js';

let gpu: GpuEngine;
let cpu: Engine;
useGpuAndCpuEngines((g, c) => { gpu = g; cpu = c; });

/** A case; `capacity`: the rows src / dst hold (default: the sizes' sum; runDqMatmul). */
type Case = DqIntCase & { readonly capacity?: number };
const data = dqIntData;


/**
 * Two pairs of shapes, each pair on one kernel (SwiftShader compiles a pipeline per kernel, weights type and scales
 * kind, seconds each: the two shapes of a pair share it). The tiled GEMM's pair: 16 to 32 rows of capacity per
 * expert on average (32-row tiles), N not a multiple of 4. The gemv's pair: 4 rows of capacity per expert (its
 * 4-row tile, which compiles in about 60% of the 8-row one's time; src rows past the sizes NaN), N a multiple of 8
 * (its vector loads; the scalar ones take half again the time) but of no column tile.
 */
const TILED_SHAPES: [string, Pick<Case, 'E' | 'sizes' | 'K' | 'N' | 'capacity'>][] = [
  ['E = 5, a 70-row expert, an empty one, 1-row ones, K = 99, N = 21', { E: 5, sizes: [70, 0, 9, 1, 33], K: 99, N: 21 }],
  ['one expert takes all rows, K = 96, N = 19', { E: 4, sizes: [0, 0, 67, 0], K: 96, N: 19 }],
];
const GEMV_SHAPES: typeof TILED_SHAPES = [
  ['E = 1, 3 rows in 4 of capacity, K = 130, N = 24', { E: 1, sizes: [3], capacity: 4, K: 130, N: 24 }],
  ['decode: 1 row per expert in 4 of capacity, K = 256, N = 40', { E: 3, sizes: [1, 1, 1], capacity: 12, K: 256, N: 40 }],
];
const SHAPES = [...TILED_SHAPES, ...GEMV_SHAPES];

describe('dynamic int8 activations on the gpu engine (matmul :dq)', () => {
  // Each (weights type, scales) pair runs one pair of shapes: a type's per-column scales one, its K blocks the
  // other, alternating across types, so every shape meets every type once and both scale kinds twice. (s8
  // per-column on the gemv: the pipelines the NaN-row and bad-offsets test below takes too.)
  const cases = [dt.s8, dt.u8, dt.s4, dt.u4].flatMap((wdt, wi) => [0, 32].map((blk, bi) => {
    const tiled = (wi + bi) % 2 === 1;
    return [`${wdt}, ${blk ? `K-blocks of ${blk}` : 'per-column'} scales`, wdt, blk, tiled ? /\+gemm-tiled-/ : /\+gemv-splitk-r4-/, tiled ? TILED_SHAPES : GEMV_SHAPES] as const;
  }));
  it.each(cases)('%s: vs the quantization model and the cpu engine, P#1 and P#2', async (_n, wdt, blk, kernel, shapes) => {
    for (const [name, shape] of shapes) {
      for (const proposal of ['P1', 'P2'] as const) {
        const c: Case = { ...shape, K: blk ? Math.ceil(shape.K / blk) * blk : shape.K, wdt, blk, proposal, bias: blk !== 0 };
        const d = data(c, 7 + blk);
        const run = { ...c, ...d, scales: { data: d.sc, blk } };
        const g = await runDqMatmul(gpu, new Stream(gpu), run);
        expect(g.impl).toMatch(/^webgpu:dynamic-quant\+/);
        expect(g.impl, 'the kernel the pair of shapes shares').toMatch(kernel);
        expectClose(g.got, dqIntReference(c, d.x, d.w, d.sc, d.bias), `${name} ${proposal}`);
        const h = await runDqMatmul(cpu, new Stream(cpu), run);
        expectClose(g.got, h.got, `gpu vs cpu: ${name} ${proposal}`);
        if (proposal === 'P1') {
          // deterministic: a second run gives the same bits
          const again = await runDqMatmul(gpu, new Stream(gpu), run);
          expect(Array.from(new Uint32Array(again.got.buffer)), 'second run').toEqual(Array.from(new Uint32Array(g.got.buffer)));
        }
      }
    }
  });

  it('decode-like rows at K = 2048; a dense 2D matmul', async () => {
    for (const [wdt, blk] of [[dt.s8, 0], [dt.s4, 32]] as const) {
      const c: Case = { E: 4, sizes: [2, 1, 0, 2], K: 2048, N: 24, wdt, blk };
      const d = data(c, 5);
      const g = await runDqMatmul(gpu, new Stream(gpu), { ...c, ...d, scales: { data: d.sc, blk } });
      expectClose(g.got, dqIntReference(c, d.x, d.w, d.sc, undefined), `${wdt} blk ${blk}`);
    }
    // dense [1, K] x [K, N] (a decode step of one expert), per-column scales
    const K = 160, N = 40, c: Case = { E: 1, sizes: [1], K, N, wdt: dt.s8, blk: 0 };
    const d = data(c, 9);
    const attr = new PrimitiveAttr().setDynamicQuantization(ARG.SRC, dt.s8).setScales(ARG.WEIGHTS, 2);
    const pd = new matmul.PrimitiveDesc(gpu, memory.desc([1, K], dt.f32, tag.ab), memory.desc([K, N], dt.s8, tag.ab), memory.desc([1, N], dt.f32, tag.ab), attr);
    expect(pd.implInfo).toMatch(/^webgpu:dynamic-quant\+/);
    const strm = new Stream(gpu);
    const src = Memory.create(pd.queryMd('src')!, gpu).write(d.x), dst = Memory.create(pd.queryMd('dst')!, gpu);
    const wei = Memory.create(pd.queryMd('weights')!, gpu).write(d.w), sc = Memory.create(pd.queryMd('scales:weights')!, gpu).write(d.sc);
    new matmul.Primitive(pd).execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst, [ARG.ATTR_SCALES | ARG.WEIGHTS]: sc });
    await strm.wait();
    expectClose(await dst.read() as Float32Array, dqIntReference(c, d.x, d.w, d.sc, undefined), 'dense');
    [src, dst, wei, sc].forEach((m) => m.free());
  });

  it('MXFP4 / NVFP4 (f4_e2m1) weights: the cpu engine\'s :dq (bitwise the float64 model in dynamic_int8_fp4.test.ts)', async () => {
    const E2M1 = [0, 0.5, 1, 1.5, 2, 3, 4, 6, -0, -0.5, -1, -1.5, -2, -3, -4, -6];
    for (const [blk, sdt, shape] of [[32, dt.e8m0, SHAPES[0][1]], [16, dt.f8_e4m3, SHAPES[1][1]]] as const) {
      const r = mulberry32(blk);
      const { E, sizes, N } = shape, K = Math.ceil(shape.K / blk) * blk, T = sizes.reduce((a, b) => a + b, 0);
      const x = Float32Array.from({ length: T * K }, () => (r() * 2 - 1) * (r() < 0.05 ? 40 : 1));
      const w = Float64Array.from({ length: E * K * N }, (_, i) => E2M1[i < 16 ? i : Math.floor(r() * 16)]);
      // scales their type holds exactly: powers of two (e8m0), e4m3 normals
      const sc = Float32Array.from({ length: E * (K / blk) * N }, () => (sdt === dt.e8m0 ? 2 ** -(4 + Math.floor(r() * 8)) : (1 + Math.floor(r() * 8) / 8) * 2 ** -(2 + Math.floor(r() * 5))));
      for (const proposal of ['P1', 'P2'] as const) {
        const run = { E, sizes, K, N, proposal, x, w, wdt: dt.f4_e2m1, scales: { data: sc, blk, sdt } };
        const g = await runDqMatmul(gpu, new Stream(gpu), run);
        expect(g.impl).toMatch(/^webgpu:dynamic-quant\+/);
        const h = await runDqMatmul(cpu, new Stream(cpu), run);
        expectClose(g.got, h.got, `${sdt} ${proposal}`);
      }
    }
  });

  it('a 3D batched dense matmul [2, 9, 72] x [2, 72, 20], s8 weights per batch and column: the cpu engine\'s :dq', async () => {
    const r = mulberry32(11);
    const x = Float32Array.from({ length: 2 * 9 * 72 }, () => r() * 2 - 1), w = Float64Array.from({ length: 2 * 72 * 20 }, () => Math.floor(r() * 256) - 128);
    const sc = Float32Array.from({ length: 40 }, () => Math.fround(0.001 + r() * 0.02));
    const outs: Float32Array[] = [];
    for (const eng of [gpu, cpu] as const) {
      const attr = new PrimitiveAttr().setDynamicQuantization(ARG.SRC, dt.s8).setScales(ARG.WEIGHTS, 5);
      const pd = new matmul.PrimitiveDesc(eng, memory.desc([2, 9, 72], dt.f32, tag.abc), memory.desc([2, 72, 20], dt.s8, tag.abc), memory.desc([2, 9, 20], dt.f32, tag.abc), attr);
      if (eng === gpu) expect(pd.implInfo).toMatch(/^webgpu:dynamic-quant\+/);
      const strm = new Stream(eng);
      const src = Memory.create(pd.queryMd('src')!, eng).write(x), dst = Memory.create(pd.queryMd('dst')!, eng);
      const wei = Memory.create(pd.queryMd('weights')!, eng).write(w), s = Memory.create(pd.queryMd('scales:weights')!, eng).write(sc);
      new matmul.Primitive(pd).execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst, [ARG.ATTR_SCALES | ARG.WEIGHTS]: s });
      await strm.wait();
      outs.push(Float32Array.from(await dst.read()));
      [src, dst, wei, s].forEach((m) => m.free());
    }
    expectClose(outs[0], outs[1], 'batched');
  });

  /** A P#1 / P#2 :dq matmul of 2 experts, K = 64, N = 16, s8 weights of ones, per-column scales of one. */
  async function runRows(proposal: 'P1' | 'P2', x: Float32Array, offs: number[]): Promise<{ wait: Promise<void>; dst: Float32Array | undefined }> {
    const T = x.length / 64, p2 = proposal === 'P2';
    const attr = new PrimitiveAttr().setDynamicQuantization(ARG.SRC).setScales(ARG.WEIGHTS, 5);
    if (p2) attr.setGroupedOffsets(ARG.SRC, 2);
    const srcMd = p2 ? memory.desc([T, 64], dt.f32, tag.ab) : memory.desc.grouped([T, 64], dt.f32, 2, [RT, 64]);
    const dstMd = p2 ? memory.desc([T, 16], dt.f32, tag.ab) : memory.desc.grouped([T, 16], dt.f32, 2, [RT, 16]);
    const pd = new matmul.PrimitiveDesc(gpu, srcMd, memory.desc([2, 64, 16], dt.s8, tag.any), dstMd, attr);
    const strm = new Stream(gpu);
    const src = Memory.create(srcMd, gpu).write(x);
    const dst = Memory.create(dstMd, gpu, p2 ? undefined : [undefined, src.buffers[1]]);
    const wei = Memory.create(pd.queryMd('weights')!, gpu).write(new Float64Array(2 * 64 * 16).fill(1));
    const sc = Memory.create(pd.queryMd('scales:weights')!, gpu).write(new Float32Array(32).fill(1));
    const args = { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst, [ARG.ATTR_SCALES | ARG.WEIGHTS]: sc } as Record<number, ReturnType<typeof Memory.create>>;
    const o = p2 ? Memory.create(pd.queryMd('grouped_offsets')!, gpu).write(offs) : undefined;
    if (o) args[ARG.ATTR_GROUPED_OFFSETS | ARG.SRC] = o;
    else src.writeOffsets(offs);
    new matmul.Primitive(pd).execute(strm, args);
    const wait = strm.wait();
    const ok = await wait.then(() => true, () => false);
    const out = ok ? (await dst.read() as Float32Array).slice() : undefined;
    [src, dst, wei, sc, o].forEach((m) => m?.free());
    return { wait, dst: out };
  }

  it('rows past the last offset are not read (a NaN there is no error); a NaN row and bad offsets fail at wait()', async () => {
    for (const proposal of ['P1', 'P2'] as const) {
      const x = new Float32Array(8 * 64).fill(0.5);
      x.fill(Number.NaN, 6 * 64); // rows 6, 7: past offsets[2] = 6
      const ok = await runRows(proposal, x, [0, 2, 6]);
      await ok.wait;
      // every used row is 0.5 x 64 ones: q = 127 (s = 0.5 / 127), sum 127 * 64, times s
      for (let i = 0; i < 6 * 16; i++) expect(ok.dst![i], `${proposal} ${i}`).toBeCloseTo(32, 4);
      const nan = new Float32Array(8 * 64).fill(1);
      nan[3 * 64 + 5] = Number.NaN;
      await expect((await runRows(proposal, nan, [0, 4, 8])).wait).rejects.toThrow(/matmul\.execute: src row 3 has a NaN or infinite value/);
      const bad = await runRows(proposal, new Float32Array(8 * 64).fill(1), [0, 4, 9]);
      await expect(bad.wait).rejects.toBeInstanceOf(DnnlError);
      await expect(bad.wait).rejects.toThrow(/offsets/);
      const nonMonotonic = await runRows(proposal, new Float32Array(8 * 64).fill(1), [0, 5, 4]);
      await expect(nonMonotonic.wait).rejects.toThrow(/offsets/);
    }
  });

  it('the MoE layer takes dynamicQuantization s8 on the gpu engine and matches the cpu layer', async () => {
    const cfg = (eng: Engine | GpuEngine) => new moe.layer.PrimitiveDesc(eng, {
      tokens: 4, hidden: 64, intermediate: 24, experts: 3, topK: 2, dynamicQuantization: 's8',
      weights: { w13: memory.desc([3, 64, 48], dt.s8, tag.abc), w2: memory.desc([3, 24, 64], dt.s8, tag.abc) }, weightScales: { w13: { mask: 5 }, w2: { mask: 5 } },
    });
    const outs: Float32Array[] = [];
    for (const eng of [gpu, cpu] as const) {
      const pd = cfg(eng);
      if (eng === gpu) expect(pd.implInfo).toMatch(/webgpu:dynamic-quant/);
      const r = mulberry32(3);
      const mk = (what: string, f: () => number, n: number): ReturnType<typeof Memory.create> => Memory.create(pd.queryMd(what)!, eng).write(Float32Array.from({ length: n }, f));
      const hidden = mk('hidden', () => r() * 2 - 1, 4 * 64), logits = mk('logits', () => r() * 4, 4 * 3);
      const w13 = mk('w13', () => Math.floor(r() * 255) - 127, 3 * 64 * 48), w2 = mk('w2', () => Math.floor(r() * 255) - 127, 3 * 24 * 64);
      const s13 = Memory.create(memory.desc([3, 48], dt.f32, tag.ab), eng).write(new Float32Array(3 * 48).fill(0.01));
      const s2 = Memory.create(memory.desc([3, 64], dt.f32, tag.ab), eng).write(new Float32Array(3 * 64).fill(0.02));
      const dst = Memory.create(pd.queryMd('dst')!, eng);
      const strm = new Stream(eng);
      new moe.layer.Primitive(pd).execute(strm, {
        [ARG.SRC]: hidden, [ARG.MOE_ROUTER_LOGITS]: logits, [ARG.WEIGHTS]: w13, [ARG.WEIGHTS_1]: w2, [ARG.DST]: dst,
        [ARG.ATTR_SCALES | ARG.WEIGHTS]: s13, [ARG.ATTR_SCALES | ARG.WEIGHTS_1]: s2,
      });
      await strm.wait();
      outs.push(Float32Array.from(await dst.read()));
      [hidden, logits, w13, w2, s13, s2, dst].forEach((m) => m.free());
    }
    expectClose(outs[0], outs[1], 'gpu layer vs cpu layer');
  });
});
