/**
 * Proposal #3 (`grouped_gemm`) on the gpu engine (Dawn on SwiftShader in CI): per-expert GPUBuffers,
 * rows per expert in a device buffer the host never reads (the expert-dims pass validates them and
 * writes each expert's indirect dispatch), against the float64 reference. Every expert has its own
 * src / dst buffers; rows past M_i hold a sentinel that must survive.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gpuKernelTuning } from '../src/primitives/matmul/webgpu_kernel_choice.js';
import {
  ARG, GpuEngine, GpuMemory, Memory, RUNTIME_DIM_VAL, Stream, dt, dtBytes, fromStored, grouped_gemm, matmul, memory, tag, toStored,
  type DataType, type MemoryDesc,
} from '../src/index.js';
import { gpuEngine } from './gpu_helpers.js';
import { SENTINEL, attrFor, expectDnnlError, expectDnnlReject, randomFor, toleranceFor } from './helpers.js';
import { assertClose, refGroupedM, type RefPostOp } from './reference.js';
import { allFirst, balanced, cumulative, emptyMiddle, mulberry32, randomRouting } from './workloads.js';

interface GpuExpert {
  readonly K: number;
  readonly N: number;
  /** M_i, passed in ARG.RUNTIME_DIMS. */
  readonly rows: number;
  /** Rows the expert's src and dst buffers hold (default `rows`; 0 gives zero-size buffers). */
  readonly cap?: number;
  readonly wei?: 'ab' | 'ba' | 'any';
}

interface GpuCase {
  readonly experts: readonly GpuExpert[];
  readonly srcDt?: DataType;
  readonly weiDt?: DataType;
  readonly dstDt?: DataType;
  readonly postOps?: readonly RefPostOp[];
  readonly seed?: number;
}

const round4 = (n: number): number => Math.ceil(n / 4) * 4;
const rows = (cols: number, t: DataType): MemoryDesc => memory.desc([RUNTIME_DIM_VAL, cols], t, tag.ab);

/** Stored bytes of `vals` in type `t` (f32, or 16-bit codes two per word, as GpuMemory stores them). */
function encode(t: DataType, vals: ArrayLike<number>): Uint8Array {
  if (t === 'f32') return new Uint8Array(Float32Array.from(vals).buffer);
  const u = new Uint16Array(vals.length);
  for (let i = 0; i < vals.length; i++) u[i] = toStored(t, vals[i]);
  return new Uint8Array(u.buffer);
}

function decode(t: DataType, bytes: Uint8Array, n: number): Float64Array {
  const copy = bytes.slice(0, dtBytes(t, n));
  if (t === 'f32') return Float64Array.from(new Float32Array(copy.buffer));
  return Float64Array.from(new Uint16Array(copy.buffer), (x) => fromStored(t, x));
}

/** A caller's buffer of exactly `bytes` (rounded to 4: WebGPU's size unit), filled with `init`. */
function callerBuffer(eng: GpuEngine, bytes: number, init?: Uint8Array): GPUBuffer {
  const b = eng.device.createBuffer({ size: round4(bytes), usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST });
  if (init && init.length) {
    const padded = new Uint8Array(round4(init.length));
    padded.set(init);
    eng.device.queue.writeBuffer(b, 0, padded);
  }
  return b;
}

/** Weights [K, N] in the layout the pd chose, written in physical order. */
function weightsMemory(eng: GpuEngine, md: MemoryDesc, w: Float64Array): GpuMemory {
  const [K, N] = md.dims;
  const phys = new Float64Array(md.spanElems);
  for (let k = 0; k < K; k++) for (let n = 0; n < N; n++) phys[k * md.strides[0] + n * md.strides[1]] = w[k * N + n];
  return Memory.create(md, eng).write(phys);
}

