/**
 * The prefill GEMM kernels on the gpu engine (SwiftShader in CI): `gemm-tiled`'s register tiles of
 * every size (gemm_threads.ts: 64 / 128 / 256 threads, 4 or 8 rows and 4 or 8 columns per thread) under
 * the fusions the MoE layer's GEMMs take (GLU of every layout, K-blocked 4-bit weights whose scales are
 * loaded once per slice or per element, zero points), and `gemm-tiled-dot4` (W8A8) with the row modes
 * (gather, scatter) and binding windows it now takes. Each case asserts the kernel that ran and
 * compares with a float64 reference.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  ARG, Memory, PrimitiveAttr, RUNTIME_DIM_VAL, Stream, algorithm, dt, matmul, memory, offsets, tag, type GpuEngine, type GpuMemory, type MemoryDesc,
} from '../src/index.js';
import { gpuKernelTuning } from '../src/primitives/matmul/webgpu_kernel_choice.js';
import { gemmThreadTuning } from '../src/kernels/wgsl/gemm_threads.js';
import { gpuEngine } from './gpu_helpers.js';
import { GM, expectClose, type GMCase } from './quant_helpers.js';
import { runGpuGM } from './gpu_quant_helpers.js';
import { mulberry32 } from './workloads.js';

let eng: GpuEngine;
let small: GpuEngine;
let strm: Stream;
beforeAll(async () => {
  eng = await gpuEngine();
  strm = new Stream(eng);
  small = await gpuEngine();
  small.limitBindingSize(16384);
});
afterAll(() => {
  eng?.release();
  small?.release();
});
const DEFAULT_TUNING = { ...gpuKernelTuning };
const DEFAULT_THREADS = { ...gemmThreadTuning };
afterEach(() => {
  Object.assign(gpuKernelTuning, DEFAULT_TUNING);
  Object.assign(gemmThreadTuning, DEFAULT_THREADS);
});

describe('gemm-tiled: register tiles of every size with the MoE GEMM fusions', () => {
  const s4 = { weiDt: dt.s4, scales: { weights: { gran: GM.weights.kBlock(32) } } } as const;
  const cases: ReadonlyArray<readonly [string, GMCase, RegExp]> = [
    // Mean rows 10: 16-row tiles, 64 threads (4 rows x 4 columns each).
    ['16-row tiles: f32 x s4 K-block 32 (scales once per slice), swiglu halves, empty experts', { G: 4, K: 64, N: 70, sizes: [12, 0, 20, 8], ...s4, glu: { alg: 'glu_swiglu', layout: 'halves' } }, /gemm-tiled-16x64[-+]/],
    // Mean rows 24 (MoE-B at T = 256): 32-row tiles, 128 threads.
    ['32-row tiles: f32 x u4 K-block 8 with u4 zero points (per element: 8 < BK), geglu interleaved, K not a multiple of the tile', { G: 3, K: 40, N: 46, sizes: [30, 19, 23], weiDt: dt.u4, scales: { weights: { gran: GM.weights.kBlock(8) } }, zps: { weights: { gran: GM.weights.kBlock(8), dt: dt.u4 } }, glu: { alg: 'glu_geglu_tanh', layout: 'interleaved' } }, /gemm-tiled-32x64[-+]/],
    ['64-row tiles: f32 x s8 per expert column scales and s8 zero points (once per slice), one expert takes every row', { G: 3, K: 37, N: 70, sizes: [0, 150, 0], weiDt: dt.s8, scales: { weights: { gran: GM.weights.expertCol } }, zps: { weights: { gran: GM.weights.expertCol, dt: dt.s8 } } }, /gemm-tiled-64x64[-+]/],
    // Mean rows 300, N >= 512: 128 x 128 tiles, 256 threads with 8 x 8 each.
    ['128-row tiles: f32 x s4 K-block 32, swiglu_oai blocks32, E = 1', { G: 1, K: 64, N: 512, sizes: [300], ...s4, glu: { alg: 'glu_swiglu_oai', layout: 'blocks32', alpha: 1.702, limit: 7 } }, /gemm-tiled-128x128[-+]/],
    ['bias and a binary add after the GLU (P2 offsets)', { G: 3, K: 32, N: 64, sizes: [9, 0, 40], proposal: 'P2', ...s4, bias: true, glu: { alg: 'glu_geglu_erf', layout: 'blocks32' }, ops: [{ kind: 'binary', alg: 'binary_add', shape: 'expert_n' }] }, /gemm-tiled-32x64[-+]/],
  ];
  it.each(cases)('%s', async (_n, c, kernel) => {
    const o = await runGpuGM(eng, strm, c);
    expect(o.pd.implInfo).toMatch(kernel);
    expectClose(o, 2e-5, 1e-5);
  });
  it('128-column tiles (8 columns per thread) with each GLU layout', async () => {
    gpuKernelTuning.tiledTn = 128;
    for (const layout of ['halves', 'interleaved', 'blocks32'] as const) {
      const o = await runGpuGM(eng, strm, { G: 3, K: 64, N: 192, sizes: [20, 0, 41], ...s4, glu: { alg: 'glu_swiglu', layout } });
      expect(o.pd.implInfo).toMatch(/gemm-tiled-32x128[-+]/);
      expectClose(o, 2e-5, 1e-5, `GLU ${layout}`);
    }
  });
  it('a second run gives the same bits', async () => {
    const c: GMCase = { G: 3, K: 64, N: 70, sizes: [30, 0, 41], ...s4, glu: { alg: 'glu_swiglu', layout: 'halves' } };
    const a = await runGpuGM(eng, strm, c), b = await runGpuGM(eng, strm, c);
    expect(Array.from(a.got)).toEqual(Array.from(b.got));
  });
});

describe('gemm-tiled staging: weights loaded in chunks of consecutive columns, register prefetch of the next slice', () => {
  const s4 = { weiDt: dt.s4, scales: { weights: { gran: GM.weights.kBlock(32) } } } as const;
  // implInfo names the staging (-ch<V>, -pf).
  const cases: ReadonlyArray<readonly [string, GMCase, RegExp, RegExp]> = [
    ['f32 weights in vec4 chunks, swiglu halves, empty expert, K and N not multiples of the tile',
      { G: 3, K: 40, N: 80, sizes: [30, 0, 41], glu: { alg: 'glu_swiglu', layout: 'halves' } }, /gemm-tiled-32x64-ch4-pf\+/, /gemm-tiled-32x64-ch4\+/],
    ['s4 words (8 nibbles), K-block 32 scales once per slice, blocks32 GLU, one expert takes every row',
      { G: 3, K: 64, N: 128, sizes: [0, 70, 0], ...s4, glu: { alg: 'glu_geglu_erf', layout: 'blocks32' } }, /gemm-tiled-32x64-ch8-pf\+/, /gemm-tiled-32x64-ch8\+/],
    ['u4 words with u4 K-block zero points, no GLU, E = 1, N not a multiple of the tile',
      { G: 1, K: 64, N: 72, sizes: [20], weiDt: dt.u4, scales: { weights: { gran: GM.weights.kBlock(32) } }, zps: { weights: { gran: GM.weights.kBlock(32), dt: dt.u4 } } },
      /gemm-tiled-32x64-ch8-pf\+/, /gemm-tiled-32x64-ch8\+/],
    ['s8 words, per expert column scales and s8 zero points, bias, K not a multiple of the tile',
      { G: 3, K: 37, N: 72, sizes: [50, 0, 70], weiDt: dt.s8, bias: true, scales: { weights: { gran: GM.weights.expertCol } }, zps: { weights: { gran: GM.weights.expertCol, dt: dt.s8 } } },
      /gemm-tiled-64x64-ch4-pf\+/, /gemm-tiled-64x64-ch4\+/],
    // 16-row tiles have 64 threads: four chunk rows each (four registers: still prefetched); K-block
    // 8 < BK loads the scales per element.
    ['u8 words, K-block 8 scales per element, 16-row tiles (four chunk rows per thread)',
      { G: 4, K: 48, N: 64, sizes: [12, 0, 20, 8], weiDt: dt.u8, scales: { weights: { gran: GM.weights.kBlock(8) } } }, /gemm-tiled-16x64-ch4-pf\+/, /gemm-tiled-16x64-ch4\+/],
    // 4-bit words and N >= 512 at ~24 rows per expert (MoE-B at T = 256): 128-column tiles.
    ['s4 words, N >= 512: 32 x 128 tiles (8 columns per thread), swiglu halves',
      { G: 2, K: 32, N: 512, sizes: [20, 25], ...s4, glu: { alg: 'glu_swiglu', layout: 'halves' } }, /gemm-tiled-32x128-ch8-pf\+/, /gemm-tiled-32x128-ch8\+/],
    ['s8 src x s4 weights: the integer GEMM stages i32 codes from words',
      { G: 3, K: 40, N: 64, sizes: [9, 0, 40], srcDt: dt.s8, weiDt: dt.s4, scales: { src: { gran: GM.src.expert }, weights: { gran: GM.weights.expertCol } } },
      /gemm-tiled-32x64-ch8-pf\+/, /gemm-tiled-32x64-ch8\+/],
  ];
  // The plain loop (prefetch off) compiles another kernel per case: run for f32, 4-bit and integer
  // staging only (CI time on SwiftShader).
  const loopToo = /^(f32 weights|s4 words \(8|s8 src)/;
  it.each(cases)('%s', async (name, c, withPrefetch, without) => {
    // f32 x f32 runs gemm-tiled-vec4 by default (row modes and GLU included): off, to test gemm-tiled's staging.
    gpuKernelTuning.vec4 = false;
    for (const prefetch of loopToo.test(name) ? [true, false] : [true]) {
      gemmThreadTuning.prefetch = prefetch;
      const o = await runGpuGM(eng, strm, c);
      expect(o.pd.implInfo).toMatch(prefetch ? withPrefetch : without);
      expectClose(o, 2e-5, 1e-5, prefetch ? 'prefetch' : 'no prefetch');
    }
  });
  it('a K slice of 32 (bench switch) shrinks where the tile would pass 16 KiB of workgroup memory', async () => {
    gpuKernelTuning.tiledBk = 32;
    const o = await runGpuGM(eng, strm, { G: 2, K: 64, N: 512, sizes: [20, 25], ...s4 });
    expect(o.pd.implInfo).toMatch(/gemm-tiled-32x128-ch8-pf\+/);
    expectClose(o, 2e-5, 1e-5);
  });
  it('strides that split a chunk (N not a multiple of 8, interleaved GLU) stage one element per load', async () => {
    for (const c of [{ G: 2, K: 64, N: 36, sizes: [20, 21], ...s4 }, { G: 2, K: 64, N: 64, sizes: [20, 21], ...s4, glu: { alg: 'glu_swiglu', layout: 'interleaved' } }] as GMCase[]) {
      const o = await runGpuGM(eng, strm, c);
      expect(o.pd.implInfo).toMatch(/gemm-tiled-32x64-pf\+/);
      expectClose(o, 2e-5, 1e-5);
    }
  });
  it('gather from 4-bit weights larger than one binding (windows of 16 KiB), padding rows read zeros', async () => {
    // Decode-sized (17 routed rows): pin the tiled family, which gemv-splitk would take.
    gpuKernelTuning.gemv = false;
    const T = 13, K = 64, N = 160, E = 4, KB = 32;
    const ti = [0, 3, 5, -1, 12, 1, 2, 4, 6, 7, 8, 9, 10, 11, -1, 0, 3], sizes = [4, 0, 11, 2], R = ti.length;
    expect((E * K * N) / 2).toBeGreaterThan(16384);
    const rng = mulberry32(5);
    const x = Float64Array.from({ length: T * K }, () => Math.fround(rng() * 2 - 1));
    const wq = Float64Array.from({ length: E * K * N }, () => Math.floor(rng() * 16) - 8);
    const sc = positive(rng, E * (K / KB) * N);
    const st = new Stream(small);
    const dstMd = memory.desc.grouped([R, N], dt.f32, E, [RUNTIME_DIM_VAL, N]);
    const attr = new PrimitiveAttr().setScales(ARG.WEIGHTS, 7, [1, KB, 1]).setGather();
    const weiMd = memory.desc([E, K, N], dt.s4, tag.abc);
    const pd = new matmul.PrimitiveDesc(small, plain([T, K]), weiMd, dstMd, attr);
    expect(pd.implInfo).toMatch(/gemm-tiled-16x64-ch8-pf\+/);
    const dst = Memory.create(dstMd, small);
    dst.writeOffsets(offsets.fromSizes(sizes));
    new matmul.Primitive(pd).execute(st, {
      [ARG.SRC]: f32(small, plain([T, K]), x), [ARG.WEIGHTS]: Memory.create(weiMd, small).write(wq), [ARG.DST]: dst,
      [ARG.ATTR_SCALES | ARG.WEIGHTS]: f32(small, plain([E, K / KB, N]), sc), [ARG.MOE_TOKEN_INDEX]: s32(small, ti),
    });
    await st.wait();
    const got = Float64Array.from(await dst.read());
    const want = new Float64Array(R * N);
    for (let i = 0, g = 0, end = sizes[0]; i < R; i++) {
      while (i >= end) end += sizes[++g];
      const t = ti[i];
      if (t < 0) continue;
      for (let n = 0; n < N; n++) {
        let acc = 0;
        for (let k = 0; k < K; k++) acc += x[t * K + k] * wq[(g * K + k) * N + n] * sc[(g * (K / KB) + Math.floor(k / KB)) * N + n];
        want[i * N + n] = acc;
      }
    }
    expectNear(got, want, 'chunked s4 gather in windows');
  });
});

describe('gemm-tiled: K-blocked weights scales / zero points held in registers, known at creation (weiKBlocks)', () => {
  // Each case runs twice: static hoists (the default) and the per-workgroup decision
  // (gpuKernelTuning.staticKBlocks off); the pipeline keys say which kernel ran (`:kb<wsc>.<wzp>`).
  const cases: ReadonlyArray<readonly [string, GMCase, string | undefined]> = [
    ['u4 chunks: scales K-block 32 and u4 zero points K-block 64 (different blocks), swiglu halves, one expert takes every row, N not a multiple of the tile',
      { G: 3, K: 128, N: 80, sizes: [0, 45, 0], weiDt: dt.u4, scales: { weights: { gran: GM.weights.kBlock(32) } }, zps: { weights: { gran: GM.weights.kBlock(64), dt: dt.u4 } }, glu: { alg: 'glu_swiglu', layout: 'halves' } }, ':kb32.64'],
    ['u4 chunks: scales K-block 32 held statically, u4 zero points K-block 8 decided per workgroup (per element)',
      { G: 2, K: 64, N: 64, sizes: [25, 20], weiDt: dt.u4, scales: { weights: { gran: GM.weights.kBlock(32) } }, zps: { weights: { gran: GM.weights.kBlock(8), dt: dt.u4 } } }, ':kb32.'],
    ['s4 chunks: 32 x 8 blocks (blocked along N too: one index per lane), E = 1',
      { G: 1, K: 64, N: 48, sizes: [27], weiDt: dt.s4, scales: { weights: { gran: GM.weights.block2d(32, 8) } } }, ':kb32.'],
    ['s4 one element per load (N not a multiple of 8): per-lane static hoists, empty expert',
      { G: 3, K: 96, N: 36, sizes: [20, 0, 21], weiDt: dt.s4, scales: { weights: { gran: GM.weights.kBlock(32) } } }, ':kb32.'],
    ['s8 chunks: K-block 16 = BK (a reload every slice), 64-row tiles',
      { G: 2, K: 48, N: 64, sizes: [70, 60], weiDt: dt.s8, scales: { weights: { gran: GM.weights.kBlock(16) } } }, ':kb16.'],
    ['u8 chunks: K-block 8 < BK stays per element (no static hoist)',
      { G: 2, K: 48, N: 64, sizes: [20, 25], weiDt: dt.u8, scales: { weights: { gran: GM.weights.kBlock(8) } } }, undefined],
  ];
  it.each(cases)('%s', async (_n, c, key) => {
    const spy = vi.spyOn(eng, 'pipeline');
    try {
      const a = await runGpuGM(eng, strm, c);
      const gemmKeys = spy.mock.calls.map((k) => k[0]).filter((k) => k.startsWith('gemm-tiled:'));
      if (key) expect(gemmKeys.some((k) => k.includes(key))).toBe(true);
      else expect(gemmKeys.some((k) => k.includes(':kb'))).toBe(false);
      expectClose(a, 2e-5, 1e-5, 'static');
      spy.mockClear();
      gpuKernelTuning.staticKBlocks = false;
      const b = await runGpuGM(eng, strm, c);
      expect(spy.mock.calls.map((k) => k[0]).filter((k) => k.startsWith('gemm-tiled:')).some((k) => k.includes(':kb'))).toBe(false);
      expect(Array.from(b.got)).toEqual(Array.from(a.got));
    } finally {
      spy.mockRestore();
    }
  });
});

describe('gemm-tiled: chunked integer codes to f32 by the 2^23 mantissa trick (bench switch magicDecode)', () => {
  it('gives the bits of the conversion for s4 / u4 / s8 / u8 codes, with zero points', async () => {
    for (const weiDt of [dt.s4, dt.u4, dt.s8, dt.u8]) {
      const c: GMCase = { G: 2, K: 64, N: 64, sizes: [20, 25], weiDt, scales: { weights: { gran: GM.weights.kBlock(32) } }, zps: { weights: { gran: GM.weights.expertCol, dt: weiDt === dt.s4 || weiDt === dt.u4 ? weiDt : dt.s8 } } };
      const spy = vi.spyOn(eng, 'pipeline');
      try {
        gemmThreadTuning.magicDecode = true;
        const a = await runGpuGM(eng, strm, c);
        expect(spy.mock.calls.some((k) => k[0].startsWith('gemm-tiled:') && k[0].endsWith(':dmagic')), weiDt).toBe(true);
        expectClose(a, 2e-5, 1e-5, `${weiDt} magic`);
        gemmThreadTuning.magicDecode = false;
        const b = await runGpuGM(eng, strm, c);
        expect(Array.from(a.got), weiDt).toEqual(Array.from(b.got));
      } finally {
        spy.mockRestore();
      }
    }
  });
});

const s32 = (e: GpuEngine, v: ArrayLike<number>): GpuMemory => Memory.create(memory.desc([v.length], dt.s32, tag.a), e).write(v);
const f32 = (e: GpuEngine, md: MemoryDesc, v: ArrayLike<number>): GpuMemory => Memory.create(md, e).write(v);
const plain = (dims: number[]): MemoryDesc => memory.desc(dims, dt.f32, dims.length === 1 ? tag.a : dims.length === 2 ? tag.ab : tag.abc);
const codes = (rng: () => number, n: number): Float64Array => Float64Array.from({ length: n }, () => Math.round(rng() * 254) - 127);
const positive = (rng: () => number, n: number): Float64Array => Float64Array.from({ length: n }, () => Math.fround(0.01 + rng() * 0.02));

/** float64 |got - want| <= 1e-5 |want| + 1e-6 (s8 codes: exact integer sums, f32 scales). */
function expectNear(got: ArrayLike<number>, want: ArrayLike<number>, what: string): void {
  const bad: string[] = [];
  for (let i = 0; i < want.length; i++) if (!(Math.abs(got[i] - want[i]) <= 1e-5 * Math.abs(want[i]) + 1e-6)) bad.push(`[${i}] got ${got[i]} want ${want[i]}`);
  expect(bad.slice(0, 6), `${what}: ${bad.length} of ${want.length} elements off`).toEqual([]);
}

