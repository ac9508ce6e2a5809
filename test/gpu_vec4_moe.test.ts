/**
 * `gemm-tiled-vec4` (the f32 prefill GEMM) with the MoE layer's row modes and fusions, against an
 * independent float64 expectation (SwiftShader in CI): the gather through the token index (-1 rows
 * read zeros), the scatter to token-order rows (-1 rows not written), groups mapped to experts,
 * zero-filled ungrouped rows, batched token counts, the fused GLU of every algorithm and layout,
 * binary / sum / eltwise post-ops, bias. Each case asserts which kernel ran. Shapes are small, so the
 * decode kernel (gemv-splitk, tested in gpu_gemv_moe.test.ts) is switched off unless a case says so.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  ARG, DnnlError, Memory, PrimitiveAttr, RUNTIME_DIM_VAL, Stream, dt, matmul, memory, offsets, tag,
  type DataType, type GluAlg, type GluLayout, type GpuEngine, type GpuMemory, type MemoryDesc,
} from '../src/index.js';
import { gpuKernelTuning } from '../src/primitives/matmul/webgpu_kernel_choice.js';
import { vec4ShapeTag, vec4Tuning } from '../src/kernels/wgsl/gemm_tiled_vec4.js';
import { useGpuEngine } from './gpu_test_engines.js';
import { ELTWISE, expectBitwise, expectClose, gluExpected, type GluSpec, type Outcome } from './quant_helpers.js';
import { mulberry32, type Rng } from './workloads.js';

let eng: GpuEngine;
let strm: Stream;
useGpuEngine((e, s) => { eng = e; strm = s; });
const DEFAULT_TUNING = { ...gpuKernelTuning };
beforeEach(() => { gpuKernelTuning.gemv = false; });
afterEach(() => Object.assign(gpuKernelTuning, DEFAULT_TUNING));

/** Post-ops after the GEMM (and GLU): relu, binary_mul by a per-dst-row src1, binary_add by a per-expert [G, 1, N] src1, sum. */
type Op = 'relu' | 'mul_row' | 'add_expert' | 'sum';

interface Case {
  readonly mode: 'gather' | 'scatter' | 'zero_fill' | 'plain';
  readonly T: number;
  readonly G: number;
  readonly k: number;
  readonly K: number;
  /** GEMM columns (2 x dst columns with a GLU). */
  readonly N: number;
  /** Group of token t's slot s (duplicates allowed: one routed row per slot); default random. */
  readonly pick?: (t: number, s: number) => number;
  /** Slots routed nowhere (another rank's expert): their scatter rows keep their contents. */
  readonly drop?: (t: number, s: number) => boolean;
  /** Padding rows (token -1) appended to these groups. */
  readonly pads?: readonly number[];
  /** Zero fill: rows in no group before the first and after the last group. */
  readonly lead?: number;
  readonly tail?: number;
  /** Group -> expert (attr.setExpertMap); weights then hold max + 1 experts. */
  readonly map?: readonly number[];
  readonly glu?: GluSpec;
  readonly bias?: boolean;
  readonly dstDt?: DataType;
  readonly ops?: readonly Op[];
  readonly seed?: number;
}

const halves = (rng: Rng, n: number): Float64Array => Float64Array.from({ length: n }, () => (Math.floor(rng() * 17) - 8) / 2);
const fromSet = (rng: Rng, n: number, set: readonly number[]): Float64Array => Float64Array.from({ length: n }, () => set[Math.floor(rng() * set.length)]);
const SENTINEL = -7.25;

interface Routed { readonly group: number; readonly token: number; readonly slot: number }

/** Routed rows sorted by group, then token, then slot; padding rows at the end of their group. */
function route(c: Case, rng: Rng): { rows: Routed[]; sizes: number[] } {
  const rows: Routed[] = [];
  for (let t = 0; t < c.T; t++) {
    for (let s = 0; s < c.k; s++) {
      if (c.drop?.(t, s)) continue;
      rows.push({ group: c.pick ? c.pick(t, s) : Math.floor(rng() * c.G), token: t, slot: s });
    }
  }
  for (const g of c.pads ?? []) rows.push({ group: g, token: -1, slot: -1 });
  rows.sort((a, b) => a.group - b.group || (a.token < 0 ? 1 : 0) - (b.token < 0 ? 1 : 0) || a.token - b.token || a.slot - b.slot);
  const sizes = new Array<number>(c.G).fill(0);
  rows.forEach((r) => sizes[r.group]++);
  return { rows, sizes };
}

