/**
 * Dynamic int8 activations (`attr.setDynamicQuantization(ARG.SRC, dt.s8)`, rfcs/0006, `:dq`) on Proposal #3
 * `grouped_gemm` (wasm_grouped_gemm_dq.ts): for the same rows and weights, a P#3 `:dq` step gives bitwise the
 * outputs of a P#1 `:dq` matmul (grouped src; dynamic_int8_matmul.test.ts and dynamic_int8_fp4.test.ts check
 * those bits against an exact model). Experts of different K / N are compared with a P#1 matmul of E = 1 per
 * expert. Both kernel builds, 1 and 2 threads; refusals on the gpu engine and the reference.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ARG, Engine, Memory, MemoryDesc, PrimitiveAttr, RUNTIME_DIM_VAL as RT, Stream, dt, grouped_gemm, matmul, memory, reorder, tag, type DataType,
} from '../src/index.js';
import { expectDnnlError, expectDnnlReject, expectF32Bits } from './helpers.js';
import { expectUnchanged } from './proposal_helpers.js';
import { gpuEngine } from './gpu_helpers.js';
import { mulberry32 } from './workloads.js';

const E2M1 = [0, 0.5, 1, 1.5, 2, 3, 4, 6, -0, -0.5, -1, -1.5, -2, -3, -4, -6];
const RANGE: Record<string, [number, number]> = { s8: [-128, 127], u8: [0, 255], s4: [-8, 7], u4: [0, 15] };

/** Weights type, scales (per column, or K blocks of `blk`, of type `sdt`) and layout (tag.any packed panels, or plain tag.ab). */
interface Weights {
  readonly wdt: DataType;
  readonly blk: number;
  readonly sdt?: DataType;
  readonly plain?: boolean;
  /** Post-ops: a swiglu GLU (halves: dst has N / 2 columns), then gelu_tanh. */
  readonly glu?: boolean;
  /** The src (activation) type: f32 (default), bf16 or f16. */
  readonly src?: DataType;
}
interface Ex {
  readonly K: number;
  readonly N: number;
  readonly rows: number;
}

interface Data {
  readonly x: Float32Array[];
  readonly w: Float64Array[];
  readonly s: Float32Array[];
}

function makeData(ex: readonly Ex[], wt: Weights, seed: number): Data {
  const r = mulberry32(seed);
  const x = ex.map((e) => {
    const v = Float32Array.from({ length: e.rows * e.K }, () => (r() * 2 - 1) * (r() < 0.05 ? 40 : 1));
    if (e.rows > 2) v.fill(0, e.K, 2 * e.K); // a row of zeros: scale 1
    // bf16 / f16 src: values the type holds (the bits written below)
    if (wt.src === dt.bf16) v.forEach((x, i) => (v[i] = bf16Value(bf16Bits(x))));
    if (wt.src === dt.f16) v.forEach((x, i) => (v[i] = Math.fround(Math.round(x * 1024) / 1024)));
    return v;
  });
  const code = (): number => {
    if (wt.wdt === dt.f4_e2m1) return E2M1[Math.floor(r() * 16)];
    const [lo, hi] = RANGE[wt.wdt];
    return lo + Math.floor(r() * (hi - lo + 1));
  };
  const w = ex.map((e) => Float64Array.from({ length: e.K * e.N }, code));
  const scale = (): number => (wt.sdt === dt.e8m0 ? 2 ** -(4 + Math.floor(r() * 8)) : Math.fround(0.001 + r() * 0.02));
  const s = ex.map((e) => Float32Array.from({ length: (wt.blk ? Math.ceil(e.K / wt.blk) : 1) * e.N }, scale));
  return { x, w, s };
}

