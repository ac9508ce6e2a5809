/**
 * `x16:p8`: bf16 / f16 weights behind `tag.any` keep their 16-bit codes in 8-column panels (2 bytes per
 * weight, where `f32:p8` took 4), converted to f32 in registers by the decode kernels (1-2 rows) or per
 * panel piece for taller tiles. The conversion is exact and the accumulation order is the f32 path's,
 * so every result must be bitwise what the same weights give plain (inexact random values: any change
 * of order would show), and close to a float64 reference: P#1, P#2, P#3, dense, both kernel builds,
 * 1-3 threads, empty experts, one expert taking every row, E = 1, K and N off the panel grid.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ARG, Engine, Memory, PrimitiveAttr, RUNTIME_DIM_VAL as RT, Stream, dt, grouped_gemm, matmul, memory, reorder, tag,
  type DataType, type MemoryDesc,
} from '../src/index.js';
import { PACKED_X16, packedX16WeightsDesc } from '../src/memory/packed_weights.js';
import { cumulative, mulberry32 } from './workloads.js';

const X16: readonly DataType[] = [dt.bf16, dt.f16];
type Opts = { threads: number; kernels: 'simd128' | 'relaxed' };
const ENGINES: readonly Opts[] = [{ threads: 1, kernels: 'simd128' }, { threads: 3, kernels: 'simd128' }, { threads: 2, kernels: 'relaxed' }];

/** What a case adds to the plain problem. */
interface Extra {
  readonly bias?: boolean;
  /** eltwise relu (fast path's in-register epilogue) then a sum post-op (dst accumulated into). */
  readonly relu?: boolean;
  readonly sum?: boolean;
  /** swiglu (halves): the fused path. */
  readonly glu?: boolean;
  readonly relaxed?: boolean;
  readonly dstDt?: DataType;
}

function attrOf(x: Extra, p2G?: number): PrimitiveAttr {
  const attr = new PrimitiveAttr();
  if (x.glu) attr.postOps.appendGlu('glu_swiglu', 'halves');
  if (x.relu) attr.postOps.appendEltwise('eltwise_relu', 0.25, 0);
  if (x.sum) attr.postOps.appendSum(0.5);
  if (x.relaxed) attr.setAccumulationMode('relaxed');
  if (p2G !== undefined) attr.setGroupedOffsets(ARG.SRC, p2G);
  return attr;
}

/** Random values over several binades (tiny and negative ones included), as stored in `t`. */
function values(rng: () => number, n: number, scale = 1): Float64Array {
  return Float64Array.from({ length: n }, () => (rng() - 0.5) * scale * 2 ** Math.floor(rng() * 8 - 4));
}

interface Run {
  readonly got: Float64Array;
  readonly bits: Uint32Array | Uint16Array;
  readonly impl: string;
  readonly wname: string | undefined;
  readonly wsize: number;
}

/** dst rows [0, rows) and the reference of one case, as run with the weights plain or `tag.any`. */
interface Grouped {
  readonly proposal: 'P1' | 'P2';
  readonly wdt: DataType;
  readonly K: number;
  readonly N: number;
  readonly sizes: readonly number[];
  readonly x?: Extra;
}