const grouped = (rows: number, cols: number, G: number, t: DataType = dt.f32): MemoryDesc => memory.desc.grouped([rows, cols], t, G, [RUNTIME_DIM_VAL, cols]);
const plain = (dims: number[], t: DataType = dt.f32): MemoryDesc => memory.desc(dims, t, dims.length === 1 ? tag.a : dims.length === 2 ? tag.ab : tag.abc);

/** Builds, runs and checks one case; returns the outcome over the whole dst (rows never written: their previous value). */
async function runCase(c: Case): Promise<Outcome> {
  const rng = mulberry32(c.seed ?? 5);
  const { T, G, k, K, N } = c;
  const Nd = c.glu ? N / 2 : N;
  const E = c.map ? Math.max(...c.map) + 1 : G;
  const expertOf = (g: number): number => (c.map ? c.map[g] : g);
  const { rows, sizes } = route(c, rng);
  const R = rows.length;
  const lead = c.lead ?? 0, tail = c.tail ?? 0;
  const gather = c.mode === 'gather', scatter = c.mode === 'scatter';
  // Routed row i is src row i (scatter, zero fill, plain: lead + i) or token rows[i].token (gather).
  const srcRows = gather ? T : lead + R + tail;
  const dstRows = scatter ? T * k : lead + R + tail;
  const dstDt = c.dstDt ?? dt.f32;
  const srcMd = gather ? plain([T, K]) : grouped(srcRows, K, G);
  const dstMd = scatter ? plain([T * k, Nd], dstDt) : grouped(dstRows, Nd, G, dstDt);
  const weiMd = plain([E, K, N]);
  const attr = new PrimitiveAttr();
  if (gather) attr.setGather();
  if (scatter) attr.setScatter(k);
  if (c.mode === 'zero_fill') attr.setZeroFillUngroupedRows();
  if (c.map) attr.setExpertMap();
  if (c.glu) attr.postOps.appendGlu(c.glu.alg, c.glu.layout, c.glu.alpha, c.glu.limit);
  // Per expert as [G, 1, N]: [G, N] would read as per row where G equals the dst rows.
  const rowMd = plain([dstRows, 1]), colMd = plain([G, 1, Nd]);
  for (const op of c.ops ?? []) {
    if (op === 'relu') attr.postOps.appendEltwise('eltwise_relu', 0.25, 0);
    else if (op === 'sum') attr.postOps.appendSum(0.5);
    else attr.postOps.appendBinary(op === 'mul_row' ? 'binary_mul' : 'binary_add', op === 'mul_row' ? rowMd : colMd);
  }
  const biasMd = c.bias ? plain([E, N]) : undefined;
  const pd = biasMd ? new matmul.PrimitiveDesc(eng, srcMd, weiMd, biasMd, dstMd, attr) : new matmul.PrimitiveDesc(eng, srcMd, weiMd, dstMd, attr);
  const prim = new matmul.Primitive(pd);
  const mems: GpuMemory[] = [];
  const mk = (md: MemoryDesc, v?: ArrayLike<number>): GpuMemory => { const m = Memory.create(md, eng); mems.push(m); if (v) m.write(v); return m; };
  try {
    const x = halves(rng, srcRows * K);
    const w = halves(rng, E * K * N);
    const bias = halves(rng, E * N);
    const prev = halves(rng, dstRows * Nd).map((v) => (scatter ? SENTINEL : v));
    const offs = offsets.fromSizes(sizes).map((o) => o + lead);
    const src = mk(srcMd, x);
    const dst = mk(dstMd, prev);
    if (!scatter) dst.writeOffsets(offs);
    if (!gather) src.writeOffsets(offs);
    const args: Record<number, GpuMemory> = { [ARG.SRC]: src, [ARG.WEIGHTS]: mk(weiMd, w), [ARG.DST]: dst };
    if (biasMd) args[ARG.BIAS] = mk(biasMd, bias);
    const ti = Int32Array.from(rows, (r) => r.token), ks = Int32Array.from(rows, (r) => r.slot);
    if (gather || scatter) args[ARG.MOE_TOKEN_INDEX] = mk(plain([R], dt.s32), ti);
    if (scatter) args[ARG.MOE_TOKEN_KS] = mk(plain([R], dt.s32), ks);
    if (c.map) args[ARG.MOE_EXPERT_MAP] = mk(plain([G], dt.s32), c.map);
    const rowVals = fromSet(rng, dstRows, [-2, -1, -0.5, 0.5, 1, 2]), colVals = halves(rng, G * Nd);
    // Post-op j of the chain is post-op j + 1 of the attribute with a GLU (the GLU is post-op 0).
    (c.ops ?? []).forEach((op, j) => {
      if (op === 'mul_row' || op === 'add_expert') args[ARG.ATTR_MULTIPLE_POST_OP(j + (c.glu ? 1 : 0)) | ARG.SRC_1] = mk(op === 'mul_row' ? rowMd : colMd, op === 'mul_row' ? rowVals : colVals);
    });
    prim.execute(strm, args);
    await strm.wait();
    const got = Float64Array.from(await dst.read());
    // The expectation: start from the previous contents, compute every routed row's dst row.
    const want = Float64Array.from(prev, (v) => Math.fround(v));
    if (c.mode === 'zero_fill') for (let r = 0; r < dstRows; r++) if (r < lead || r >= lead + R) want.fill(0, r * Nd, (r + 1) * Nd);
    rows.forEach((r, i) => {
      const srcRow = gather ? r.token : lead + i;
      const dstRow = scatter ? r.token * k + r.slot : lead + i;
      if (scatter && r.token < 0) return;
      const e = expertOf(r.group);
      const col = (n: number): number => {
        let acc = 0;
        if (srcRow >= 0) for (let kk = 0; kk < K; kk++) acc += x[srcRow * K + kk] * w[(e * K + kk) * N + n];
        return Math.fround(acc + (c.bias ? bias[e * N + n] : 0));
      };
      for (let n = 0; n < Nd; n++) {
        let v = c.glu ? gluExpected(c.glu, N, n, col) : col(n);
        for (const op of c.ops ?? []) {
          if (op === 'relu') v = ELTWISE.eltwise_relu!(v, 0.25, 0);
          else if (op === 'sum') v += 0.5 * prev[dstRow * Nd + n];
          else if (op === 'mul_row') v *= rowVals[dstRow];
          else v += colVals[r.group * Nd + n];
        }
        want[dstRow * Nd + n] = Math.fround(v);
      }
    });
    return { got, want, pd };
  } finally {
    prim.destroy();
    mems.forEach((m) => m.free());
  }
}

