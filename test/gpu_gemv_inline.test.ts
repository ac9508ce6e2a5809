/**
 * `gemv-splitk` with the schedule inside the kernel (decode sizes: no grouped-schedule dispatch, each
 * workgroup validates the runtime data and finds its tile from the offsets): against an independent
 * float64 expectation and bit for bit against the grouped-schedule path (gpuKernelTuning.gemvInline
 * off), over empty experts, one expert taking every row, E = 1, K / N not multiples of the tile, gather,
 * scatter, an expert map, zero-filled ungrouped rows, split K; bad offsets, row maps, duplicates and
 * expert maps raise the grouped-schedule path's message at wait() with dst untouched; above the caps
 * the grouped-schedule path runs.
 */
import { afterEach, describe, expect, it } from 'vitest';
import {
  ARG, DnnlError, Memory, PrimitiveAttr, RUNTIME_DIM_VAL, Stream, dt, matmul, memory, offsets, tag,
  type DataType, type GpuEngine, type GpuMemory, type MemoryDesc,
} from '../src/index.js';
import { GEMV_PREVIOUS_TUNING, gemvKSplitFor, gpuKernelTuning } from '../src/primitives/matmul/webgpu_kernel_choice.js';
import { useGpuEngine } from './gpu_test_engines.js';
import { expectBitwise, expectClose, gluExpected, type GluSpec, type Outcome } from './quant_helpers.js';
import { mulberry32 } from './workloads.js';

let eng: GpuEngine;
let strm: Stream;
useGpuEngine((e, s) => { eng = e; strm = s; });
const DEFAULT_TUNING = { ...gpuKernelTuning };
afterEach(() => Object.assign(gpuKernelTuning, DEFAULT_TUNING));

interface Case {
  readonly mode: 'plain' | 'gather' | 'scatter' | 'zero_fill';
  readonly K: number;
  /** GEMM columns (2 x dst columns with a GLU). */
  readonly N: number;
  /** Rows per group (gather / scatter: routed rows; token t slot s = the s-th row of token t in row order). */
  readonly sizes: readonly number[];
  /** Tokens (gather / scatter); topK = routed rows / tokens. */
  readonly T?: number;
  readonly map?: readonly number[];
  readonly lead?: number;
  readonly tail?: number;
  /** s4 weights with K-block 16 power-of-two scales. */
  readonly int4?: boolean;
  /** With int4: u4 codes (0..15) instead of s4 (codes masked in place: gemm_splitk_gemv.ts maskedU4). */
  readonly u4?: boolean;
  readonly glu?: GluSpec;
  readonly kPerThread?: number;
}

const SENTINEL = -7.25;
const plainMd = (dims: number[], t: DataType = dt.f32): MemoryDesc => memory.desc(dims, t, dims.length === 1 ? tag.a : dims.length === 2 ? tag.ab : tag.abc);
const groupedMd = (rows: number, cols: number, G: number): MemoryDesc => memory.desc.grouped([rows, cols], dt.f32, G, [RUNTIME_DIM_VAL, cols]);