const f32u = new Float32Array(1), u32 = new Uint32Array(f32u.buffer);
const bf16Bits = (x: number): number => { f32u[0] = x; return u32[0] >>> 16; };
const bf16Value = (b: number): number => { u32[0] = b << 16; return f32u[0]; };
/** f16 bits of a value f16 holds (|x| < 65504, a multiple of 2^-10 here: normal or zero, or subnormal). */
function f16Bits(x: number): number {
  if (x === 0) return Object.is(x, -0) ? 0x8000 : 0;
  const sgn = x < 0 ? 0x8000 : 0, a = Math.abs(x);
  let e = Math.floor(Math.log2(a));
  if (2 ** e > a) e--;
  if (2 ** (e + 1) <= a) e++;
  if (e < -14) return sgn | Math.round(a / 2 ** -24);
  return sgn | ((e + 15) << 10) | Math.round((a / 2 ** e - 1) * 1024);
}
/** Writes f32 values into src memory of type `t` at element `at`. */
function writeSrc(m: Memory, t: DataType | undefined, x: Float32Array, at = 0): void {
  if (!t || t === dt.f32) (m.values as Float32Array).set(x, at);
  else (m.values as Uint16Array).set(Array.from(x, t === dt.bf16 ? bf16Bits : f16Bits), at);
}
const dqAttr = (wt?: Weights): PrimitiveAttr => {
  const a = new PrimitiveAttr().setDynamicQuantization(ARG.SRC, dt.s8);
  if (wt?.glu) a.postOps.appendGlu('glu_swiglu', 'halves').appendEltwise('eltwise_gelu_tanh');
  return a;
};
/** dst columns. */
const dstN = (e: Ex, wt: Weights): number => (wt.glu ? e.N / 2 : e.N);

/** Puts user weights (with their scales, for `+q` panels) into the layout a pd chose. */
function intoLayout(eng: Engine, strm: Stream, user: Memory, wmd: MemoryDesc, scales: Memory, mems: Memory[]): Memory {
  if (wmd.equals(user.desc)) return user;
  const wei = Memory.create(wmd, eng);
  mems.push(wei);
  new reorder.Primitive(new reorder.PrimitiveDesc(eng, user.desc, wmd)).execute(strm, { [ARG.FROM]: user, [ARG.TO]: wei, [ARG.ATTR_SCALES | ARG.WEIGHTS]: scales });
  return wei;
}

/** Proposal #1: one grouped matmul over experts of equal K / N; dst rows of each expert. */
async function runP1(eng: Engine, strm: Stream, ex: readonly Ex[], wt: Weights, d: Data): Promise<Float32Array[]> {
  const E = ex.length, { K } = ex[0], N = dstN(ex[0], wt), T = ex.reduce((a, e) => a + e.rows, 0);
  const attr = dqAttr(wt);
  if (wt.blk) attr.setScales(ARG.WEIGHTS, 7, [1, wt.blk, 1], wt.sdt ?? dt.f32);
  else attr.setScales(ARG.WEIGHTS, 5, [], wt.sdt ?? dt.f32);
  const srcMd = memory.desc.grouped([T, K], wt.src ?? dt.f32, E, [RT, K]), dstMd = memory.desc.grouped([T, N], dt.f32, E, [RT, N]);
  const userMd = memory.desc([E, K, ex[0].N], wt.wdt, tag.abc);
  const pd = new matmul.PrimitiveDesc(eng, srcMd, wt.plain ? userMd : memory.desc([E, K, ex[0].N], wt.wdt, tag.any), dstMd, attr);
  expect(pd.implInfo).toMatch(/-dq8/);
  const offs = [0];
  for (const e of ex) offs.push(offs[offs.length - 1] + e.rows);
  const src = Memory.create(srcMd, eng), dst = Memory.create(dstMd, eng, [undefined, src.handles[1]]);
  ex.forEach((e, g) => writeSrc(src, wt.src, d.x[g], offs[g] * K));
  src.offsets.set(offs);
  (dst.values as Float32Array).fill(Number.NaN);
  const wAll = new Float64Array(E * K * ex[0].N), sAll = new Float32Array(d.s.reduce((a, s) => a + s.length, 0));
  d.w.forEach((w, g) => wAll.set(w, g * w.length));
  d.s.forEach((s, g) => sAll.set(s, g * s.length));
  const user = Memory.create(userMd, eng).write(wAll);
  const scales = Memory.create(pd.queryMd('scales:weights')!, eng).write(sAll);
  const mems = [src, dst, user, scales];
  const wmd = pd.queryMd('weights')!;
  const wei = intoLayout(eng, strm, user, wmd, scales, mems);
  const prim = new matmul.Primitive(pd);
  const args: Record<number, Memory> = { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst };
  if (!wmd.packed?.quant?.scales) args[ARG.ATTR_SCALES | ARG.WEIGHTS] = scales;
  prim.execute(strm, args);
  await strm.wait();
  const out = ex.map((e, g) => Float32Array.from((dst.values as Float32Array).subarray(offs[g] * N, offs[g + 1] * N)));
  mems.forEach((m) => m.free());
  prim.destroy();
  return out;
}