/** Exact arithmetic (small halves): bit for bit; a GLU: within the tiled tests' bound. */
function check(c: Case, o: Outcome): void {
  if (c.glu) expectClose(o);
  else expectBitwise(o);
}

const ALGS: readonly GluAlg[] = ['glu_swiglu', 'glu_geglu_erf', 'glu_geglu_tanh', 'glu_swiglu_oai'];
const LAYOUTS: readonly GluLayout[] = ['halves', 'interleaved', 'blocks32'];
const V32 = /^webgpu:gemm-tiled-vec4-32x128\+grouped-schedule$/;

describe('gemm-tiled-vec4: gather (gemm1 of the layer)', () => {
  const cases: ReadonlyArray<readonly [string, Case, RegExp]> = [
    ['GLU halves + bias, empty experts, N not a multiple of the tile, duplicate (token, expert) slots', { mode: 'gather', T: 9, G: 6, k: 3, K: 36, N: 72, bias: true, glu: { alg: 'glu_swiglu', layout: 'halves' }, pick: (t, s) => (t === 1 ? 4 : (t + 2 * s) % 6 === 1 ? 3 : (t + 2 * s) % 6) }, V32],
    ['padding rows (-1) read zeros, bias', { mode: 'gather', T: 12, G: 3, k: 2, K: 24, N: 36, pads: [0, 2, 2], bias: true }, V32],
    ['one expert takes every row (several schedule tiles), E = 1', { mode: 'gather', T: 70, G: 1, k: 1, K: 20, N: 44, pick: () => 0 }, /gemm-tiled-vec4-128x128/],
    ['one expert of four takes every row, GLU interleaved', { mode: 'gather', T: 40, G: 4, k: 1, K: 16, N: 24, pick: () => 2, glu: { alg: 'glu_swiglu', layout: 'interleaved' } }, V32],
    ['groups mapped to experts (6 groups over 3 experts), bias, 64-row tiles', { mode: 'gather', T: 90, G: 6, k: 4, K: 20, N: 28, map: [2, 0, 1, 2, 0, 1], bias: true }, /gemm-tiled-vec4-64x128/],
  ];
  it.each(cases)('%s', async (_n, c, kernel) => {
    const o = await runCase(c);
    expect(o.pd.implInfo).toMatch(kernel);
    check(c, o);
  });
});