async function runGrouped(eng: Engine, strm: Stream, c: Grouped, packed: boolean, want?: Float64Array[]): Promise<Run> {
  const { K, N, sizes, wdt } = c, G = sizes.length, x = c.x ?? {};
  const M = sizes.reduce((a, b) => a + b, 0), Nd = x.glu ? N / 2 : N;
  const dstDt = x.dstDt ?? dt.f32;
  const rng = mulberry32(K * 131 + N * 7 + G);
  const p2 = c.proposal === 'P2';
  const srcMd = p2 ? memory.desc([M, K], dt.f32, tag.ab) : memory.desc.grouped([M, K], dt.f32, G, [RT, K]);
  const dstMd = p2 ? memory.desc([M, Nd], dstDt, tag.ab) : memory.desc.grouped([M, Nd], dstDt, G, [RT, Nd]);
  const plainMd = memory.desc([G, K, N], wdt, tag.abc);
  const biasMd = x.bias ? memory.desc([G, N], dt.f32, tag.ab) : undefined;
  const attr = attrOf(x, p2 ? G : undefined);
  const weiMd = packed ? memory.desc([G, K, N], wdt, tag.any) : plainMd;
  const pd = biasMd ? new matmul.PrimitiveDesc(eng, srcMd, weiMd, biasMd, dstMd, attr) : new matmul.PrimitiveDesc(eng, srcMd, weiMd, dstMd, attr);
  const mems: Memory[] = [];
  const mk = (md: MemoryDesc, h?: (number | undefined)[]): Memory => { const m = Memory.create(md, eng, h); mems.push(m); return m; };
  try {
    const xs = values(rng, M * K), ws = values(rng, G * K * N, 4), prev = values(rng, M * Nd), b = values(rng, G * N);
    const src = mk(srcMd).write(xs);
    const plain = mk(plainMd).write(ws);
    const w = Float64Array.from(plain.read()); // as stored in wdt
    const wei = packed ? mk(pd.queryMd('weights')!) : plain;
    if (packed) new reorder.Primitive(new reorder.PrimitiveDesc(eng, plain.desc, wei.desc)).execute(strm, { [ARG.FROM]: plain, [ARG.TO]: wei });
    const dst = p2 ? mk(dstMd) : mk(dstMd, [undefined, src.handles[1]]);
    dst.write(prev);
    const before = Float64Array.from(dst.read());
    const offs = cumulative(sizes);
    const args: Record<number, Memory> = { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst };
    if (p2) {
      const o = mk(pd.queryMd('grouped_offsets')!);
      (o.values as Int32Array).set(offs);
      args[ARG.ATTR_GROUPED_OFFSETS | ARG.SRC] = o;
    } else src.offsets.set(offs);
    if (biasMd) args[ARG.BIAS] = mk(biasMd).write(b);
    new matmul.Primitive(pd).execute(strm, args);
    await strm.wait();
    const got = Float64Array.from(dst.read());
    if (want) {
      const ref = new Float64Array(M * Nd), mag = new Float64Array(M * Nd);
      for (let g = 0; g < G; g++)
        for (let r = offs[g]; r < offs[g + 1]; r++) {
          const col = (n: number): [number, number] => {
            let s = 0, a = 0;
            for (let k = 0; k < K; k++) { s += xs[r * K + k] * w[(g * K + k) * N + n]; a += Math.abs(xs[r * K + k] * w[(g * K + k) * N + n]); }
            return x.bias ? [s + b[g * N + n], a + Math.abs(b[g * N + n])] : [s, a];
          };
          for (let n = 0; n < Nd; n++) {
            let [v, a] = col(n);
            if (x.glu) { const [u, au] = col(n + Nd); v = (v / (1 + Math.exp(-v))) * u; a = a * Math.abs(u) + au * Math.abs(v) + 1e-30; }
            if (x.relu) v = v > 0 ? v : 0.25 * v;
            if (x.sum) { v += 0.5 * before[r * Nd + n]; a += Math.abs(before[r * Nd + n]); }
            ref[r * Nd + n] = v;
            mag[r * Nd + n] = a;
          }
        }
      want.push(ref, mag);
    }
    const raw = dst.bytes();
    const bits = dstDt === dt.f32 ? new Uint32Array(raw.buffer, raw.byteOffset, M * Nd).slice() : new Uint16Array(raw.buffer, raw.byteOffset, M * Nd).slice();
    return { got, bits, impl: pd.implInfo, wname: pd.queryMd('weights')?.packed?.name, wsize: pd.queryMd('weights')!.getSize(0) };
  } finally {
    mems.forEach((m) => m.free());
  }
}

function expectSameBits(a: Run, b: Run, what: string): void {
  const bad: string[] = [];
  for (let i = 0; i < a.bits.length; i++) if (a.bits[i] !== b.bits[i]) bad.push(`${i}: ${a.got[i]} vs ${b.got[i]}`);
  expect(bad.slice(0, 5), `${what}: packed x16 vs plain, bitwise (${bad.length} differ)`).toEqual([]);
}

function expectNearRef(r: Run, ref: Float64Array, mag: Float64Array, tol: number, what: string): void {
  const bad: string[] = [];
  for (let i = 0; i < ref.length; i++) if (!(Math.abs(r.got[i] - ref[i]) <= tol * mag[i] + 1e-30)) bad.push(`${i}: ${r.got[i]} want ${ref[i]}`);
  expect(bad.slice(0, 5), `${what}: vs float64`).toEqual([]);
}