interface P3Run {
  readonly pd: grouped_gemm.PrimitiveDesc;
  readonly prim: grouped_gemm.Primitive;
  readonly args: Record<number, Memory>;
  readonly dsts: Memory[];
  readonly dims: Memory;
  free(): void;
}

/** Proposal #3 set up: separate src / dst allocations of `cap` rows (default: the rows, at least 1) per expert. */
function setupP3(eng: Engine, strm: Stream, ex: readonly Ex[], wt: Weights, d: Data, caps?: readonly number[]): P3Run {
  const G = ex.length;
  const attr = dqAttr(wt);
  if (wt.blk) attr.setScales(ARG.MULTIPLE_WEIGHTS, 3, [wt.blk, 1], wt.sdt ?? dt.f32);
  else attr.setScales(ARG.MULTIPLE_WEIGHTS, 2, [], wt.sdt ?? dt.f32);
  const srcMds = ex.map((e) => memory.desc([RT, e.K], wt.src ?? dt.f32, tag.ab)), dstMds = ex.map((e) => memory.desc([RT, dstN(e, wt)], dt.f32, tag.ab));
  const userMds = ex.map((e) => memory.desc([e.K, e.N], wt.wdt, tag.ab));
  const pd = new grouped_gemm.PrimitiveDesc(eng, srcMds, wt.plain ? userMds : ex.map((e) => memory.desc([e.K, e.N], wt.wdt, tag.any)), dstMds, memory.desc([G], dt.s32, tag.x), attr);
  const mems: Memory[] = [], views: Memory[] = [], dsts: Memory[] = [];
  const args: Record<number, Memory> = {};
  ex.forEach((e, g) => {
    const cap = caps?.[g] ?? Math.max(e.rows, 1);
    const src = Memory.create(memory.desc([cap, e.K], wt.src ?? dt.f32, tag.ab), eng), dst = Memory.create(memory.desc([cap, dstN(e, wt)], dt.f32, tag.ab), eng);
    writeSrc(src, wt.src, d.x[g]);
    (dst.values as Float32Array).fill(Number.NaN);
    mems.push(src, dst);
    dsts.push(dst);
    const user = Memory.create(userMds[g], eng).write(d.w[g]);
    const scales = Memory.create(pd.queryMd('scales:weights', g)!, eng).write(d.s[g]);
    mems.push(user, scales);
    const wmd = pd.queryMd('weights', g)!;
    args[ARG.MULTIPLE_WEIGHTS + g] = intoLayout(eng, strm, user, wmd, scales, mems);
    // (x8 / x4 +q panels hold the scales: the execution takes them from there only)
    if (!wmd.packed?.quant?.scales) args[ARG.ATTR_SCALES | (ARG.MULTIPLE_WEIGHTS + g)] = scales;
    const sv = Memory.create(srcMds[g], eng, src.handles[0]), dv = Memory.create(dstMds[g], eng, dst.handles[0]);
    views.push(sv, dv);
    args[ARG.MULTIPLE_SRC + g] = sv;
    args[ARG.MULTIPLE_DST + g] = dv;
  });
  const dims = Memory.create(memory.desc([G], dt.s32, tag.x), eng).write(ex.map((e) => e.rows));
  mems.push(dims);
  args[ARG.RUNTIME_DIMS] = dims;
  const prim = new grouped_gemm.Primitive(pd);
  return {
    pd, prim, args, dsts, dims, free() {
      views.forEach((m) => m.free());
      mems.forEach((m) => m.free());
      prim.destroy();
    },
  };
}

async function runP3(eng: Engine, strm: Stream, ex: readonly Ex[], wt: Weights, d: Data): Promise<{ out: Float32Array[]; impl: string }> {
  const f = setupP3(eng, strm, ex, wt, d);
  try {
    f.prim.execute(strm, f.args);
    await strm.wait();
    return { out: ex.map((e, g) => Float32Array.from((f.dsts[g].values as Float32Array).subarray(0, e.rows * dstN(e, wt)))), impl: f.pd.implInfo };
  } finally {
    f.free();
  }
}