describe('gemm-tiled-vec4: the fused GLU, every algorithm and layout (gathered rows, bias, padding rows)', () => {
  const gluCase = (alg: GluAlg, layout: GluLayout): Case => ({
    mode: 'gather', T: 10, G: 3, k: 2, K: 20, N: layout === 'blocks32' ? 192 : 136, bias: true, pads: [1], glu: { alg, layout },
  });
  it.each(ALGS.flatMap((alg) => LAYOUTS.map((layout) => [alg, layout] as const)))('%s, %s', async (alg, layout) => {
    const o = await runCase(gluCase(alg, layout));
    expect(o.pd.implInfo).toMatch(V32);
    check(gluCase(alg, layout), o);
  });
  it('swiglu_oai clamping (alpha 1, limit 2), a dst tile across two 32-blocks (blocks32, N = 256)', async () => {
    const c: Case = { ...gluCase('glu_swiglu_oai', 'blocks32'), N: 256, glu: { alg: 'glu_swiglu_oai', layout: 'blocks32', alpha: 1, limit: 2 } };
    const o = await runCase(c);
    expect(o.pd.implInfo).toMatch(V32);
    check(c, o);
  });
  it('halves with N / 2 not a multiple of 4 (gate and up quads not vec4 loads): gemm-tiled', async () => {
    const c: Case = { ...gluCase('glu_swiglu', 'halves'), N: 68 };
    const o = await runCase(c);
    expect(o.pd.implInfo).toMatch(/gemm-tiled-\d/);
    check(c, o);
  });
});

describe('gemm-tiled-vec4: scatter (gemm2 of the layer)', () => {
  const cases: ReadonlyArray<readonly [string, Case, RegExp]> = [
    ['routing weights as binary_mul [T * k, 1], bias, empty experts', { mode: 'scatter', T: 12, G: 5, k: 2, K: 36, N: 72, bias: true, ops: ['mul_row'], pick: (t, s) => (t + 3 * s) % 5 === 1 ? 3 : (t + 3 * s) % 5 }, V32],
    ['routing weights, bias, an expert map (5 groups over 3 experts)', { mode: 'scatter', T: 12, G: 5, k: 2, K: 36, N: 72, bias: true, ops: ['mul_row'], map: [1, 1, 0, 2, 0] }, V32],
    ['padding rows not written; slots routed nowhere keep their contents; duplicate experts of a token', { mode: 'scatter', T: 16, G: 3, k: 3, K: 24, N: 32, pads: [0, 0, 2], drop: (t, s) => (t + s) % 4 === 0, pick: (t) => t % 3, ops: ['mul_row'] }, V32],
    ['relu, binary_add [G, 1, N], binary_mul [T * k, 1], sum 0.5 in order', { mode: 'scatter', T: 14, G: 4, k: 2, K: 40, N: 136, ops: ['relu', 'add_expert', 'mul_row', 'sum'] }, V32],
    ['E = 1, one expert takes every row (128-row tiles)', { mode: 'scatter', T: 150, G: 1, k: 1, K: 16, N: 20, pick: () => 0, ops: ['mul_row'] }, /gemm-tiled-vec4-128x128/],
  ];
  it.each(cases)('%s', async (_n, c, kernel) => {
    const o = await runCase(c);
    expect(o.pd.implInfo).toMatch(kernel);
    check(c, o);
  });
  it('with the decode kernel allowed, mean rows above its bound take vec4 (the layer at prefill sizes)', async () => {
    gpuKernelTuning.gemv = true;
    const c: Case = { mode: 'scatter', T: 40, G: 4, k: 2, K: 32, N: 40, ops: ['mul_row'], bias: true };
    const o = await runCase(c);
    expect(o.pd.implInfo).toMatch(V32);
    check(c, o);
  });
});