/** One run of `c` with the in-kernel schedule on or off; dst over all its rows (rows never written: their previous value). */
async function runCase(c: Case, inline: boolean, tuning: Partial<typeof gpuKernelTuning> = {}): Promise<Outcome> {
  Object.assign(gpuKernelTuning, tuning);
  gpuKernelTuning.gemvInline = inline;
  if (c.kPerThread) gpuKernelTuning.kPerThread = c.kPerThread;
  const rng = mulberry32(11);
  const G = c.sizes.length, R = c.sizes.reduce((a, b) => a + b, 0);
  const { K, N } = c;
  const Nd = c.glu ? N / 2 : N;
  const E = c.map ? Math.max(...c.map) + 1 : G;
  const lead = c.lead ?? 0, tail = c.tail ?? 0;
  const gather = c.mode === 'gather', scatter = c.mode === 'scatter';
  const T = c.T ?? R;
  const k = R / T;
  // Routed row r: group of the offsets, token r % T, slot floor(r / T) (every (token, slot) pair once).
  const token = (r: number): number => r % T, slot = (r: number): number => Math.floor(r / T);
  const rows = lead + R + tail;
  const srcMd = gather ? plainMd([T, K]) : groupedMd(rows, K, G);
  const dstMd = scatter ? plainMd([T * k, Nd]) : groupedMd(rows, Nd, G);
  const weiMd = plainMd([E, K, N], c.int4 ? (c.u4 ? dt.u4 : dt.s4) : dt.f32);
  const attr = new PrimitiveAttr();
  if (gather) attr.setGather();
  if (scatter) attr.setScatter(k);
  if (c.mode === 'zero_fill') attr.setZeroFillUngroupedRows();
  if (c.map) attr.setExpertMap();
  if (c.int4) attr.setScales(ARG.WEIGHTS, 7, [1, 16, 1]);
  if (c.glu) attr.postOps.appendGlu(c.glu.alg, c.glu.layout);
  const pd = new matmul.PrimitiveDesc(eng, srcMd, weiMd, dstMd, attr);
  expect(pd.implInfo).toMatch(inline ? /^webgpu:gemv-splitk-.*\+inline-schedule$/ : /^webgpu:gemv-splitk-.*\+grouped-schedule$/);
  const prim = new matmul.Primitive(pd);
  const mems: GpuMemory[] = [];
  const mk = (md: MemoryDesc, v?: ArrayLike<number>): GpuMemory => { const m = Memory.create(md, eng); mems.push(m); if (v) m.write(v); return m; };
  try {
    const half = (n: number): Float64Array => Float64Array.from({ length: n }, () => (Math.floor(rng() * 17) - 8) / 2);
    const xs = half(srcMd.dims[0] * K);
    const ws = c.int4 ? Float64Array.from({ length: E * K * N }, () => Math.floor(rng() * 16) - (c.u4 ? 0 : 8)) : half(E * K * N);
    const sc = Float64Array.from({ length: E * (K / 16) * N }, () => [0.25, 0.5, 1, 2][Math.floor(rng() * 4)]);
    const prev = half(dstMd.dims[0] * Nd).map((v) => (scatter ? SENTINEL : v));
    const offs = offsets.fromSizes([...c.sizes]).map((o) => o + lead);
    const src = mk(srcMd, xs);
    if (!gather) src.writeOffsets(offs);
    // Plain grouped rows: dst shares src's offsets buffer; zero fill: a copy of its own (checked equal).
    const dst = c.mode === 'plain' ? Memory.create(dstMd, eng, [undefined, src.handles[1]]).write(prev) : Memory.create(dstMd, eng).write(prev);
    mems.push(dst);
    if (c.mode === 'gather' || c.mode === 'zero_fill') dst.writeOffsets(offs);
    const args: Record<number, GpuMemory> = { [ARG.SRC]: src, [ARG.WEIGHTS]: mk(weiMd, ws), [ARG.DST]: dst };
    if (gather || scatter) args[ARG.MOE_TOKEN_INDEX] = mk(plainMd([R], dt.s32), Array.from({ length: R }, (_, r) => token(r)));
    if (scatter) args[ARG.MOE_TOKEN_KS] = mk(plainMd([R], dt.s32), Array.from({ length: R }, (_, r) => slot(r)));
    if (c.map) args[ARG.MOE_EXPERT_MAP] = mk(plainMd([G], dt.s32), c.map);
    if (c.int4) args[ARG.ATTR_SCALES | ARG.WEIGHTS] = mk(pd.queryMd('scales:weights')!, sc);
    prim.execute(strm, args);
    await strm.wait();
    const got = Float64Array.from(await dst.read());
    const want = Float64Array.from(prev, (v) => Math.fround(v));
    if (c.mode === 'zero_fill') for (let r = 0; r < rows; r++) if (r < lead || r >= lead + R) want.fill(0, r * Nd, (r + 1) * Nd);
    let r = 0;
    c.sizes.forEach((n, g) => {
      const e = c.map ? c.map[g] : g;
      for (let j = 0; j < n; j++, r++) {
        const srcRow = gather ? token(r) : lead + r;
        const dstRow = scatter ? token(r) * k + slot(r) : lead + r;
        const col = (cn: number): number => {
          let acc = 0;
          for (let kk = 0; kk < K; kk++) acc += xs[srcRow * K + kk] * ws[(e * K + kk) * N + cn] * (c.int4 ? sc[(e * (K / 16) + Math.floor(kk / 16)) * N + cn] : 1);
          return Math.fround(acc);
        };
        for (let cn = 0; cn < Nd; cn++) want[dstRow * Nd + cn] = Math.fround(c.glu ? gluExpected(c.glu, N, cn, col) : col(cn));
      }
    });
    return { got, want, pd };
  } finally {
    prim.destroy();
    mems.forEach((m) => m.free());
  }
}

