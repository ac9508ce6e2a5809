/**
 * `gemv-splitk` (the decode grouped GEMM) with the MoE layer's row modes and fusions, against an
 * independent float64 expectation (SwiftShader in CI): the gather through the token index (-1 rows
 * read zeros), the scatter to token-order rows (-1 rows not written), groups mapped to experts,
 * zero-filled ungrouped rows, the fused GLU of every algorithm and layout, binary / sum post-ops, src
 * scales (float src), weight scales, K split across workgroups. Each case asserts that gemv-splitk
 * ran; bad runtime data raises the same DnnlError as gemm-tiled, with nothing written.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  ARG, DnnlError, Memory, PrimitiveAttr, RUNTIME_DIM_VAL, Stream, dt, matmul, memory, offsets, tag,
  type DataType, type GluAlg, type GluLayout, type GpuEngine, type GpuMemory, type MemoryDesc,
} from '../src/index.js';
import { GEMV_PREVIOUS_TUNING, gpuKernelTuning } from '../src/primitives/matmul/webgpu_kernel_choice.js';
import { useGpuEngine } from './gpu_test_engines.js';
import { GM, ELTWISE, expectBitwise, expectClose, gluExpected, type GluSpec, type Outcome } from './quant_helpers.js';
import { runGpuGM } from './gpu_quant_helpers.js';
import { mulberry32, type Rng } from './workloads.js';

let eng: GpuEngine;
let strm: Stream;
useGpuEngine((e, s) => { eng = e; strm = s; });
const DEFAULT_TUNING = { ...gpuKernelTuning };
afterEach(() => Object.assign(gpuKernelTuning, DEFAULT_TUNING));

/** Post-ops after the GEMM (and GLU): relu, binary_mul by a per-dst-row src1, binary_add by a per-expert [G, 1, N] src1, sum. */
type Op = 'relu' | 'mul_row' | 'add_expert' | 'sum';

interface Case {
  readonly mode: 'gather' | 'scatter' | 'zero_fill';
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
  readonly weiDt?: DataType;
  /** s8 / u8 src (W8A8 with srcScale and per-column weight scales: the integer GEMM). */
  readonly srcDt?: DataType;
  /** Weight scales: per expert column, or K blocks of this size. */
  readonly wScale?: 'col' | number;
  /** Per-row src scales (gather: per token). */
  readonly srcScale?: boolean;
  readonly ops?: readonly Op[];
  /** Forces K splits across workgroups (gpuKernelTuning.kPerThread). */
  readonly kPerThread?: number;
  readonly seed?: number;
}