// Experts of 70 rows (a 64-row tile + 6), 0, 1, 2, 3 and 9 rows: in-register decoding and converted blocks.
const SIZES = [70, 0, 1, 2, 3, 9];
const CASES: readonly [string, Omit<Grouped, 'proposal' | 'wdt'>][] = [
  ['K = 99 (odd), N = 21', { K: 99, N: 21, sizes: SIZES }],
  ['K = 7 (< 8), N = 3 (< 8)', { K: 7, N: 3, sizes: SIZES }],
  ['K = 600 (K blocks, pieces), N = 24', { K: 600, N: 24, sizes: [70, 1, 2, 0, 5] }],
  ['one expert takes every row, N = 13', { K: 40, N: 13, sizes: [0, 0, 37, 0] }],
  ['E = 1, one row', { K: 33, N: 16, sizes: [1] }],
  ['E = 1, 2 rows, bias + relu + sum (fast path epilogue)', { K: 33, N: 21, sizes: [2], x: { bias: true, relu: true, sum: true } }],
  ['bias + relu + sum, every tile height', { K: 65, N: 19, sizes: SIZES, x: { bias: true, relu: true, sum: true } }],
  ['swiglu halves, N = 42 (fused path, segments off the panels: converted as it packs)', { K: 41, N: 42, sizes: SIZES, x: { glu: true } }],
  ['swiglu halves, N = 48, K = 300 (fused path on the panels: decode kernels, pieces)', { K: 300, N: 48, sizes: SIZES, x: { glu: true } }],
  ['bf16 dst', { K: 50, N: 21, sizes: SIZES, x: { dstDt: dt.bf16 } }],
  ['accumulation mode relaxed (strict kernels)', { K: 99, N: 21, sizes: SIZES, x: { relaxed: true } }],
];