describe('gemm-tiled-dot4 (W8A8) with row modes and binding windows', () => {
  // These shapes are decode-sized (17 rows over 4 experts): pin the tiled family, which gemv-splitk would take.
  beforeEach(() => { gpuKernelTuning.gemv = false; });
  // Tokens pick experts; routed rows sorted by expert; index -1 rows are padding.
  const T = 13, K = 70, N = 80, E = 4;
  const ti = [0, 3, 5, -1, 12, 1, 2, 4, 6, 7, 8, 9, 10, 11, -1, 0, 3];
  const sizes = [4, 0, 11, 2];
  const R = ti.length;
  const rng = mulberry32(21);
  const q = codes(rng, T * K), wq = codes(rng, E * K * N), tokSc = positive(rng, T), wSc = positive(rng, E * N);
  const expertOf = (i: number): number => { let e = 0, end = sizes[0]; while (i >= end) end += sizes[++e]; return e; };
  const dot = (t: number, g: number, n: number): number => { let s = 0; for (let k = 0; k < K; k++) s += q[t * K + k] * wq[(g * K + k) * N + n]; return s; };

  async function gather(e: GpuEngine): Promise<{ got: Float64Array; implInfo: string }> {
    const st = new Stream(e);
    const dstMd = memory.desc.grouped([R, N], dt.f32, E, [RUNTIME_DIM_VAL, N]);
    const attr = new PrimitiveAttr().setScales(ARG.SRC, 1).setScales(ARG.WEIGHTS, 5).setGather();
    const pd = new matmul.PrimitiveDesc(e, memory.desc([T, K], dt.s8, tag.ab), memory.desc([E, K, N], dt.s8, tag.abc), dstMd, attr);
    const dst = Memory.create(dstMd, e);
    dst.writeOffsets(offsets.fromSizes(sizes));
    new matmul.Primitive(pd).execute(st, {
      [ARG.SRC]: Memory.create(memory.desc([T, K], dt.s8, tag.ab), e).write(q), [ARG.WEIGHTS]: Memory.create(memory.desc([E, K, N], dt.s8, tag.abc), e).write(wq), [ARG.DST]: dst,
      [ARG.ATTR_SCALES | ARG.SRC]: f32(e, plain([T]), tokSc), [ARG.ATTR_SCALES | ARG.WEIGHTS]: f32(e, plain([E, N]), wSc), [ARG.MOE_TOKEN_INDEX]: s32(e, ti),
    });
    await st.wait();
    return { got: Float64Array.from(await dst.read()), implInfo: pd.implInfo };
  }
  const gatherRef = (): Float64Array => {
    const out = new Float64Array(R * N);
    for (let i = 0; i < R; i++) for (let n = 0; n < N; n++) {
      const t = ti[i], g = expertOf(i);
      out[i * N + n] = t < 0 ? 0 : dot(t, g, n) * tokSc[t] * wSc[g * N + n];
    }
    return out;
  };

  it('gather: per-token src scales follow the token, padding rows read zeros', async () => {
    const r = await gather(eng);
    expect(r.implInfo).toMatch(/gemm-tiled-dot4-16x64\+/);
    expectNear(r.got, gatherRef(), 'dot4 gather');
  });

  it('gather with weights larger than one binding (windows of 16 KiB)', async () => {
    expect(E * K * N).toBeGreaterThan(16384);
    const r = await gather(small);
    expect(r.implInfo).toMatch(/gemm-tiled-dot4-/);
    expectNear(r.got, gatherRef(), 'dot4 gather in windows');
  });

  for (const [dk, why] of [[undefined, 'the default for tiles of up to 32 rows'], [16, 'the switch dot4Bk']] as const) {
    const slice = dk ?? 64;
    it(`a ${slice}-deep K slice (${why}), K not a multiple of it: gather, and gather in windows`, async () => {
      gpuKernelTuning.dot4Bk = dk;
      for (const e of [eng, small]) {
        const spy = vi.spyOn(e, 'pipeline');
        try {
          const r = await gather(e);
          expect(spy.mock.calls.some((k) => new RegExp(`^gemm-tiled-dot4:gemm-tiled:grouped_m:(16|32)x\\d+x${slice}t`).test(k[0]))).toBe(true);
          expectNear(r.got, gatherRef(), `dot4 K slice ${slice}${e === small ? ' in windows' : ''}`);
        } finally {
          spy.mockRestore();
        }
      }
    });
  }

  it('scatter with the routing-weight binary_mul: dst row token * topK + slot, padding and unrouted rows untouched', async () => {
    const k = 2, SENT = -7;
    // Routed row i -> (token, slot); two rows of padding.
    const tok = [0, 2, 4, -1, 1, 3, 5, 6, 0, 1, 2, -1], ks = [0, 0, 0, -1, 0, 0, 0, 0, 1, 1, 1, -1];
    const sz = [4, 4, 0, 4], Rs = tok.length, Ts = 7;
    const x = codes(rng, Rs * K), rowSc = positive(rng, Rs), tw = positive(rng, Ts * k);
    const st = new Stream(eng);
    const srcMd = memory.desc.grouped([Rs, K], dt.s8, E, [RUNTIME_DIM_VAL, K]);
    const attr = new PrimitiveAttr().setScales(ARG.SRC, 1).setScales(ARG.WEIGHTS, 5).setScatter(k);
    attr.postOps.appendBinary(algorithm.binary_mul, plain([Ts * k, 1]));
    const pd = new matmul.PrimitiveDesc(eng, srcMd, memory.desc([E, K, N], dt.s8, tag.abc), plain([Ts * k, N]), attr);
    expect(pd.implInfo).toMatch(/gemm-tiled-dot4-/);
    const src = Memory.create(srcMd, eng).write(x).writeOffsets(offsets.fromSizes(sz));
    const out = f32(eng, plain([Ts * k, N]), new Float64Array(Ts * k * N).fill(SENT));
    new matmul.Primitive(pd).execute(st, {
      [ARG.SRC]: src, [ARG.WEIGHTS]: Memory.create(memory.desc([E, K, N], dt.s8, tag.abc), eng).write(wq), [ARG.DST]: out,
      [ARG.ATTR_SCALES | ARG.SRC]: f32(eng, plain([Rs]), rowSc), [ARG.ATTR_SCALES | ARG.WEIGHTS]: f32(eng, plain([E, N]), wSc),
      [ARG.ATTR_MULTIPLE_POST_OP(0) | ARG.SRC_1]: f32(eng, plain([Ts * k, 1]), tw), [ARG.MOE_TOKEN_INDEX]: s32(eng, tok), [ARG.MOE_TOKEN_KS]: s32(eng, ks),
    });
    await st.wait();
    const got = Float64Array.from(await out.read());
    const want = new Float64Array(Ts * k * N).fill(SENT);
    let end = 0, g = 0;
    for (let i = 0; i < Rs; i++) {
      while (i >= end + sz[g]) end += sz[g++];
      if (tok[i] < 0) continue;
      const d = tok[i] * k + ks[i];
      for (let n = 0; n < N; n++) {
        let s = 0;
        for (let kk = 0; kk < K; kk++) s += x[i * K + kk] * wq[(g * K + kk) * N + n];
        want[d * N + n] = s * rowSc[i] * wSc[g * N + n] * tw[d];
      }
    }
    expectNear(got, want, 'dot4 scatter');
  });
});