const CASES: ReadonlyArray<readonly [string, Case]> = [
  ['plain grouped rows: empty experts, K and N not multiples of the tile', { mode: 'plain', K: 37, N: 70, sizes: [3, 0, 5, 0, 1] }],
  ['plain grouped rows: one expert of four takes every row (several tiles), split K', { mode: 'plain', K: 90, N: 36, sizes: [0, 0, 11, 0], kPerThread: 2 }],
  ['E = 1', { mode: 'plain', K: 20, N: 44, sizes: [7] }],
  ['gather (gemm1), an expert map with repeats, empty groups', { mode: 'gather', T: 3, K: 24, N: 40, sizes: [2, 0, 3, 1], map: [2, 0, 2, 1] }],
  ['gather, int4 K-block 16 scales, GLU halves, split K (the layer\'s gemm1)', { mode: 'gather', T: 2, K: 64, N: 48, sizes: [1, 0, 2, 1], int4: true, glu: { alg: 'glu_swiglu', layout: 'halves' }, kPerThread: 2 }],
  ['scatter (gemm2): one expert takes every row, K split', { mode: 'scatter', T: 3, K: 50, N: 24, sizes: [0, 6, 0], kPerThread: 2 }],
  ['scatter, an expert map, odd N (scalar loads)', { mode: 'scatter', T: 4, K: 16, N: 30, sizes: [3, 2, 3], map: [1, 0, 0] }],
  ['zero-filled ungrouped rows before and after the groups, split K', { mode: 'zero_fill', K: 40, N: 32, sizes: [2, 0, 3], lead: 3, tail: 6, kPerThread: 2 }],
];

describe('gemv-splitk with the schedule inside the kernel: the float64 expectation, the grouped-schedule path\'s bits', () => {
  const cases = CASES;
  it.each(cases)('%s', async (_n, c) => {
    const a = await runCase(c, true);
    if (c.glu) expectClose(a);
    else expectBitwise(a);
    const b = await runCase(c, false);
    expect(Buffer.from(a.got.buffer).equals(Buffer.from(b.got.buffer))).toBe(true);
    // A second run gives the same bits.
    const again = await runCase(c, true);
    expect(Buffer.from(a.got.buffer).equals(Buffer.from(again.got.buffer))).toBe(true);
  });

  it('above the caps (257 groups, or 257 rows) the grouped-schedule dispatch runs', () => {
    const pdOf = (rows: number, G: number): string => new matmul.PrimitiveDesc(eng, groupedMd(rows, 8, G), plainMd([G, 8, 8]), groupedMd(rows, 8, G)).implInfo;
    expect(pdOf(256, 256)).toMatch(/\+inline-schedule$/);
    expect(pdOf(257, 257)).toMatch(/\+grouped-schedule$/);
    expect(pdOf(257, 64)).toMatch(/\+grouped-schedule$/);
  });
});

/**
 * The decode kernel's tunings (gpuKernelTuning: lanes per workgroup and so K slices in it, loads in
 * flight per thread, weight scales applied per K block, K slices aligned to the scale blocks, rows
 * per tile, K splits): exact arithmetic, so every one gives the float64 expectation's bits (a GLU:
 * within its bound), the same bits on a second run.
 */
describe('gemv-splitk tunings: the float64 expectation under every geometry', () => {
  const TUNINGS: ReadonlyArray<readonly [string, Partial<typeof gpuKernelTuning>]> = [
    ['the defaults (8 loads in flight: the long K slices run that loop)', {}],
    ['8 lanes, 16 loads in flight, block scales, aligned K, 1 row per tile', { gemvLanes: 8, gemvUnroll: 16, gemvBlockScale: true, gemvAlignK: true, gemvRows: 1 }],
    ['4 lanes, 8 loads in flight, 2 rows per tile, 3 K splits, block scales', { gemvLanes: 4, gemvUnroll: 8, gemvRows: 2, gemvKSplit: 3, gemvBlockScale: true }],
    ['64 lanes, 16 loads in flight, aligned K, 2 K splits', { gemvLanes: 64, gemvUnroll: 16, gemvAlignK: true, gemvKSplit: 2 }],
  ];
  const picks: ReadonlyArray<readonly [string, Case]> = [
    ...CASES.filter(([n]) => /^(plain grouped rows: empty|E = 1|gather, int4|scatter \(gemm2\)|zero-filled)/.test(n)),
    // K slices long enough for the 16-load loop, its 4-load and 1-load tails, several scale blocks per slice.
    ['long K slices: plain grouped rows, K = 300', { mode: 'plain', K: 300, N: 40, sizes: [2, 0, 3] }],
    ['long K slices: gather, int4 K-block 16 scales, K = 272', { mode: 'gather', T: 2, K: 272, N: 48, sizes: [1, 0, 2, 1], int4: true }],
    ['u4 K-block 16 scales (codes masked in place), plain grouped rows, K = 96, N = 80', { mode: 'plain', K: 96, N: 80, sizes: [2, 0, 1, 3], int4: true, u4: true }],
    ['u4 K-block 16 scales, gather, GLU halves, K = 272', { mode: 'gather', T: 2, K: 272, N: 64, sizes: [1, 0, 2, 1], int4: true, u4: true, glu: { alg: 'glu_swiglu', layout: 'halves' } }],
  ];
  it.each(TUNINGS.flatMap(([t, tune]) => picks.map(([n, c]) => [`${t}: ${n}`, c, tune] as const)))('%s', async (_n, c, tune) => {
    const a = await runCase(c, true, tune);
    if (c.glu) expectClose(a);
    else expectBitwise(a);
    const again = await runCase(c, true, tune);
    expect(Buffer.from(a.got.buffer).equals(Buffer.from(again.got.buffer))).toBe(true);
  });
});