describe('x16:p8 packed bf16 / f16 weights give bitwise what the same weights give plain', () => {
  const engines: [Engine, Stream][] = [];
  beforeAll(async () => {
    for (const o of ENGINES) {
      const e = await Engine.create(o);
      engines.push([e, new Stream(e)]);
    }
  });
  afterAll(() => engines.forEach(([e]) => e.release()));

  for (const wdt of X16)
    it.each(CASES)(`${wdt}: P#1 / P#2, %s`, async (_name, c) => {
      for (const proposal of ['P1', 'P2'] as const) {
        for (let i = 0; i < engines.length; i++) {
          const [eng, strm] = engines[i];
          const cs: Grouped = { ...c, proposal, wdt };
          const want: Float64Array[] = [];
          const plain = await runGrouped(eng, strm, cs, false, want);
          const packed = await runGrouped(eng, strm, cs, true);
          const what = `${proposal} ${ENGINES[i].kernels} ${ENGINES[i].threads}T`;
          expect(packed.wname, what).toBe(PACKED_X16);
          expect(packed.impl).toMatch(new RegExp(`^wasm:${ENGINES[i].kernels}:f32-gemm-4x8-wx16`));
          expectSameBits(packed, plain, what);
          expectNearRef(packed, want[0], want[1], c.x?.dstDt ? 2 ** -7 : 2e-6, what);
          expect(packed.got.some((v) => v !== 0)).toBe(true);
        }
      }
    });

  it('the packed descriptor takes 2 bytes per weight of ceil(N/8) x 8 columns (K not padded)', () => {
    const [eng] = engines[0];
    for (const wdt of X16) {
      const pd = new matmul.PrimitiveDesc(eng, memory.desc.grouped([10, 99], dt.f32, 3, [RT, 99]), memory.desc([3, 99, 21], wdt, tag.any), memory.desc.grouped([10, 21], dt.f32, 3, [RT, 21]));
      const md = pd.queryMd('weights')!;
      expect(md.packed?.name).toBe(PACKED_X16);
      expect(md.dataType).toBe(wdt);
      expect(md.getSize(0)).toBe(3 * 99 * 24 * 2);
      expect(packedX16WeightsDesc([99, 21], wdt).getSize(0)).toBe(99 * 24 * 2);
    }
    // f32 weights, and bf16 ones with weights scales, keep f32:p8; variable K keeps its plain weights.
    const f32 = new matmul.PrimitiveDesc(eng, memory.desc([4, 16], dt.f32, tag.ab), memory.desc([16, 8], dt.f32, tag.any), memory.desc([4, 8], dt.f32, tag.ab));
    expect(f32.queryMd('weights')?.packed?.name).toBe('f32:p8');
    const attr = new PrimitiveAttr();
    attr.setScales(ARG.WEIGHTS, 2, [], dt.f32);
    const scaled = new matmul.PrimitiveDesc(eng, memory.desc([4, 16], dt.f32, tag.ab), memory.desc([16, 8], dt.bf16, tag.any), memory.desc([4, 8], dt.f32, tag.ab), attr);
    expect(scaled.queryMd('weights')?.packed?.name).toBe('f32:p8');
  });

  it('x16:p8 weights with weights scales are refused with a reason', () => {
    const [eng] = engines[0];
    const attr = new PrimitiveAttr();
    attr.setScales(ARG.WEIGHTS, 2, [], dt.f32);
    expect(() => new matmul.PrimitiveDesc(eng, memory.desc([4, 16], dt.f32, tag.ab), packedX16WeightsDesc([16, 8], dt.bf16), memory.desc([4, 8], dt.f32, tag.ab), attr))
      .toThrow(/x16:p8 weights with weights scales/);
  });

  it.each(X16)('dense matmul, %s weights [K, N], M = 1..70', async (wdt) => {
    for (const [eng, strm] of engines) {
      for (const M of [1, 2, 3, 4, 5, 70]) {
        const K = 77, N = 29;
        const run = async (packed: boolean): Promise<Float32Array> => {
          const mems: Memory[] = [];
          const mk = (md: MemoryDesc): Memory => { const m = Memory.create(md, eng); mems.push(m); return m; };
          try {
            const plainMd = memory.desc([K, N], wdt, tag.ab);
            const pd = new matmul.PrimitiveDesc(eng, memory.desc([M, K], dt.f32, tag.ab), packed ? memory.desc([K, N], wdt, tag.any) : plainMd, memory.desc([M, N], dt.f32, tag.ab));
            if (packed) expect(pd.queryMd('weights')?.packed?.name).toBe(PACKED_X16);
            const r = mulberry32(5);
            const src = mk(pd.queryMd('src')!).write(values(r, M * K));
            const plain = mk(plainMd).write(values(r, K * N));
            const wei = packed ? mk(pd.queryMd('weights')!) : plain;
            if (packed) new reorder.Primitive(new reorder.PrimitiveDesc(eng, plainMd, wei.desc)).execute(strm, { [ARG.FROM]: plain, [ARG.TO]: wei });
            const dst = mk(pd.queryMd('dst')!);
            new matmul.Primitive(pd).execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst });
            await strm.wait();
            return Float32Array.from(dst.read());
          } finally {
            mems.forEach((m) => m.free());
          }
        };
        const a = await run(false), b = await run(true);
        expect(new Uint32Array(b.buffer), `M = ${M}`).toEqual(new Uint32Array(a.buffer));
      }
    }
  });

  it.each(X16)('%s codes with Inf, NaN, subnormals and -0 among them (the f16 kernels\' exact path), M = 1, 2, 5', async (wdt) => {
    const K = 37, N = 21;
    const special = wdt === dt.f16 ? [0x7c00, 0xfc00, 0x7e01, 0x0001, 0x83ff, 0x8000, 0x0400, 0x7bff] : [0x7f80, 0xff80, 0x7fc1, 0x0001, 0x807f, 0x8000, 0x0080, 0x7f7f];
    for (const [eng, strm] of engines) {
      for (const M of [1, 2, 5]) {
        const run = async (packed: boolean): Promise<Uint32Array> => {
          const mems: Memory[] = [];
          const mk = (md: MemoryDesc): Memory => { const m = Memory.create(md, eng); mems.push(m); return m; };
          try {
            const plainMd = memory.desc([K, N], wdt, tag.ab);
            const pd = new matmul.PrimitiveDesc(eng, memory.desc([M, K], dt.f32, tag.ab), packed ? memory.desc([K, N], wdt, tag.any) : plainMd, memory.desc([M, N], dt.f32, tag.ab));
            const r = mulberry32(11);
            const src = mk(pd.queryMd('src')!).write(values(r, M * K));
            const plain = mk(plainMd).write(values(r, K * N));
            const raw = plain.bytes(), c16 = new Uint16Array(raw.buffer, raw.byteOffset, K * N);
            // one special code in a few columns (the others stay finite), subnormals and zeros anywhere
            for (let i = 0; i < K * N; i += 7) c16[i] = special[(i / 7) % special.length];
            const wei = packed ? mk(pd.queryMd('weights')!) : plain;
            if (packed) new reorder.Primitive(new reorder.PrimitiveDesc(eng, plainMd, wei.desc)).execute(strm, { [ARG.FROM]: plain, [ARG.TO]: wei });
            const dst = mk(pd.queryMd('dst')!);
            new matmul.Primitive(pd).execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst });
            await strm.wait();
            const d = dst.bytes();
            return new Uint32Array(d.buffer, d.byteOffset, M * N).slice();
          } finally {
            mems.forEach((m) => m.free());
          }
        };
        const a = await run(false), b = await run(true);
        expect(b, `M = ${M}`).toEqual(a);
        expect(Array.from(a).some((x) => (x & 0x7f800000) !== 0x7f800000), 'finite columns too').toBe(true);
      }
    }
  });

  it.each(X16)('P#3 grouped_gemm, %s weights tag.any (experts of different K and N, an empty one)', async (wdt) => {
    const experts = [{ K: 64, N: 21, rows: 70 }, { K: 33, N: 16, rows: 0 }, { K: 95, N: 9, rows: 1 }, { K: 40, N: 24, rows: 2 }, { K: 7, N: 3, rows: 5 }];
    for (const [eng, strm] of engines) {
      const run = async (packed: boolean): Promise<Float32Array[]> => {
        const rng = mulberry32(9);
        const srcMds = experts.map((e) => memory.desc([RT, e.K], dt.f32, tag.ab));
        const dstMds = experts.map((e) => memory.desc([RT, e.N], dt.f32, tag.ab));
        const plainMds = experts.map((e) => memory.desc([e.K, e.N], wdt, tag.ab));
        const weiMds = packed ? experts.map((e) => memory.desc([e.K, e.N], wdt, tag.any)) : plainMds;
        const dimsMd = memory.desc([experts.length], dt.s32, tag.x);
        const pd = new grouped_gemm.PrimitiveDesc(eng, srcMds, weiMds, dstMds, dimsMd, new PrimitiveAttr());
        expect(pd.implInfo).toMatch(packed ? /f32-gemm-4x8-wx16$/ : /f32-gemm-4x8$/);
        const mems: Memory[] = [];
        const mk = (md: MemoryDesc, h?: number): Memory => { const m = Memory.create(md, eng, h); mems.push(m); return m; };
        try {
          const args: Record<number, Memory> = {};
          const outs: Memory[] = [];
          experts.forEach((e, i) => {
            const cap = Math.max(e.rows, 1);
            const sp = mk(memory.desc([cap, e.K], dt.f32, tag.ab)).write(values(rng, cap * e.K));
            args[ARG.MULTIPLE_SRC + i] = mk(srcMds[i], sp.handles[0]);
            const dp = mk(memory.desc([cap, e.N], dt.f32, tag.ab)).write(new Float64Array(cap * e.N));
            outs.push(dp);
            args[ARG.MULTIPLE_DST + i] = mk(dstMds[i], dp.handles[0]);
            const plain = mk(plainMds[i]).write(values(rng, e.K * e.N));
            if (!packed) args[ARG.MULTIPLE_WEIGHTS + i] = plain;
            else {
              const pw = mk(pd.queryMd('weights', i)!);
              expect(pw.desc.packed?.name).toBe(PACKED_X16);
              new reorder.Primitive(new reorder.PrimitiveDesc(eng, plain.desc, pw.desc)).execute(strm, { [ARG.FROM]: plain, [ARG.TO]: pw });
              args[ARG.MULTIPLE_WEIGHTS + i] = pw;
            }
          });
          args[ARG.RUNTIME_DIMS] = mk(dimsMd).write(experts.map((e) => e.rows));
          new grouped_gemm.Primitive(pd).execute(strm, args);
          await strm.wait();
          return outs.map((o) => Float32Array.from(o.read()));
        } finally {
          mems.forEach((m) => m.free());
        }
      };
      const a = await run(false), b = await run(true);
      a.forEach((x, i) => expect(new Uint32Array(b[i].buffer), `expert ${i}`).toEqual(new Uint32Array(x.buffer)));
      expect(a[0].some((v) => v !== 0)).toBe(true);
    }
  });
});