describe('gemm-tiled-vec4: zero-filled ungrouped rows, plain rows, batched counts', () => {
  it.each([
    ['rows before and after the groups, an empty expert, bf16 dst', { mode: 'zero_fill', T: 30, G: 3, k: 1, K: 20, N: 36, lead: 5, tail: 35, pick: (t: number) => (t === 0 ? 0 : 2), dstDt: dt.bf16 }],
    ['with a GLU (interleaved): zeros in the dst columns only', { mode: 'zero_fill', T: 20, G: 2, k: 2, K: 52, N: 40, lead: 5, tail: 1, glu: { alg: 'glu_swiglu', layout: 'interleaved' } }],
    ['plain grouped rows with a GLU (halves), relu and sum', { mode: 'plain', T: 30, G: 3, k: 1, K: 28, N: 48, glu: { alg: 'glu_geglu_tanh', layout: 'halves' }, ops: ['relu', 'sum'] }],
  ] as const)('%s', async (_n, c) => {
    const o = await runCase(c);
    expect(o.pd.implInfo).toMatch(V32);
    if (c.mode === 'zero_fill' && 'dstDt' in c) expectClose(o, 2 ** -8, 0);
    else check(c, o);
  });

  it('batched token counts: only the first counts[g] rows of each batch are read and written', async () => {
    const rng = mulberry32(13);
    const G = 4, C = 40, K = 36, N = 20;
    const counts = [3, 0, 40, 17];
    const x = halves(rng, G * C * K), w = halves(rng, G * K * N);
    for (let g = 0; g < G; g++) for (let i = counts[g]; i < C; i++) for (let kk = 0; kk < K; kk++) x[(g * C + i) * K + kk] = NaN; // never read
    const pd = new matmul.PrimitiveDesc(eng, plain([G, C, K]), plain([G, K, N]), plain([G, C, N]), new PrimitiveAttr().setBatchedTokenCounts());
    expect(pd.implInfo).toMatch(/^webgpu:gemm-tiled-vec4-64x128\+grouped-schedule$/);
    const mems = [Memory.create(plain([G, C, K]), eng).write(x), Memory.create(plain([G, K, N]), eng).write(w),
      Memory.create(plain([G, C, N]), eng).write(new Float64Array(G * C * N).fill(SENTINEL))];
    const cm = Memory.create(plain([G], dt.s32), eng).write(counts);
    const prim = new matmul.Primitive(pd);
    prim.execute(strm, { [ARG.SRC]: mems[0], [ARG.WEIGHTS]: mems[1], [ARG.DST]: mems[2], [ARG.MOE_EXPERT_NUM_TOKENS]: cm });
    await strm.wait();
    const got = Float64Array.from(await mems[2].read());
    const want = new Float64Array(G * C * N).fill(SENTINEL);
    for (let g = 0; g < G; g++) for (let i = 0; i < counts[g]; i++) for (let n = 0; n < N; n++) {
      let acc = 0;
      for (let kk = 0; kk < K; kk++) acc += x[(g * C + i) * K + kk] * w[(g * K + kk) * N + n];
      want[(g * C + i) * N + n] = Math.fround(acc);
    }
    expectBitwise({ got, want, pd });
    prim.destroy();
    [...mems, cm].forEach((m) => m.free());
  });
});

// The cases above run each tile's default form (unrolled K slices); these force the flat loop (its
// own B store: the interleaved GLU's split) and double-buffered slices.
describe.each([
  { bk: 8, doubleBuffer: true, smallRowsPerThread: 0, unroll: false, prefetch: true, aRowsFast: false, skipRows: true, tag: '32x128x8r2dbsrxb' },
  { bk: 16, doubleBuffer: false, smallRowsPerThread: 8, unroll: false, prefetch: false, aRowsFast: true, tag: '32x128x16r8nprfxb' },
  // 4 rows per thread (the GLU default): SwiftShader needs minutes to compile the unrolled 8-row GLU form.
  { bk: 8, doubleBuffer: true, smallRowsPerThread: 4, unroll: true, prefetch: true, aRowsFast: false, skipRows: true, hoistA: false, hoistB: false, tag: '32x128x8r4dbusrxaxb' },
] as const)('gemm-tiled-vec4 variant %o: row modes and fusions', ({ tag: t, ...v }) => {
  const saved = { ...vec4Tuning };
  beforeAll(() => { Object.assign(vec4Tuning, v, { wgBytes: 32768 }); });
  afterAll(() => { Object.assign(vec4Tuning, saved); });
  it('takes the forced form', () => {
    expect(vec4ShapeTag(32)).toBe(t);
  });
  it.each([
    ['gather + GLU interleaved + bias, padding rows', { mode: 'gather', T: 10, G: 3, k: 2, K: 44, N: 136, bias: true, pads: [1], glu: { alg: 'glu_swiglu', layout: 'interleaved' } }],
    ['scatter + routing weights + bias, padding rows', { mode: 'scatter', T: 12, G: 5, k: 2, K: 36, N: 72, bias: true, ops: ['mul_row'], pads: [2] }],
    ['zero fill of a GLU (blocks32)', { mode: 'zero_fill', T: 20, G: 2, k: 2, K: 52, N: 128, lead: 5, tail: 1, glu: { alg: 'glu_swiglu', layout: 'blocks32' }, seed: 3 }],
  ] as const)('%s', async (_n, c) => {
    const o = await runCase(c);
    expect(o.pd.implInfo).toMatch(V32);
    check(c, o);
  });
});