describe('gemv-splitk with the schedule inside the kernel: bad runtime data raises the grouped-schedule path\'s error, dst untouched', () => {
  const T = 3, k = 2, K = 8, N = 8, G = 3;
  interface Bad { readonly offs: readonly number[]; readonly other?: readonly number[]; readonly ti?: readonly number[]; readonly ks?: readonly number[]; readonly map?: readonly number[] }
  /** Runs `mode` with the bad data on both paths: the messages and whether dst stayed untouched. */
  async function bad(mode: 'plain' | 'gather' | 'scatter', d: Bad): Promise<{ msg: string; untouched: boolean }[]> {
    const out: { msg: string; untouched: boolean }[] = [];
    for (const inline of [true, false]) {
      gpuKernelTuning.gemvInline = inline;
      const R = T * k;
      const attr = new PrimitiveAttr();
      if (mode === 'gather') attr.setGather();
      if (mode === 'scatter') attr.setScatter(k);
      if (d.map) attr.setExpertMap();
      const srcMd = mode === 'gather' ? plainMd([T, K]) : groupedMd(R, K, G), dstMd = mode === 'scatter' ? plainMd([T * k, N]) : groupedMd(R, N, G);
      const pd = new matmul.PrimitiveDesc(eng, srcMd, plainMd([G, K, N]), dstMd, attr);
      expect(pd.implInfo).toMatch(inline ? /\+inline-schedule$/ : /\+grouped-schedule$/);
      const src = Memory.create(srcMd, eng).write(new Float64Array(srcMd.dims[0] * K).fill(1));
      const dst = Memory.create(dstMd, eng).write(new Float64Array(dstMd.dims[0] * N).fill(-1));
      if (mode !== 'gather') src.writeOffsets(d.offs);
      if (mode !== 'scatter') dst.writeOffsets(mode === 'plain' ? d.other ?? d.offs : d.offs);
      const s32 = (v: readonly number[]): GpuMemory => Memory.create(plainMd([v.length], dt.s32), eng).write(v);
      const args: Record<number, GpuMemory> = { [ARG.SRC]: src, [ARG.WEIGHTS]: Memory.create(plainMd([G, K, N]), eng).write(new Float64Array(G * K * N).fill(0.5)), [ARG.DST]: dst };
      if (mode !== 'plain') args[ARG.MOE_TOKEN_INDEX] = s32(d.ti ?? [0, 1, 2, 0, 1, 2]);
      if (mode === 'scatter') args[ARG.MOE_TOKEN_KS] = s32(d.ks ?? [0, 0, 0, 1, 1, 1]);
      if (d.map) args[ARG.MOE_EXPERT_MAP] = s32(d.map);
      const prim = new matmul.Primitive(pd);
      prim.execute(strm, args);
      const err = await strm.wait().then(() => undefined, (e: unknown) => e);
      expect(err).toBeInstanceOf(DnnlError);
      out.push({ msg: (err as DnnlError).message, untouched: (await dst.read()).every((v) => v === -1) });
      prim.destroy();
      for (const m of Object.values(args)) m.free();
    }
    return out;
  }
  it.each([
    ['offsets[0] != 0', 'plain', { offs: [1, 2, 4, 6] }, /src offsets\[0\] must be 0, got 1/],
    ['non-monotonic offsets', 'plain', { offs: [0, 4, 2, 6] }, /non-decreasing: offsets\[2\] = 2 < offsets\[1\] = 4/],
    ['offsets beyond the capacity', 'scatter', { offs: [0, 2, 4, 7] }, /offsets\[3\] = 7 exceeds the total extent 6/],
    ['src and dst offsets differ', 'plain', { offs: [0, 2, 4, 6], other: [0, 3, 4, 6] }, /dst offsets must equal src offsets: dst offsets\[1\] = 3/],
    ['gather: token index out of range', 'gather', { offs: [0, 2, 4, 6], ti: [0, 1, 2, 3, 1, 2] }, /ARG.MOE_TOKEN_INDEX\[3\] = 3 is out of range \[-1, 3\)/],
    ['scatter: a padding row with a slot', 'scatter', { offs: [0, 2, 4, 6], ti: [0, 1, 2, -1, 1, 2], ks: [0, 0, 0, 1, 1, 1] }, /ARG.MOE_TOKEN_KS\[3\] = 1 must be -1 for a padding row/],
    ['scatter: a duplicate (token, slot) pair in another group', 'scatter', { offs: [0, 2, 4, 6], ti: [0, 1, 2, 0, 1, 0], ks: [0, 0, 0, 1, 1, 0] }, /routed row 5 scatters to dst row 0 \* 2 \+ 0, already written/],
    ['expert map entry out of range', 'gather', { offs: [0, 2, 4, 6], map: [0, 3, 1] }, /ARG.MOE_EXPERT_MAP\[1\] = 3 is out of range/],
  ] as const)('%s', async (_n, mode, d, msg) => {
    const [inl, sched] = await bad(mode, d);
    expect(inl.msg).toMatch(msg);
    expect(inl.msg).toBe(sched.msg);
    expect(inl.untouched).toBe(true);
    expect(sched.untouched).toBe(true);
  });
});