interface Fixture {
  readonly pd: grouped_gemm.PrimitiveDesc;
  readonly prim: grouped_gemm.Primitive;
  readonly srcs: GpuMemory[];
  readonly weis: GpuMemory[];
  readonly dsts: GpuMemory[];
  readonly dims: GpuMemory;
  readonly xs: Float64Array[];
  readonly ws: Float64Array[];
  /** Each dst buffer's bytes before execution. */
  readonly dstInit: Uint8Array[];
  args(): Record<number, GpuMemory>;
  free(): void;
}

function setup(eng: GpuEngine, c: GpuCase): Fixture {
  const rng = mulberry32(c.seed ?? 11);
  const srcDt = c.srcDt ?? dt.f32, weiDt = c.weiDt ?? dt.f32, dstDt = c.dstDt ?? dt.f32;
  const E = c.experts.length;
  const dimsMd = memory.desc([E], dt.s32, tag.x);
  const pd = new grouped_gemm.PrimitiveDesc(
    eng, c.experts.map((e) => rows(e.K, srcDt)), c.experts.map((e) => memory.desc([e.K, e.N], weiDt, e.wei === 'any' ? tag.any : e.wei ?? tag.ab)),
    c.experts.map((e) => rows(e.N, dstDt)), dimsMd, attrFor(c.postOps),
  );
  const prim = new grouped_gemm.Primitive(pd);
  const srcs: GpuMemory[] = [], weis: GpuMemory[] = [], dsts: GpuMemory[] = [], xs: Float64Array[] = [], ws: Float64Array[] = [], dstInit: Uint8Array[] = [];
  const owned: GPUBuffer[] = [];
  c.experts.forEach((e, i) => {
    const cap = e.cap ?? e.rows;
    const x = randomFor(srcDt, rng, cap * e.K);
    const sb = callerBuffer(eng, dtBytes(srcDt, cap * e.K), encode(srcDt, x));
    const init = encode(dstDt, new Float64Array(cap * e.N).fill(SENTINEL));
    const db = callerBuffer(eng, init.length, init);
    owned.push(sb, db);
    srcs.push(Memory.create(rows(e.K, srcDt), eng, sb));
    dsts.push(Memory.create(rows(e.N, dstDt), eng, db));
    dstInit.push(init);
    xs.push(x.slice(0, e.rows * e.K));
    const w = randomFor(weiDt, rng, e.K * e.N);
    ws.push(w);
    weis.push(weightsMemory(eng, pd.queryMd('weights', i)!, w));
  });
  const dims = Memory.create(dimsMd, eng).write(c.experts.map((e) => e.rows));
  const args = (): Record<number, GpuMemory> => {
    const a: Record<number, GpuMemory> = { [ARG.RUNTIME_DIMS]: dims };
    for (let i = 0; i < E; i++) {
      a[ARG.MULTIPLE_SRC + i] = srcs[i];
      a[ARG.MULTIPLE_WEIGHTS + i] = weis[i];
      a[ARG.MULTIPLE_DST + i] = dsts[i];
    }
    return a;
  };
  return {
    pd, prim, srcs, weis, dsts, dims, xs, ws, dstInit, args,
    free: () => {
      prim.destroy();
      [...srcs, ...weis, ...dsts, dims].forEach((m) => m.free());
      owned.forEach((b) => b.destroy());
    },
  };
}

/** Each expert's dst: rows [0, M_i) against the reference, the sentinel rows past M_i byte-identical. */
async function checkResults(f: Fixture, c: GpuCase): Promise<Uint8Array[]> {
  const dstDt = c.dstDt ?? dt.f32;
  const out: Uint8Array[] = [];
  for (let i = 0; i < c.experts.length; i++) {
    const e = c.experts[i];
    const bytes = await f.dsts[i].readBytes(0);
    out.push(bytes);
    const got = decode(dstDt, bytes, e.rows * e.N);
    assertClose(got, refGroupedM(f.xs[i], f.ws[i], [e.rows], e.K, e.N, { postOps: c.postOps }), toleranceFor(dstDt), `expert ${i}`);
    const used = dtBytes(dstDt, e.rows * e.N);
    expect([...bytes.subarray(used, f.dstInit[i].length)], `expert ${i}: rows past M_${i}`).toEqual([...f.dstInit[i].subarray(used)]);
  }
  return out;
}