describe('reorder into x16:p8', () => {
  it.each(X16)('%s: the workers\' packer, the TypeScript one (no kernels) and the layout agree, any strides', async (wdt) => {
    const kern = await Engine.create({ threads: 2, kernels: 'simd128' });
    const ref = await Engine.create({ threads: 1, kernels: 'none' });
    try {
      for (const [dims, t] of [[[2, 13, 19], tag.abc], [[2, 13, 19], tag.acb], [[9, 16], tag.ab], [[9, 16], tag.ba], [[1, 5, 3], tag.abc],
        // whole 4-panel strips (the packer's k-outer path) beside a partial tail, and K over one K block (2048)
        [[2, 13, 45], tag.abc], [[3, 7, 64], tag.abc], [[1, 2050, 33], tag.abc], [[40, 33], tag.ab]] as const) {
        const to = packedX16WeightsDesc(dims, wdt);
        const packs: Uint16Array[] = [];
        let codes: Uint16Array | undefined;
        for (const eng of [kern, ref]) {
          const plainMd = memory.desc([...dims], wdt, t);
          const plain = Memory.create(plainMd, eng);
          const raw = plain.bytes();
          const c16 = new Uint16Array(raw.buffer, raw.byteOffset, raw.length / 2);
          for (let i = 0; i < c16.length; i++) c16[i] = (i * 40503 + 12345) & 0xffff;
          codes = c16.slice();
          const packed = Memory.create(to, eng);
          const r = new reorder.PrimitiveDesc(eng, plainMd, to);
          expect(r.implInfo).toBe(eng === kern ? 'wasm:simd128:pack-x16p8' : 'ref:pack');
          const strm = new Stream(eng);
          new reorder.Primitive(r).execute(strm, { [ARG.FROM]: plain, [ARG.TO]: packed });
          await strm.wait();
          const pb = packed.bytes();
          packs.push(new Uint16Array(pb.buffer, pb.byteOffset, pb.length / 2).slice());
          // the layout: code (g, k, n) at panel n / 8, k-major, padding columns code 0
          const nd = dims.length, G = nd === 3 ? dims[0] : 1, K = dims[nd - 2], N = dims[nd - 1], P = Math.ceil(N / 8);
          const st = plainMd.strides, sg = nd === 3 ? st[0] : 0;
          const bad: string[] = [];
          for (let g = 0; g < G; g++)
            for (let p = 0; p < P; p++)
              for (let k = 0; k < K; k++)
                for (let q = 0; q < 8; q++) {
                  const n = p * 8 + q;
                  const want = n < N ? codes[g * sg + k * st[nd - 2] + n * st[nd - 1]] : 0;
                  const got = packs[packs.length - 1][((g * P + p) * K + k) * 8 + q];
                  if (got !== want) bad.push(`g${g} k${k} n${n}: ${got} want ${want}`);
                }
          expect(bad.slice(0, 5), `${dims.join('x')} ${t}`).toEqual([]);
          plain.free();
          packed.free();
        }
        expect(packs[1]).toEqual(packs[0]);
      }
      // the codes are copied as stored: no conversion into x16:p8
      expect(() => new reorder.PrimitiveDesc(kern, memory.desc([4, 8], dt.f32, tag.ab), packedX16WeightsDesc([4, 8], wdt))).toThrow(/x16:p8 is not supported/);
    } finally {
      kern.release();
      ref.release();
    }
  });
});

describe('in-register bf16 / f16 conversion = the scalar decoders, all 65536 codes (NaN payloads, Inf, subnormals)', () => {
  it.each(X16.flatMap((t) => (['simd128', 'relaxed'] as const).map((isa) => [t, isa] as const)))('%s, %s kernels', async (t, kernels) => {
    const eng = await Engine.create({ threads: 1, kernels });
    try {
      const k = eng.kernels!;
      const n = 65536;
      const codes = eng.alloc(2 * n), a = eng.alloc(4 * n), b = eng.alloc(4 * n);
      new Uint16Array(eng.buffer, codes, n).forEach((_, i, arr) => (arr[i] = i));
      const DT = t === dt.bf16 ? 1 : 2;
      k.check_decode(DT, codes, a, n);
      k.check_decode_wx16(DT, codes, b, n);
      const want = new Uint32Array(eng.buffer, a, n), got = new Uint32Array(eng.buffer, b, n);
      const bad: string[] = [];
      for (let i = 0; i < n; i++) if (want[i] !== got[i]) bad.push(`code ${i.toString(16)}: ${got[i].toString(16)} want ${want[i].toString(16)}`);
      expect(bad.slice(0, 5)).toEqual([]);
    } finally {
      eng.release();
    }
  });
});