describe('gemv-splitk with the schedule inside the kernel: host-known per-group sizes', () => {
  it('offsets matching the descriptor\'s per-group dims run (the grouped-schedule path\'s bits); others raise its error, dst untouched', async () => {
    const K = 12, N = 20, G = 3, sizes = [2, 0, 4];
    const srcMd = memory.desc.grouped([6, K], dt.f32, G, [2, K, 0, K, 4, K]), dstMd = groupedMd(6, N, G), weiMd = plainMd([G, K, N]);
    const outcome: { got: number[]; msg: string; untouched: boolean }[] = [];
    for (const inline of [true, false]) {
      gpuKernelTuning.gemvInline = inline;
      const pd = new matmul.PrimitiveDesc(eng, srcMd, weiMd, dstMd);
      expect(pd.implInfo).toMatch(inline ? /\+inline-schedule$/ : /\+grouped-schedule$/);
      const prim = new matmul.Primitive(pd);
      const src = Memory.create(srcMd, eng).write(Float64Array.from({ length: 6 * K }, (_, i) => (i % 7) - 3)).writeOffsets(offsets.fromSizes(sizes));
      const wei = Memory.create(weiMd, eng).write(Float64Array.from({ length: G * K * N }, (_, i) => ((i * 5) % 9) / 4 - 1));
      const dst = Memory.create(dstMd, eng, [undefined, src.handles[1]]).write(new Float64Array(6 * N).fill(-1));
      const args = { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst };
      prim.execute(strm, args);
      await strm.wait();
      const got = Array.from(await dst.read());
      // Expert 0 rows 0..1, expert 2 rows 2..5.
      const want = Array.from({ length: 6 * N }, (_, i) => {
        const r = Math.floor(i / N), n = i % N, e = r < 2 ? 0 : 2;
        let acc = 0;
        for (let kk = 0; kk < K; kk++) acc += ((r * K + kk) % 7 - 3) * ((((e * K + kk) * N + n) * 5 % 9) / 4 - 1);
        return Math.fround(acc);
      });
      expect(got).toEqual(want);
      dst.write(new Float64Array(6 * N).fill(-1));
      src.writeOffsets([0, 3, 3, 6]);
      prim.execute(strm, args);
      const err = await strm.wait().then(() => undefined, (e: unknown) => e);
      expect(err).toBeInstanceOf(DnnlError);
      outcome.push({ got, msg: (err as DnnlError).message, untouched: (await dst.read()).every((v) => v === -1) });
      prim.destroy();
      [src, wei, dst].forEach((m) => m.free());
    }
    expect(outcome[0].msg).toMatch(/src offsets give group 0 3 rows but the descriptor's per-group dims say 2/);
    expect(outcome[0].msg).toBe(outcome[1].msg);
    expect(outcome[0].untouched && outcome[1].untouched).toBe(true);
    expect(outcome[0].got).toEqual(outcome[1].got);
  });
});

describe('gemv-splitk K splits: below gpuKernelTuning.gemvMinWorkgroups (128) workgroups only; the previous rule on request', () => {
  it('the defaults are session 10\'s decode geometry (reports/gemv5-h200.md); GEMV_PREVIOUS_TUNING the one before', () => {
    expect(gpuKernelTuning).toMatchObject({ gemvMinWorkgroups: 128, gemvLanes: undefined, gemvUnroll: 8, gemvRows: undefined, gemvBlockScale: false, gemvAlignK: false });
    expect(GEMV_PREVIOUS_TUNING).toMatchObject({ gemvMinWorkgroups: undefined, gemvLanes: 0, gemvUnroll: 4, gemvRows: 0 });
  });
  it('gemvKSplitFor: splits only to bring the grid to 128 workgroups, never past the K iterations per thread, at least 1', () => {
    // MoE-B int4 at T = 1 with 16 lanes: 22 column tiles x 8 tiles = 176 workgroups -> no split.
    expect(gemvKSplitFor(2048, 16, 22, 8, dt.u4)).toBe(1);
    // 88 workgroups -> 2 splits; one workgroup -> as many as K / (S x 32) allows.
    expect(gemvKSplitFor(2048, 16, 11, 8, dt.u4)).toBe(2);
    expect(gemvKSplitFor(2048, 16, 1, 1, dt.u4)).toBe(4);
    expect(gemvKSplitFor(2048, 32, 1, 1, dt.s8)).toBe(1);
    expect(gemvKSplitFor(64, 8, 1, 2, dt.u4)).toBe(1);
  });
  it('the previous rule (gemvMinWorkgroups unset): 4-bit weights aim at gemvTargetWorkgroups (512), the others K / (S x 64)', () => {
    gpuKernelTuning.gemvMinWorkgroups = undefined;
    // MoE-B int4 at T = 1: 11 column tiles x 8 tiles -> 5 splits; T = 4: 30 tiles -> 1.
    expect(gemvKSplitFor(2048, 8, 11, 8, dt.u4)).toBe(5);
    expect(gemvKSplitFor(2048, 8, 11, 30, dt.u4)).toBe(1);
    // Few columns: at most K / (S x 32) for 4-bit weights.
    expect(gemvKSplitFor(2048, 8, 1, 2, dt.u4)).toBe(8);
    expect(gemvKSplitFor(64, 8, 1, 2, dt.u4)).toBe(1);
    // 8-bit weights keep K / (S x 64) splits whatever the grid.
    expect(gemvKSplitFor(2048, 8, 22, 60, dt.s8)).toBe(4);
    gpuKernelTuning.gemvTargetWorkgroups = Infinity;
    expect(gemvKSplitFor(2048, 8, 11, 30, dt.u4)).toBe(8);
  });
  it('a MoE-B shaped int4 decode GEMM names its rows per tile and splits (pd only, nothing allocated)', () => {
    const pdOf = (T: number): string => {
      const M = 6 * T;
      const attr = new PrimitiveAttr().setScales(ARG.WEIGHTS, 7, [1, 32, 1], dt.f32);
      return new matmul.PrimitiveDesc(eng, groupedMd(M, 2048, 64), plainMd([64, 2048, 2816], dt.u4), groupedMd(M, 2816, 64), attr).implInfo;
    };
    // M <= G: one row per tile, no K split.
    expect(pdOf(1)).toBe('webgpu:gemv-splitk-r1-kg1-vec+inline-schedule');
    expect(pdOf(8)).toBe('webgpu:gemv-splitk-r1-kg1-vec+inline-schedule');
    expect(pdOf(16)).toBe('webgpu:gemv-splitk-r4-kg1-vec+inline-schedule');
    Object.assign(gpuKernelTuning, GEMV_PREVIOUS_TUNING);
    // 11 column tiles x at most 6 tiles (the schedule's exact bound; 8 before session 12) -> 512 / 66 -> 7 splits.
    expect(pdOf(1)).toBe('webgpu:gemv-splitk-r4-kg7-vec+inline-schedule');
    expect(pdOf(4)).toBe('webgpu:gemv-splitk-r4-kg1-vec+inline-schedule');
  });
});