/**
 * P#3 against P#1 on the same rows (one P#1 matmul, or one of E = 1 per expert when K / N differ), P#1 on
 * `ref` (default: the same engine).
 */
async function compare(eng: Engine, strm: Stream, ex: readonly Ex[], wt: Weights, seed: number, what: string, ref: readonly [Engine, Stream] = [eng, strm]): Promise<{ out: Float32Array[]; impl: string }> {
  const d = makeData(ex, wt, seed);
  const p3 = await runP3(eng, strm, ex, wt, d);
  expect(p3.impl, what).toMatch(/^wasm:(simd128|relaxed):s16-gemm-3x8(-wf?[84])?-dq8(\+rd16)?(\+rdot)?$/);
  const uniform = ex.every((e) => e.K === ex[0].K && e.N === ex[0].N);
  const p1 = uniform ? await runP1(ref[0], ref[1], ex, wt, d)
    : (await Promise.all(ex.map(async (e, g) => (await runP1(ref[0], ref[1], [e], wt, { x: [d.x[g]], w: [d.w[g]], s: [d.s[g]] }))[0])));
  ex.forEach((e, g) => expectF32Bits(p3.out[g], p1[g], `${what} expert ${g}`, false));
  expect(p3.out.some((o) => o.some((v) => v !== 0)), `${what}: a non-trivial result`).toBe(true);
  return p3;
}

const same = (rows: readonly number[], K: number, N: number): Ex[] => rows.map((r) => ({ K, N, rows: r }));

const SHAPES: [string, Ex[]][] = [
  ['E = 5: a 70-row expert, an empty one, 1-row ones', same([70, 0, 9, 1, 33], 96, 21)],
  ['one expert takes all rows', same([0, 0, 41, 0], 64, 19)],
  ['E = 1', same([5], 128, 13)],
  ['M = 1, 2, 3, 5', same([1, 2, 3, 5], 64, 24)],
  ['decode: 1 row per expert, K = 256', same([1, 1, 1], 256, 24)],
];

const WEIGHTS: [string, Weights][] = [
  ['s8 per-column', { wdt: dt.s8, blk: 0 }],
  ['u8 per-column', { wdt: dt.u8, blk: 0 }],
  ['s4 per-column', { wdt: dt.s4, blk: 0 }],
  ['s4 K-blocks of 32', { wdt: dt.s4, blk: 32 }],
  ['u4 K-blocks of 32', { wdt: dt.u4, blk: 32 }],
  ['f4_e2m1 MXFP4 (e8m0, K 32)', { wdt: dt.f4_e2m1, blk: 32, sdt: dt.e8m0 }],
  ['s8 plain weights per-column', { wdt: dt.s8, blk: 0, plain: true }],
  ['s4 plain weights per-column', { wdt: dt.s4, blk: 0, plain: true }],
];