const halves = (rng: Rng, n: number): Float64Array => Float64Array.from({ length: n }, () => (Math.floor(rng() * 17) - 8) / 2);
const fromSet = (rng: Rng, n: number, set: readonly number[]): Float64Array => Float64Array.from({ length: n }, () => set[Math.floor(rng() * set.length)]);
const ints = (lo: number, hi: number): number[] => Array.from({ length: hi - lo + 1 }, (_, i) => lo + i);
/** Values exact in `t` and small enough for exact f32 sums. */
const codes = (t: DataType, rng: Rng, n: number): Float64Array =>
  t === dt.s8 ? fromSet(rng, n, ints(-6, 6)) : t === dt.u8 ? fromSet(rng, n, ints(0, 12)) : t === dt.s4 ? fromSet(rng, n, [-8, -5, -3, -1, 0, 1, 2, 4, 7]) : halves(rng, n);
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
  if (c.kPerThread) gpuKernelTuning.kPerThread = c.kPerThread;
  const rng = mulberry32(c.seed ?? 5);
  const { T, G, k, K, N } = c;
  const Nd = c.glu ? N / 2 : N;
  const E = c.map ? Math.max(...c.map) + 1 : G;
  const expertOf = (g: number): number => (c.map ? c.map[g] : g);
  const { rows, sizes } = route(c, rng);
  const R = rows.length;
  const lead = c.lead ?? 0, tail = c.tail ?? 0;
  const gather = c.mode === 'gather', scatter = c.mode === 'scatter';
  // Routed row i is src row i (scatter, zero fill: lead + i) or token rows[i].token (gather).
  const srcRows = gather ? T : lead + R + tail;
  const dstRows = scatter ? T * k : lead + R + tail;
  const srcDt = c.srcDt ?? dt.f32;
  const srcMd = gather ? plain([T, K], srcDt) : grouped(srcRows, K, G, srcDt);
  const dstMd = scatter ? plain([T * k, Nd]) : grouped(dstRows, Nd, G);
  const weiDt = c.weiDt ?? dt.f32;
  const weiMd = plain([E, K, N], weiDt);
  const attr = new PrimitiveAttr();
  if (gather) attr.setGather();
  if (scatter) attr.setScatter(k);
  if (c.mode === 'zero_fill') attr.setZeroFillUngroupedRows();
  if (c.map) attr.setExpertMap();
  if (c.srcScale) attr.setScales(ARG.SRC, 1);
  if (c.wScale === 'col') attr.setScales(ARG.WEIGHTS, GM.weights.expertCol.mask);
  else if (c.wScale) attr.setScales(ARG.WEIGHTS, 7, [1, c.wScale, 1]);
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
  expect(pd.implInfo).toMatch(/^webgpu:gemv-splitk-/);
  const prim = new matmul.Primitive(pd);
  const mems: GpuMemory[] = [];
  const mk = (md: MemoryDesc, v?: ArrayLike<number>): GpuMemory => { const m = Memory.create(md, eng); mems.push(m); if (v) m.write(v); return m; };
  try {
    const x = codes(srcDt, rng, srcRows * K);
    const w = codes(weiDt, rng, E * K * N);
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
    const scale = (md: MemoryDesc | undefined): Float64Array => fromSet(rng, md ? md.dims.reduce((a, b) => a * b, 1) : 0, [0.25, 0.5, 1, 2, 4]);
    const ssMd = pd.queryMd('scales:src'), wsMd = pd.queryMd('scales:weights');
    const ss = scale(ssMd), ws = scale(wsMd);
    if (c.srcScale) { expect(ssMd!.dims).toEqual([srcRows]); args[ARG.ATTR_SCALES | ARG.SRC] = mk(ssMd!, ss); }
    if (c.wScale) args[ARG.ATTR_SCALES | ARG.WEIGHTS] = mk(wsMd!, ws);
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
    const wScaleAt = (e: number, kk: number, n: number): number =>
      c.wScale === 'col' ? ws[e * N + n] : c.wScale ? ws[(e * (K / c.wScale) + Math.floor(kk / c.wScale)) * N + n] : 1;
    rows.forEach((r, i) => {
      const srcRow = gather ? r.token : lead + i;
      const dstRow = scatter ? r.token * k + r.slot : lead + i;
      if (scatter && r.token < 0) return;
      const e = expertOf(r.group);
      const col = (n: number): number => {
        let acc = 0;
        if (srcRow >= 0) for (let kk = 0; kk < K; kk++) acc += x[srcRow * K + kk] * (c.srcScale ? ss[srcRow] : 1) * w[(e * K + kk) * N + n] * wScaleAt(e, kk, n);
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

/** Exact arithmetic (small halves, power-of-two scales): bit for bit; a GLU: within the tiled tests' bound. */
function check(c: Case, o: Outcome): void {
  if (c.glu) expectClose(o);
  else expectBitwise(o);
}

const ALGS: readonly GluAlg[] = ['glu_swiglu', 'glu_geglu_erf', 'glu_geglu_tanh', 'glu_swiglu_oai'];
const LAYOUTS: readonly GluLayout[] = ['halves', 'interleaved', 'blocks32'];

/**
 * Every case runs under two geometries: the previous one (32 lanes / 16 for f32, 4 rows per tile,
 * the previous K splits), whose kernel names the cases pin, and the defaults (session 10's: gemvDecodeLanes,
 * rows per tile 1 where M <= G, 8 loads in flight, K splits only below 128 workgroups): the same
 * expectations, gemv-splitk named.
 */
for (const [geometry, tuning, pin] of [['previous geometry', GEMV_PREVIOUS_TUNING, true], ['default geometry', {}, false]] as const) {
  describe(geometry, () => {
    beforeEach(() => Object.assign(gpuKernelTuning, tuning));
    const impl = (o: { pd: { implInfo: string } }, kernel: RegExp): void => { expect(o.pd.implInfo).toMatch(pin ? kernel : /^webgpu:gemv-splitk-/); };

    describe('gemv-splitk: gather (gemm1 of the layer)', () => {
      const cases: ReadonlyArray<readonly [string, Case, RegExp]> = [
        ['empty experts, K and N not multiples of the tile, duplicate (token, expert) slots', { mode: 'gather', T: 3, G: 6, k: 3, K: 37, N: 70, pick: (t, s) => (t === 1 ? 4 : (t + 2 * s) % 6) }, /gemv-splitk-r4-kg1\+/],
        ['padding rows (-1) read zeros; bias and per-token src scales', { mode: 'gather', T: 4, G: 3, k: 2, K: 24, N: 36, pads: [0, 2, 2], bias: true, srcScale: true }, /gemv-splitk-r4-kg1-vec/],
        ['one expert takes every row (several schedule tiles), E = 1', { mode: 'gather', T: 7, G: 1, k: 1, K: 20, N: 44, pick: () => 0 }, /gemv-splitk-r8-kg1-vec/],
        ['one expert of four takes every row', { mode: 'gather', T: 9, G: 4, k: 1, K: 16, N: 24, pick: () => 2 }, /gemv-splitk-r4-kg1-vec/],
        ['K split across workgroups, with a GLU (halves) and bias', { mode: 'gather', T: 2, G: 3, k: 2, K: 101, N: 72, bias: true, glu: { alg: 'glu_swiglu', layout: 'halves' }, kPerThread: 2 }, /gemv-splitk-r4-kg4-vec/],
        ['int4 weights, K-block 8 scales, GLU interleaved, K split', { mode: 'gather', T: 2, G: 4, k: 2, K: 64, N: 48, weiDt: dt.s4, wScale: 8, glu: { alg: 'glu_swiglu', layout: 'interleaved' }, kPerThread: 2 }, /gemv-splitk-r4-kg4-vec/],
        ['groups mapped to experts (6 groups over 3 experts), per-column weight scales', { mode: 'gather', T: 3, G: 6, k: 2, K: 20, N: 28, map: [2, 0, 1, 2, 0, 1], wScale: 'col', bias: true }, /gemv-splitk-r4-kg1-vec/],
      ];
      it.each(cases)('%s', async (_n, c, kernel) => {
        const o = await runCase(c);
        impl(o, kernel);
        check(c, o);
      });
    });

    describe('gemv-splitk: the fused GLU, every algorithm and layout (gathered rows, bias, padding rows)', () => {
      const gluCase = (alg: GluAlg, layout: GluLayout, extra: Partial<Case> = {}): Case => ({
        mode: 'gather', T: 3, G: 3, k: 2, K: 20, N: layout === 'blocks32' ? 192 : 74, bias: true, pads: [1], glu: { alg, layout }, ...extra,
      });
      it.each(ALGS.flatMap((alg) => LAYOUTS.map((layout) => [alg, layout] as const)))('%s, %s', async (alg, layout) => {
        // N = 74 is no multiple of the vector width: scalar loads (vector loads: blocks32 here, the cases below).
        const o = await runCase(gluCase(alg, layout));
        impl(o, layout === 'blocks32' ? /gemv-splitk-r4-kg1-vec/ : /gemv-splitk-r4-kg1\+/);
        check(gluCase(alg, layout), o);
      });
      it('halves with N / 2 a multiple of the vector width (vector loads), split K; swiglu_oai clamping', async () => {
        const c = gluCase('glu_swiglu_oai', 'halves', { N: 80, K: 67, kPerThread: 2, glu: { alg: 'glu_swiglu_oai', layout: 'halves', alpha: 1, limit: 2 } });
        const o = await runCase(c);
        impl(o, /gemv-splitk-r4-kg3-vec/);
        check(c, o);
      });
      it('blocks32, K split, a dst column tile across two 32-blocks', async () => {
        const c = gluCase('glu_geglu_tanh', 'blocks32', { N: 256, K: 70, kPerThread: 2 });
        const o = await runCase(c);
        impl(o, /gemv-splitk-r4-kg3-vec/);
        check(c, o);
      });
    });

    describe('gemv-splitk: scatter (gemm2 of the layer)', () => {
      const cases: ReadonlyArray<readonly [string, Case, RegExp]> = [
        ['routing weights as binary_mul [T * k, 1], bias, empty experts, odd K / N', { mode: 'scatter', T: 3, G: 5, k: 2, K: 37, N: 70, bias: true, ops: ['mul_row'], pick: (t, s) => (t + 3 * s) % 5 === 1 ? 3 : (t + 3 * s) % 5 }, /gemv-splitk-r4-kg1\+/],
        ['padding rows not written; slots routed nowhere keep their contents; duplicate experts of a token', { mode: 'scatter', T: 4, G: 3, k: 3, K: 24, N: 32, pads: [0, 0, 2], drop: (t, s) => (t + s) % 4 === 0, pick: (t) => t % 3, ops: ['mul_row'] }, /gemv-splitk-r4-kg1-vec/],
        ['K split: relu, binary_add [G, 1, N], binary_mul [T * k, 1], sum 0.5 in order', { mode: 'scatter', T: 2, G: 4, k: 2, K: 90, N: 36, ops: ['relu', 'add_expert', 'mul_row', 'sum'], kPerThread: 2 }, /gemv-splitk-r4-kg3-vec/],
        ['per-row src scales (f32 src), int4 weights with K-block 16 scales, an expert map', { mode: 'scatter', T: 3, G: 4, k: 2, K: 32, N: 40, srcScale: true, weiDt: dt.s4, wScale: 16, map: [1, 1, 0, 2], ops: ['mul_row'] }, /gemv-splitk-r4-kg1-vec/],
        ['E = 1, one expert takes every row (rows of 8)', { mode: 'scatter', T: 6, G: 1, k: 1, K: 16, N: 20, pick: () => 0, ops: ['mul_row'] }, /gemv-splitk-r8-kg1-vec/],
      ];
      it.each(cases)('%s', async (_n, c, kernel) => {
        const o = await runCase(c);
        impl(o, kernel);
        check(c, o);
      });
    });

    describe('gemv-splitk: zero-filled ungrouped rows', () => {
      it.each([
        ['rows before and after the groups, an empty expert', { mode: 'zero_fill', T: 3, G: 3, k: 1, K: 21, N: 36, lead: 2, tail: 3, pick: (t: number) => (t === 0 ? 0 : 2) }],
        ['with a GLU and a K split', { mode: 'zero_fill', T: 2, G: 2, k: 2, K: 50, N: 40, lead: 5, tail: 1, glu: { alg: 'glu_swiglu', layout: 'interleaved' }, kPerThread: 2 }],
      ] as const)('%s', async (_n, c) => {
        const o = await runCase(c);
        check(c, o);
      });
    });

    describe('gemv-splitk: W8A8, the integer GEMM (i32 sums, per-row x per-column scales per output)', () => {
      const cases: ReadonlyArray<readonly [string, Case, RegExp]> = [
        ['gemm1 of the W8A8 layer: gathered s8 rows with per-token scales x s8, per-column scales, GLU halves, bias, padding rows', { mode: 'gather', T: 3, G: 4, k: 2, K: 40, N: 72, srcDt: dt.s8, weiDt: dt.s8, srcScale: true, wScale: 'col', bias: true, pads: [3], glu: { alg: 'glu_swiglu', layout: 'halves' } }, /gemv-splitk-r4-kg1-vec/],
        ['gemm2 of the W8A8 layer: s8 rows scattered, routing weights, K split', { mode: 'scatter', T: 3, G: 4, k: 2, K: 90, N: 36, srcDt: dt.s8, weiDt: dt.s8, srcScale: true, wScale: 'col', ops: ['mul_row'], kPerThread: 2 }, /gemv-splitk-r4-kg6-vec/],
        ['s8 x s4, scalar loads (N / 8 not whole), an expert map, GLU interleaved with a K split', { mode: 'gather', T: 2, G: 3, k: 2, K: 70, N: 38, srcDt: dt.s8, weiDt: dt.s4, srcScale: true, wScale: 'col', map: [1, 0, 1], glu: { alg: 'glu_geglu_tanh', layout: 'interleaved' }, kPerThread: 2 }, /gemv-splitk-r4-kg5\+/],
        ['u8 x u8, E = 1 taking every row', { mode: 'scatter', T: 6, G: 1, k: 1, K: 33, N: 24, pick: () => 0, srcDt: dt.u8, weiDt: dt.u8, srcScale: true, wScale: 'col' }, /gemv-splitk-r8-kg1-vec/],
      ];
      it.each(cases)('%s', async (_n, c, kernel) => {
        const o = await runCase(c);
        impl(o, kernel);
        check(c, o);
      });
      it('u8 x u8 with src and weights zero points (codes minus zero points in the i32 sums)', async () => {
        const o = await runGpuGM(eng, strm, { G: 3, K: 37, N: 40, sizes: [3, 0, 4], srcDt: dt.u8, weiDt: dt.u8, scales: { src: { gran: GM.src.row }, weights: { gran: GM.weights.expertCol } }, zps: { src: { gran: GM.src.expert, dt: dt.u8 }, weights: { gran: GM.weights.expertCol, dt: dt.u8 } } });
        impl(o, /gemv-splitk-r4-kg1-vec/);
        expectBitwise(o);
      });
    });

    describe('gemv-splitk: src scales, dst scales and zero points, sum (plain grouped rows)', () => {
      const SHAPE = { G: 3, K: 20, N: 70, sizes: [4, 0, 2], totalM: 7 } as const;
      it('f32 src with per-row scales, per-column weight scales, a dst scale per expert, sum (dst zero points need an integer dst: not with float src)', async () => {
        const o = await runGpuGM(eng, strm, { ...SHAPE, scales: { src: { gran: GM.src.row }, weights: { gran: GM.weights.expertCol }, dst: { gran: GM.dst.expert } }, ops: [{ kind: 'sum', scale: 1 }] });
        expect(o.pd.implInfo).toMatch(/gemv-splitk-/);
        expectBitwise(o);
      });
      it('src scales per row x K-block 4 (applied per element)', async () => {
        const o = await runGpuGM(eng, strm, { ...SHAPE, scales: { src: { gran: GM.src.rowK(4) } }, ops: [{ kind: 'binary', alg: 'binary_add', shape: 'expert_n' }] });
        expect(o.pd.implInfo).toMatch(/gemv-splitk-/);
        expectBitwise(o);
      });
    });

    describe('gemv-splitk: the same bits on every run, bad runtime data raises what gemm-tiled raises', () => {
      it('a second run gives the same bits (gather, GLU, split K)', async () => {
        const c: Case = { mode: 'gather', T: 2, G: 3, k: 2, K: 150, N: 72, glu: { alg: 'glu_geglu_erf', layout: 'halves' }, kPerThread: 2, seed: 9 };
        const a = await runCase(c), b = await runCase(c);
        impl(a, /gemv-splitk-r4-kg5-vec/);
        expect(Buffer.from(a.got.buffer).equals(Buffer.from(b.got.buffer))).toBe(true);
      });

      /** Runs a gather or scatter with the given maps on both kernels; returns the messages and whether dst stayed untouched. */
      async function bad(mode: 'gather' | 'scatter', ti: number[], ks: number[], map?: number[]): Promise<{ msg: string; untouched: boolean }[]> {
        const out: { msg: string; untouched: boolean }[] = [];
        for (const gemv of [true, false]) {
          gpuKernelTuning.gemv = gemv;
          const T = 3, k = 2, K = 8, N = 8, G = 2, R = ti.length;
          const attr = new PrimitiveAttr();
          if (mode === 'gather') attr.setGather(); else attr.setScatter(k);
          if (map) attr.setExpertMap();
          const srcMd = mode === 'gather' ? plain([T, K]) : grouped(R, K, G), dstMd = mode === 'gather' ? grouped(R, N, G) : plain([T * k, N]);
          const pd = new matmul.PrimitiveDesc(eng, srcMd, plain([G, K, N]), dstMd, attr);
          expect(pd.implInfo).toMatch(gemv ? /gemv-splitk/ : /gemm-tiled/);
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
        const [g, t] = await bad(mode, [...ti], [...ks], map ? [...map] : undefined);
        expect(g.msg).toMatch(msg);
        expect(g.msg).toBe(t.msg);
        expect(g.untouched && t.untouched).toBe(true);
      });
    });
  });
}