describe('gemm-tiled-vec4: the same bits on every run, bad runtime data raises what gemm-tiled raises', () => {
  it('a second run gives the same bits (gather, GLU)', async () => {
    const c: Case = { mode: 'gather', T: 12, G: 3, k: 2, K: 148, N: 72, glu: { alg: 'glu_geglu_erf', layout: 'halves' }, seed: 9 };
    const a = await runCase(c), b = await runCase(c);
    expect(a.pd.implInfo).toMatch(V32);
    expect(Buffer.from(a.got.buffer).equals(Buffer.from(b.got.buffer))).toBe(true);
  });

  /** Runs a gather or scatter with the given maps on vec4 and on gemm-tiled; returns the messages and whether dst stayed untouched. */
  async function bad(mode: 'gather' | 'scatter', ti: number[], ks: number[], map?: number[]): Promise<{ msg: string; untouched: boolean }[]> {
    const out: { msg: string; untouched: boolean }[] = [];
    for (const vec4 of [true, false]) {
      gpuKernelTuning.vec4 = vec4;
      const T = 3, k = 2, K = 8, N = 8, G = 2, R = ti.length;
      const attr = new PrimitiveAttr();
      if (mode === 'gather') attr.setGather(); else attr.setScatter(k);
      if (map) attr.setExpertMap();
      const srcMd = mode === 'gather' ? plain([T, K]) : grouped(R, K, G), dstMd = mode === 'gather' ? grouped(R, N, G) : plain([T * k, N]);
      const pd = new matmul.PrimitiveDesc(eng, srcMd, plain([G, K, N]), dstMd, attr);
      expect(pd.implInfo).toMatch(vec4 ? /gemm-tiled-vec4/ : /gemm-tiled-\d/);
      const src = Memory.create(srcMd, eng).write(new Float64Array(srcMd.dims[0] * K).fill(1));
      const dst = Memory.create(dstMd, eng).write(new Float64Array(dstMd.dims[0] * N).fill(-1));
      const offs = offsets.fromSizes([R - 1, 1]);
      if (mode === 'gather') dst.writeOffsets(offs); else src.writeOffsets(offs);
      const s32 = (v: number[]): GpuMemory => Memory.create(plain([v.length], dt.s32), eng).write(v);
      const args: Record<number, GpuMemory> = { [ARG.SRC]: src, [ARG.WEIGHTS]: Memory.create(plain([G, K, N]), eng).write(new Float64Array(G * K * N).fill(0.5)), [ARG.DST]: dst, [ARG.MOE_TOKEN_INDEX]: s32(ti) };
      if (mode === 'scatter') args[ARG.MOE_TOKEN_KS] = s32(ks);
      if (map) args[ARG.MOE_EXPERT_MAP] = s32(map);
      const prim = new matmul.Primitive(pd);
      prim.execute(strm, args);
      const err = await strm.wait().then(() => undefined, (e: unknown) => e);
      expect(err).toBeInstanceOf(DnnlError);
      out.push({ msg: (err as DnnlError).message, untouched: (await dst.read()).every((v) => v === -1) });
      prim.destroy();
    }
    return out;
  }
  it.each([
    ['gather: token index out of range', 'gather', [0, 3, 1], [], undefined, /ARG.MOE_TOKEN_INDEX\[1\] = 3 is out of range \[-1, 3\)/],
    ['scatter: slot out of range', 'scatter', [0, 2, 1], [0, 2, 1], undefined, /ARG.MOE_TOKEN_KS\[1\] = 2 is out of range/],
    ['scatter: a duplicate (token, slot) pair', 'scatter', [0, 1, 0], [1, 0, 1], undefined, /routed row 2 scatters to dst row 0 \* 2 \+ 1/],
    ['expert map entry out of range', 'gather', [0, 1, 2], [], [0, 5], /ARG.MOE_EXPERT_MAP\[1\] = 5 is out of range/],
  ] as const)('%s', async (_n, mode, ti, ks, map, msg) => {
    const [v, t] = await bad(mode, [...ti], [...ks], map ? [...map] : undefined);
    expect(v.msg).toMatch(msg);
    expect(v.msg).toBe(t.msg);
    expect(v.untouched && t.untouched).toBe(true);
  });
});