describe('Proposal #3 grouped_gemm with dynamic int8 activations (attr.setDynamicQuantization)', () => {
  const engines: [string, Engine, Stream][] = [];
  beforeAll(async () => {
    for (const kernels of ['simd128', 'relaxed'] as const) {
      for (const threads of [1, 2]) {
        const e = await Engine.create({ threads, kernels });
        engines.push([`${kernels} ${threads}T`, e, new Stream(e)]);
      }
    }
  });
  afterAll(() => engines.forEach(([, e]) => e.release()));

  for (const [wname, wt] of WEIGHTS) {
    it.each(SHAPES)(`${wname}: %s, bitwise P#1's, 1 and 2 threads the same`, async (_n, ex) => {
      for (const kernels of ['simd128', 'relaxed']) {
        const outs: Float32Array[][] = [];
        for (const [name, eng, strm] of engines.filter(([n]) => n.startsWith(kernels))) outs.push((await compare(eng, strm, ex, wt, 11, `${wname} ${name}`)).out);
        outs[1].forEach((o, g) => expectF32Bits(o, outs[0][g], `${wname} ${kernels} 2T vs 1T expert ${g}`, false));
      }
    });
  }

  it('experts of different K and N (per-column scales; K blocks of 32 on equal N)', async () => {
    const mixed: Ex[] = [{ K: 64, N: 24, rows: 7 }, { K: 160, N: 8, rows: 0 }, { K: 96, N: 40, rows: 3 }, { K: 32, N: 17, rows: 12 }];
    const mixedK: Ex[] = [{ K: 64, N: 24, rows: 7 }, { K: 160, N: 24, rows: 2 }, { K: 96, N: 24, rows: 0 }, { K: 32, N: 24, rows: 5 }];
    for (const [name, eng, strm] of engines) {
      for (const wt of [{ wdt: dt.s8, blk: 0 }, { wdt: dt.s4, blk: 0 }, { wdt: dt.u8, blk: 0, plain: true }] as Weights[]) await compare(eng, strm, mixed, wt, 3, `${name} ${wt.wdt}`);
      for (const wt of [{ wdt: dt.s4, blk: 32 }, { wdt: dt.f4_e2m1, blk: 32, sdt: dt.e8m0 }] as Weights[]) await compare(eng, strm, mixedK, wt, 4, `${name} ${wt.wdt} K-blocks`);
    }
  });

  it('post-ops: swiglu GLU (halves) then gelu_tanh, per-column and K-block scales, experts of different K', async () => {
    const ex: Ex[] = [{ K: 64, N: 32, rows: 9 }, { K: 128, N: 32, rows: 0 }, { K: 96, N: 32, rows: 4 }];
    for (const [name, eng, strm] of engines) {
      await compare(eng, strm, same([9, 0, 4, 1], 64, 32), { wdt: dt.s8, blk: 0, glu: true }, 12, `${name} s8 glu`);
      await compare(eng, strm, ex, { wdt: dt.s4, blk: 32, glu: true }, 13, `${name} s4 K-blocks glu`);
      await compare(eng, strm, ex, { wdt: dt.f4_e2m1, blk: 32, sdt: dt.e8m0, glu: true }, 14, `${name} mxfp4 glu`);
    }
  });

  it('expertViews of one buffer (the rows of consecutive experts quantized as one run), same bits; a NaN row named by its expert', async () => {
    const ex = same([5, 0, 3, 0, 7, 1], 64, 24), K = 64, N = 24, G = ex.length;
    const offs = [0];
    for (const e of ex) offs.push(offs[offs.length - 1] + e.rows);
    const T = offs[G];
    for (const [[name, eng, strm], srcDt] of engines.flatMap((e) => [dt.f32, dt.bf16].map((t) => [e, t] as const))) {
      const wt: Weights = { wdt: dt.s4, blk: 32, src: srcDt };
      const d = makeData(ex, wt, 21);
      const want = await runP1(eng, strm, ex, wt, d);
      const f = setupP3(eng, strm, ex, wt, d);
      const srcAll = Memory.create(memory.desc([T, K], srcDt, tag.ab), eng), dstAll = Memory.create(memory.desc([T, N], dt.f32, tag.ab), eng);
      try {
        ex.forEach((_e, g) => writeSrc(srcAll, srcDt, d.x[g], offs[g] * K));
        (dstAll.values as Float32Array).fill(Number.NaN);
        const sv = grouped_gemm.expertViews(srcAll, offs), dv = grouped_gemm.expertViews(dstAll, offs);
        const args = { ...f.args };
        for (let g = 0; g < G; g++) {
          args[ARG.MULTIPLE_SRC + g] = sv[g];
          args[ARG.MULTIPLE_DST + g] = dv[g];
        }
        f.prim.execute(strm, args);
        await strm.wait();
        ex.forEach((e, g) => expectF32Bits(Float32Array.from((dstAll.values as Float32Array).subarray(offs[g] * N, offs[g + 1] * N)), want[g], `${name} ${srcDt} expert ${g}`, false));
        // row 2 of expert 4 (the run's row 10)
        writeSrc(srcAll, srcDt, Float32Array.of(Number.POSITIVE_INFINITY), (offs[4] + 2) * K + 3);
        f.prim.execute(strm, args);
        await expectDnnlReject(strm.wait(), 'invalid_arguments', 'grouped_gemm.execute: src[4] row 2 has a NaN or infinite value');
        [...sv, ...dv].forEach((m) => m.free());
      } finally {
        srcAll.free();
        dstAll.free();
        f.free();
      }
    }
  });

  it('bf16 and f16 src (expert rows of 2-byte values), s8 per-column and s4 K-blocks, experts of different K', async () => {
    const ex: Ex[] = [{ K: 64, N: 24, rows: 6 }, { K: 96, N: 24, rows: 0 }, { K: 128, N: 24, rows: 3 }, { K: 64, N: 24, rows: 1 }];
    for (const [name, eng, strm] of engines) {
      for (const src of [dt.bf16, dt.f16]) {
        await compare(eng, strm, same([6, 0, 3, 1], 64, 24), { wdt: dt.s8, blk: 0, src }, 15, `${name} ${src} s8`);
        await compare(eng, strm, ex, { wdt: dt.s4, blk: 32, src }, 16, `${name} ${src} s4 K-blocks`);
      }
    }
  });

  it('tall experts (hundreds of rows), s4 K-blocks and s8', async () => {
    const tall = same([300, 5, 257], 128, 40);
    for (const [name, eng, strm] of engines) {
      await compare(eng, strm, tall, { wdt: dt.s4, blk: 32 }, 5, `${name} s4`);
      await compare(eng, strm, tall, { wdt: dt.s8, blk: 0 }, 6, `${name} s8`);
    }
  });

  it('a second execution with more rows grows the workspace; fewer rows reuse it', async () => {
    const [, eng, strm] = engines[1];
    const ex = same([2, 3], 64, 16), wt: Weights = { wdt: dt.s8, blk: 0 };
    const d = makeData(same([40, 50], 64, 16), wt, 9);
    const f = setupP3(eng, strm, same([40, 50], 64, 16), wt, d);
    try {
      for (const rows of [[2, 3], [40, 50], [1, 0]]) {
        (f.dims.values as Int32Array).set(rows);
        f.dsts.forEach((m) => (m.values as Float32Array).fill(Number.NaN));
        f.prim.execute(strm, f.args);
        await strm.wait();
        const sub = rows.map((r, g) => ({ ...ex[g], rows: r }));
        const want = await runP1(eng, strm, sub, wt, { x: d.x.map((x, g) => x.subarray(0, rows[g] * 64)), w: d.w, s: d.s });
        sub.forEach((e, g) => {
          expectF32Bits(Float32Array.from((f.dsts[g].values as Float32Array).subarray(0, e.rows * e.N)), want[g], `rows ${rows} expert ${g}`, false);
          const v = f.dsts[g].values as Float32Array;
          if (e.rows * e.N < v.length) expect(Number.isNaN(v[e.rows * e.N]), `rows past M_i untouched: rows ${rows} expert ${g}`).toBe(true);
        });
      }
    } finally {
      f.free();
    }
  });

  it('bad runtime M is reported at stream.wait(), dst untouched', async () => {
    for (const [name, eng, strm] of engines) {
      const ex = same([3, 4, 5], 64, 16), wt: Weights = { wdt: dt.s4, blk: 32 };
      const d = makeData(ex, wt, 2);
      for (const [dims, fragment] of [
        [[3, 5, 5], "ARG.RUNTIME_DIMS[1] = 5 rows do not fit expert 1's src/dst allocations (4 rows fit)"],
        [[3, -1, 5], 'ARG.RUNTIME_DIMS[1] = -1 must be non-negative'],
        [[3, 4, 6], "ARG.RUNTIME_DIMS[2] = 6 rows do not fit expert 2's src/dst allocations (5 rows fit)"],
      ] as const) {
        const f = setupP3(eng, strm, ex, wt, d);
        try {
          await strm.wait();
          (f.dims.values as Int32Array).set(dims);
          const before = f.dsts.map((m) => m.read());
          expect(() => f.prim.execute(strm, f.args)).not.toThrow();
          await expectDnnlReject(strm.wait(), 'invalid_arguments', fragment);
          f.dsts.forEach((m, i) => expectUnchanged(before[i], m.read(), `${name} dst ${i}`));
        } finally {
          f.free();
        }
      }
    }
  });

  it('a src row with a NaN is reported at stream.wait(), dst untouched', async () => {
    const [, eng, strm] = engines[1];
    const ex = same([3, 4], 32, 8), wt: Weights = { wdt: dt.s8, blk: 0 };
    const d = makeData(ex, wt, 2);
    d.x[1][2 * 32 + 5] = Number.NaN;
    const f = setupP3(eng, strm, ex, wt, d);
    try {
      await strm.wait();
      const before = f.dsts.map((m) => m.read());
      f.prim.execute(strm, f.args);
      await expectDnnlReject(strm.wait(), 'invalid_arguments', 'grouped_gemm.execute: src[1] row 2 has a NaN or infinite value');
      f.dsts.forEach((m, i) => expectUnchanged(before[i], m.read(), `dst ${i}`));
    } finally {
      f.free();
    }
  });

  // The relaxed dot (Engine relaxedDot, opt-in): 1-row tiles of s8 rows x x4 panels (s4 / u4 / f4_e2m1) run
  // i32x4.relaxed_dot where relaxed SIMD is native (Node 22+) and the kernels' probe finds it exact. On Node 20
  // the engine keeps the int16 kernels (no `+rdot`, as dynamic_int8_matmul.test.ts expects) and the same checks
  // run on them. Either way the bits are P#1 :dq's, on the same engine and on a SIMD128 one (no relaxed dot).
  describe('relaxed dot (Engine relaxedDot)', () => {
    const rdot: [string, Engine, Stream][] = [];
    beforeAll(async () => {
      for (const threads of [1, 2]) {
        const e = await Engine.create({ threads, kernels: 'relaxed', relaxedDot: true });
        rdot.push([`relaxed+dot ${threads}T`, e, new Stream(e)]);
      }
    });
    afterAll(() => rdot.forEach(([, e]) => e.release()));
    const native = Number(process.versions.node.split('.')[0]) >= 22;
    // 1-row tiles: 1-row experts and the tail of 70 / 37 rows (3-row tiles); K, N not multiples of the tiles.
    const RDOT_SHAPES: [string, Ex[]][] = [
      ['E = 5: empty experts, 1-row ones, a 70-row one, K = 130, N = 21', same([1, 0, 70, 1, 0], 130, 21)],
      ['one expert takes all rows, K = 99, N = 19', same([0, 0, 37, 0], 99, 19)],
      ['E = 1, K = 130, N = 13', same([4], 130, 13)],
      ['decode: 1 row per expert, K = 2048, N = 24', same([1, 1, 1, 1], 2048, 24)],
    ];
    const RDOT_WEIGHTS: [string, Weights][] = [
      ['s4 per-column', { wdt: dt.s4, blk: 0 }],
      ['u4 per-column', { wdt: dt.u4, blk: 0 }],
      ['s4 K-blocks of 32', { wdt: dt.s4, blk: 32 }],
      ['f4_e2m1 MXFP4 (e8m0, K 32)', { wdt: dt.f4_e2m1, blk: 32, sdt: dt.e8m0 }],
      // not on the relaxed dot: x8 panels, and plain (unpacked) x4 weights
      ['s8 per-column', { wdt: dt.s8, blk: 0 }],
      ['s4 plain weights per-column', { wdt: dt.s4, blk: 0, plain: true }],
    ];
    for (const [wname, wt] of RDOT_WEIGHTS) {
      it.each(RDOT_SHAPES)(`${wname}: %s, bitwise P#1's on the same engine and on SIMD128`, async (_n, shape) => {
        // K blocks take K a multiple of the block
        const ex = wt.blk ? shape.map((e) => ({ ...e, K: Math.ceil(e.K / wt.blk) * wt.blk })) : shape;
        const [, simd, simdStrm] = engines[0];
        for (const [name, eng, strm] of rdot) {
          const { out, impl } = await compare(eng, strm, ex, wt, 17, `${wname} ${name}`);
          expect(impl.endsWith('+rdot'), `${name} ${impl}`).toBe(native && !wt.plain && wt.wdt !== dt.s8);
          const viaSimd = await compare(eng, strm, ex, wt, 17, `${wname} ${name} vs simd128`, [simd, simdStrm]);
          viaSimd.out.forEach((o, g) => expectF32Bits(o, out[g], `${wname} ${name} run to run expert ${g}`, false));
        }
      });
    }
  });

  describe('refusals', () => {
    const pdOf = (eng: unknown, wdt: DataType, attr: PrimitiveAttr, srcDt: DataType = dt.f32, K = 64): grouped_gemm.PrimitiveDesc =>
      new grouped_gemm.PrimitiveDesc(eng as Engine, [memory.desc([RT, K], srcDt, tag.ab)], [memory.desc([K, 8], wdt, tag.any)], [memory.desc([RT, 8], dt.f32, tag.ab)], memory.desc([1], dt.s32, tag.x), attr);
    const colScales = (): PrimitiveAttr => dqAttr().setScales(ARG.MULTIPLE_WEIGHTS, 2, [], dt.f32);

    it('matmul :dq\'s rules, with its messages', () => {
      const eng = engines[0][1];
      expectDnnlError(() => pdOf(eng, dt.s8, colScales(), dt.s8), 'invalid_arguments', 'grouped_gemm: attr.setDynamicQuantization: src must be f32, bf16 or f16 (the activation quantized at execution), got s8');
      expectDnnlError(() => pdOf(eng, dt.f32, dqAttr()), 'unimplemented', 'grouped_gemm: attr.setDynamicQuantization: weights must be s8, u8, s4, u4 or f4_e2m1 (weight-only experts), got f32');
      expectDnnlError(() => pdOf(eng, dt.f8_e4m3, colScales()), 'unimplemented', 'weights must be s8, u8, s4, u4 or f4_e2m1');
      expectDnnlError(() => pdOf(eng, dt.s8, colScales().setScales(ARG.MULTIPLE_SRC, 1, [], dt.f32)), 'invalid_arguments', 'src scales / zero points are computed by the primitive; do not set them');
      expectDnnlError(() => pdOf(eng, dt.s8, colScales().setExpertScales(ARG.MULTIPLE_SRC, 0, 1)), 'invalid_arguments', 'src scales / zero points are computed by the primitive; do not set them');
      expectDnnlError(() => pdOf(eng, dt.s8, colScales().setZeroPoints(ARG.MULTIPLE_SRC, 0, [], dt.s32)), 'invalid_arguments', 'src scales / zero points are computed by the primitive; do not set them');
      expectDnnlError(() => pdOf(eng, dt.u8, colScales().setZeroPoints(ARG.MULTIPLE_WEIGHTS, 0, [], dt.s32)), 'unimplemented', 'weights zero points are not supported (symmetric weights only)');
      // odd K blocks: the integer kernels take k in pairs (matmul's rule, named by the wasm impl)
      expectDnnlError(() => pdOf(eng, dt.s4, dqAttr().setScales(ARG.MULTIPLE_WEIGHTS, 3, [3, 1], dt.f32), dt.f32, 63), 'unimplemented', 'blocks must be even');
      // K blocks on plain weights: matmul's rule
      expectDnnlError(() => new grouped_gemm.PrimitiveDesc(eng, [memory.desc([RT, 64], dt.f32, tag.ab)], [memory.desc([64, 8], dt.s4, tag.ab)], [memory.desc([RT, 8], dt.f32, tag.ab)], memory.desc([1], dt.s32, tag.x), dqAttr().setScales(ARG.MULTIPLE_WEIGHTS, 3, [32, 1], dt.f32)), 'unimplemented', 'K-block weights scales need the weights packed (tag.any)');
      // accepted: bf16 / f16 src, no scales at all
      expect(pdOf(eng, dt.s8, dqAttr()).implInfo).toMatch(/-dq8$/);
      expect(pdOf(eng, dt.s8, colScales(), dt.bf16).implInfo).toMatch(/-dq8$/);
    });

    it('the reference engine (kernels: none) refuses it: unimplemented', async () => {
      const eng = await Engine.create({ threads: 1, kernels: 'none' });
      try {
        expectDnnlError(() => pdOf(eng, dt.s8, colScales()), 'unimplemented', 'dynamic quantization (attr.setDynamicQuantization) runs on the wasm kernels only');
      } finally {
        eng.release();
      }
    });

    it('the gpu engine runs it on webgpu:dynamic-quant (values: gpu_grouped_gemm_dq.test.ts), never on the weight-only kernels', async () => {
      const gpu = await gpuEngine();
      try {
        const pd = new grouped_gemm.PrimitiveDesc(gpu, [memory.desc([RT, 64], dt.f32, tag.ab)], [memory.desc([64, 8], dt.s8, tag.ab)], [memory.desc([RT, 8], dt.f32, tag.ab)], memory.desc([1], dt.s32, tag.x), colScales());
        expect(pd.implInfo).toMatch(/^webgpu:dynamic-quant\+/);
      } finally {
        gpu.release();
      }
    });
  });
});