/** The RFC's three experts of different shapes: (K, N) = (5, 7), (33, 8), (64, 1); and wider ones past one 64-column tile. */
const MIXED: GpuExpert[] = [
  { K: 5, N: 7, rows: 3, cap: 4 },
  { K: 33, N: 8, rows: 40, cap: 50 },
  { K: 64, N: 1, rows: 17 },
  { K: 37, N: 70, rows: 130, cap: 131 },
  { K: 1, N: 129, rows: 9, wei: 'ba' },
];

/** Different K and N, all capacities in one tile class (one pipeline per variant: SwiftShader compiles are slow). */
const SMALL: GpuExpert[] = [{ K: 5, N: 7, rows: 3, cap: 4 }, { K: 33, N: 8, rows: 10, cap: 12 }, { K: 64, N: 1, rows: 16 }];

const same = (sizes: readonly number[], K: number, N: number, extra: Partial<GpuExpert> = {}): GpuExpert[] => sizes.map((r) => ({ K, N, rows: r, ...extra }));

describe('Proposal #3: grouped_gemm on the gpu engine', () => {
  let eng: GpuEngine;
  let strm: Stream;
  beforeAll(async () => {
    eng = await gpuEngine();
    strm = new Stream(eng);
  });
  afterAll(() => eng.release());

  const run = async (c: GpuCase): Promise<Uint8Array[]> => {
    const f = setup(eng, c);
    try {
      f.prim.execute(strm, f.args());
      await strm.wait();
      return await checkResults(f, c);
    } finally {
      f.free();
    }
  };

  it('names the webgpu kernel; the reference never runs on a gpu engine', () => {
    const f = setup(eng, { experts: same([2], 3, 4) });
    expect(f.pd.implInfo).toBe('webgpu:gemm-tiled|gemv-splitk+expert-dims');
    f.free();
  });

  describe('numerics vs the float64 reference', () => {
    it('experts with different K and N (K, N not multiples of the tile, rows across M tiles, ba weights)', async () => {
      await run({ experts: MIXED });
    });

    it.each([
      ['balanced', balanced(8, 101)],
      ['empty middle expert', emptyMiddle(9, 101)],
      ['one expert takes all rows', allFirst(6, 101)],
      ['random routing', randomRouting(mulberry32(3), 16, 120)],
    ])('%s, K = 37, N = 19', async (_n, sizes) => {
      await run({ experts: same(sizes, 37, 19, { cap: Math.max(...sizes) }) });
    });

    it('empty experts, one with zero-size buffers', async () => {
      await run({ experts: [{ K: 6, N: 5, rows: 0, cap: 0 }, { K: 6, N: 5, rows: 7 }, { K: 6, N: 5, rows: 0, cap: 3 }, { K: 6, N: 5, rows: 2, cap: 8 }] });
    });

    it('E = 1 (a plain GEMM), rows past M_0 keep their sentinel', async () => {
      await run({ experts: [{ K: 37, N: 19, rows: 50, cap: 64 }] });
    });

    it('E = 1 with zero rows: nothing is written', async () => {
      await run({ experts: [{ K: 5, N: 3, rows: 0, cap: 6 }] });
    });

    it('tag.any weights resolve to plain weights', async () => {
      await run({ experts: same([5, 0, 12], 20, 9, { wei: 'any' }) });
    });

    it('eltwise post-ops (linear, relu)', async () => {
      await run({ experts: SMALL, postOps: [{ kind: 'linear', alpha: -1.5, beta: 0.25 }, { kind: 'relu', alpha: 0.1 }] });
    });

    it.each([dt.bf16, dt.f16])('%s src, weights and dst (odd N: two rows share a word)', async (t) => {
      await run({ experts: SMALL, srcDt: t, weiDt: t, dstDt: t });
    });

    it('a second run gives the same bits', async () => {
      const c: GpuCase = { experts: MIXED };
      const f = setup(eng, c);
      try {
        f.prim.execute(strm, f.args());
        await strm.wait();
        const first = await checkResults(f, c);
        f.prim.execute(strm, f.args());
        await strm.wait();
        const second = await Promise.all(f.dsts.map((d) => d.readBytes(0)));
        second.forEach((b, i) => expect([...b], `expert ${i}`).toEqual([...first[i]]));
      } finally {
        f.free();
      }
    });
  });

  describe('rows are read on the device, never on the host', () => {
    it('runs with a runtime-dims buffer the host cannot read (no COPY_SRC, no MAP_READ)', async () => {
      const c: GpuCase = { experts: SMALL };
      const f = setup(eng, c);
      const sizes = c.experts.map((e) => e.rows);
      const sealed = eng.device.createBuffer({ size: 16, usage: GPUBufferUsage.STORAGE, mappedAtCreation: true });
      new Int32Array(sealed.getMappedRange()).set(sizes);
      sealed.unmap();
      const dims = Memory.create(f.dims.desc, eng, sealed);
      try {
        f.prim.execute(strm, { ...f.args(), [ARG.RUNTIME_DIMS]: dims });
        await strm.wait();
        await checkResults(f, c);
      } finally {
        f.free();
        sealed.destroy();
      }
    });
  });

  describe('bad runtime dims are reported at stream.wait(), nothing is written', () => {
    const bad = async (sizes: number[], status: 'invalid_arguments' | 'runtime_error', fragment: string): Promise<void> => {
      const experts: GpuExpert[] = [{ K: 5, N: 7, rows: 3, cap: 3 }, { K: 33, N: 8, rows: 10, cap: 10 }, { K: 64, N: 1, rows: 2, cap: 2 }];
      const f = setup(eng, { experts });
      try {
        f.dims.write(sizes);
        f.prim.execute(strm, f.args());
        await expectDnnlReject(strm.wait(), status, fragment);
        for (let i = 0; i < experts.length; i++) expect([...(await f.dsts[i].readBytes(0))], `expert ${i}`).toEqual([...f.dstInit[i]]);
        // The stream stays usable: a good execution after the error runs and reports nothing.
        f.dims.write(experts.map((e) => e.rows));
        f.prim.execute(strm, f.args());
        await strm.wait();
        await checkResults(f, { experts });
      } finally {
        f.free();
      }
    };

    it('a size above its expert\'s capacity (same message as the cpu engine)', async () => {
      await bad([3, 11, 2], 'invalid_arguments', "ARG.RUNTIME_DIMS[1] = 11 rows do not fit expert 1's src/dst allocations (10 rows fit)");
    });

    it('a negative size', async () => {
      await bad([3, 10, -1], 'invalid_arguments', 'ARG.RUNTIME_DIMS[2] = -1 must be non-negative');
    });

    it('the first violation in expert order is reported', async () => {
      await bad([4, -5, 3], 'invalid_arguments', "ARG.RUNTIME_DIMS[0] = 4 rows do not fit expert 0's src/dst allocations (3 rows fit)");
    });

    it('rows needing more M tiles than one dispatch dimension: a runtime_error at wait(), nothing computed', async () => {
      // 65536 tiles of 128 rows (the tallest tile): one more than maxComputeWorkgroupsPerDimension (65535).
      const big = 65536 * 128;
      const dimsMd = memory.desc([1], dt.s32, tag.x);
      const pd = new grouped_gemm.PrimitiveDesc(eng, [rows(1, dt.f32)], [memory.desc([1, 1], dt.f32, tag.ab)], [rows(1, dt.f32)], dimsMd);
      const prim = new grouped_gemm.Primitive(pd);
      const sb = callerBuffer(eng, 4 * big), db = callerBuffer(eng, 4 * big, encode(dt.f32, [7, 7, 7, 7]));
      const mems = [Memory.create(rows(1, dt.f32), eng, sb), Memory.create(pd.queryMd('weights')!, eng).write([2]), Memory.create(rows(1, dt.f32), eng, db), Memory.create(dimsMd, eng).write([big])];
      try {
        prim.execute(strm, { [ARG.MULTIPLE_SRC]: mems[0], [ARG.MULTIPLE_WEIGHTS]: mems[1], [ARG.MULTIPLE_DST]: mems[2], [ARG.RUNTIME_DIMS]: mems[3] });
        await expectDnnlReject(strm.wait(), 'runtime_error', `ARG.RUNTIME_DIMS[0] = ${big} rows need more than 65535 row tiles of 128`);
        expect([...new Float32Array((await mems[2].readBytes(0)).buffer, 0, 4)]).toEqual([7, 7, 7, 7]);
      } finally {
        prim.destroy();
        mems.forEach((m) => m.free());
        sb.destroy();
        db.destroy();
      }
    });

    it('capacity is the smaller of src and dst', async () => {
      const dimsMd = memory.desc([1], dt.s32, tag.x);
      const pd = new grouped_gemm.PrimitiveDesc(eng, [rows(4, dt.f32)], [memory.desc([4, 2], dt.f32, tag.ab)], [rows(2, dt.f32)], dimsMd);
      const prim = new grouped_gemm.Primitive(pd);
      const sb = callerBuffer(eng, 4 * 4 * 8), db = callerBuffer(eng, 4 * 2 * 5);
      const mems = [Memory.create(rows(4, dt.f32), eng, sb), Memory.create(pd.queryMd('weights')!, eng), Memory.create(rows(2, dt.f32), eng, db), Memory.create(dimsMd, eng).write([6])];
      try {
        prim.execute(strm, { [ARG.MULTIPLE_SRC]: mems[0], [ARG.MULTIPLE_WEIGHTS]: mems[1], [ARG.MULTIPLE_DST]: mems[2], [ARG.RUNTIME_DIMS]: mems[3] });
        await expectDnnlReject(strm.wait(), 'invalid_arguments', "ARG.RUNTIME_DIMS[0] = 6 rows do not fit expert 0's src/dst allocations (5 rows fit)");
      } finally {
        prim.destroy();
        mems.forEach((m) => m.free());
        sb.destroy();
        db.destroy();
      }
    });
  });

  describe('creation and execute-time rules', () => {
    const one = (attrOps?: readonly RefPostOp[], t: DataType = dt.f32): grouped_gemm.PrimitiveDesc =>
      new grouped_gemm.PrimitiveDesc(eng, [rows(4, t)], [memory.desc([4, 2], t, tag.ab)], [rows(2, t)], memory.desc([1], dt.s32, tag.x), attrFor(attrOps));

    it('what the gpu kernels lack is unimplemented, naming the engine (never the reference)', () => {
      expectDnnlError(() => one(undefined, dt.f8_e5m2), 'unimplemented', 'grouped_gemm: no implementation on the gpu engine (webgpu: dst data type f8_e5m2 is not implemented on the gpu engine yet');
    });

    it('dst sharing a GPUBuffer with src is refused at execute', () => {
      const pd = new grouped_gemm.PrimitiveDesc(eng, [rows(4, dt.f32)], [memory.desc([4, 4], dt.f32, tag.ab)], [rows(4, dt.f32)], memory.desc([1], dt.s32, tag.x));
      const prim = new grouped_gemm.Primitive(pd);
      const b = callerBuffer(eng, 64);
      const s = Memory.create(rows(4, dt.f32), eng, b), d = Memory.create(rows(4, dt.f32), eng, b);
      const w = Memory.create(pd.queryMd('weights')!, eng), dims = Memory.create(memory.desc([1], dt.s32, tag.x), eng).write([1]);
      try {
        expectDnnlError(() => prim.execute(strm, { [ARG.MULTIPLE_SRC]: s, [ARG.MULTIPLE_WEIGHTS]: w, [ARG.MULTIPLE_DST]: d, [ARG.RUNTIME_DIMS]: dims }), 'invalid_arguments', 'share a GPUBuffer');
      } finally {
        prim.destroy();
        [s, d, w, dims].forEach((m) => m.free());
        b.destroy();
      }
    });

    it('cpu memory on a gpu primitive belongs to another engine', async () => {
      const { Engine } = await import('../src/index.js');
      const cpu = await Engine.create({ threads: 1, kernels: 'none' });
      const f = setup(eng, { experts: same([2], 3, 4) });
      const foreign = Memory.create(memory.desc([1], dt.s32, tag.x), cpu);
      try {
        expectDnnlError(() => f.prim.execute(strm, { ...f.args(), [ARG.RUNTIME_DIMS]: foreign as unknown as GpuMemory }), 'invalid_arguments', 'belongs to another engine');
      } finally {
        f.free();
        cpu.release();
      }
    });
  });

  describe('Proposals #1, #2 and #3 agree on the gpu engine', () => {
    it.each([
      ['balanced, G = 8, K = 37, N = 19', balanced(8, 101), 37, 19, 101],
      ['empty middle expert, rows past the last offset, G = 9', emptyMiddle(9, 90), 37, 19, 101],
      ['one expert takes all rows, G = 5, K = 70, N = 130', allFirst(5, 150), 70, 130, 150],
      ['E = 1', [40], 12, 9, 40],
    ])('%s', async (_n, sizes, K, N, totalM) => {
      const G = sizes.length;
      const rng = mulberry32(G * 31 + K);
      const used = sizes.reduce((a, b) => a + b, 0), offs = cumulative(sizes);
      const x = randomFor(dt.f32, rng, totalM * K), w = randomFor(dt.f32, rng, G * K * N);
      const prev = new Float64Array(totalM * N).fill(SENTINEL);
      const mems: GpuMemory[] = [];
      const keep = (m: GpuMemory): GpuMemory => (mems.push(m), m);
      const bufs: GPUBuffer[] = [];
      try {
        const wei = keep(Memory.create(memory.desc([G, K, N], dt.f32, tag.abc), eng).write(w));
        // P1: grouped memory descriptors; dst shares src's offsets buffer.
        const src1Md = memory.desc.grouped([totalM, K], dt.f32, G, [RUNTIME_DIM_VAL, K]);
        const dst1Md = memory.desc.grouped([totalM, N], dt.f32, G, [RUNTIME_DIM_VAL, N]);
        const pd1 = new matmul.PrimitiveDesc(eng, src1Md, wei.desc, dst1Md);
        const src1 = keep(Memory.create(src1Md, eng).write(x).writeOffsets(offs));
        const dst1 = keep(Memory.create(dst1Md, eng, [undefined, src1.buffers[1]]).write(prev));
        // P2: plain memory and the grouped-offsets attribute.
        const src2Md = memory.desc([totalM, K], dt.f32, tag.ab), dst2Md = memory.desc([totalM, N], dt.f32, tag.ab);
        const pd2 = new matmul.PrimitiveDesc(eng, src2Md, wei.desc, dst2Md, attrFor(undefined).setGroupedOffsets(ARG.SRC, G, dt.s32));
        const src2 = keep(Memory.create(src2Md, eng).write(x)), dst2 = keep(Memory.create(dst2Md, eng).write(prev));
        const offs2 = keep(Memory.create(pd2.queryMd('grouped_offsets')!, eng).write(offs));
        // P3: one buffer per expert (a GpuMemory has no views at an offset).
        const pd3 = new grouped_gemm.PrimitiveDesc(eng, sizes.map(() => rows(K, dt.f32)), sizes.map(() => memory.desc([K, N], dt.f32, tag.ab)), sizes.map(() => rows(N, dt.f32)), memory.desc([G], dt.s32, tag.x));
        const a3: Record<number, GpuMemory> = { [ARG.RUNTIME_DIMS]: keep(Memory.create(memory.desc([G], dt.s32, tag.x), eng).write(sizes)) };
        sizes.forEach((m, g) => {
          const sb = callerBuffer(eng, 4 * m * K, encode(dt.f32, x.subarray(offs[g] * K, offs[g + 1] * K)));
          const db = callerBuffer(eng, 4 * m * N);
          bufs.push(sb, db);
          a3[ARG.MULTIPLE_SRC + g] = keep(Memory.create(rows(K, dt.f32), eng, sb));
          a3[ARG.MULTIPLE_WEIGHTS + g] = keep(Memory.create(memory.desc([K, N], dt.f32, tag.ab), eng).write(w.subarray(g * K * N, (g + 1) * K * N)));
          a3[ARG.MULTIPLE_DST + g] = keep(Memory.create(rows(N, dt.f32), eng, db));
        });
        for (const pd of [pd1, pd2]) expect(pd.implInfo).toMatch(/^webgpu:/);
        expect(pd3.implInfo).toMatch(/^webgpu:/);

        new matmul.Primitive(pd1).execute(strm, { [ARG.SRC]: src1, [ARG.WEIGHTS]: wei, [ARG.DST]: dst1 });
        new matmul.Primitive(pd2).execute(strm, { [ARG.SRC]: src2, [ARG.WEIGHTS]: wei, [ARG.DST]: dst2, [ARG.ATTR_GROUPED_OFFSETS | ARG.SRC]: offs2 });
        const p3Dst = async (): Promise<Uint8Array> => {
          const out = new Uint8Array(4 * used * N);
          for (let g = 0; g < G; g++) out.set((await a3[ARG.MULTIPLE_DST + g].readBytes(0)).subarray(0, 4 * sizes[g] * N), 4 * offs[g] * N);
          return out;
        };
        // P#3's experts of at most gemvDenseMaxRows rows take the decode GEMV, whose K order differs from
        // gemm-tiled's; with it off they take gemm-tiled, P#1's kernel here, and its bits.
        new grouped_gemm.Primitive(pd3).execute(strm, a3);
        await strm.wait();
        const p3 = await p3Dst();
        gpuKernelTuning.gemv = false;
        try {
          new grouped_gemm.Primitive(pd3).execute(strm, a3);
          await strm.wait();
        } finally {
          gpuKernelTuning.gemv = true;
        }
        const p3Tiled = await p3Dst();
        const p1 = await dst1.readBytes(0), p2 = await dst2.readBytes(0);
        expect([...p2], 'P1 vs P2').toEqual([...p1]);
        // P#1 takes gemm-tiled above gemvMaxRows rows per group on average (every case here).
        if (totalM / G > gpuKernelTuning.gemvMaxRows) expect([...p3Tiled], 'P1 vs P3 (gemm-tiled)').toEqual([...p1.subarray(0, 4 * used * N)]);
        // Not trivially equal: the shared result is the right one, and unrouted rows kept their sentinel.
        const got = decode(dt.f32, p1, totalM * N);
        const want = refGroupedM(x, w, sizes, K, N);
        assertClose(got.subarray(0, used * N), want, toleranceFor(dt.f32));
        assertClose(decode(dt.f32, p3, used * N), want, toleranceFor(dt.f32), 'P3');
        assertClose(decode(dt.f32, p3Tiled, used * N), want, toleranceFor(dt.f32), 'P3 gemm-tiled');
        expect([...got.subarray(used * N)]).toEqual([...prev.subarray(used * N)]);
      } finally {
        mems.forEach((m) => m.free());
        bufs.forEach((b) => b.destroy());
      }
    });
  });
});
