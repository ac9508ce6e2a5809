/**
 * Dynamic int8 activations (`attr.setDynamicQuantization`, `:dq`, rfcs/0006) on Proposal #3 `grouped_gemm` on the
 * gpu engine (SwiftShader in CI): each expert's first M_i src rows quantized on the device (M_i read there), then
 * the webgpu grouped GEMM on the s8 rows. Checked against the float64 model (dynamic_int8_runner.ts) within the
 * rounding of the float epilogue, and against the cpu engine's P#3 `:dq` (proposal3_dynamic_int8.test.ts checks its
 * bits): s8 / u8 / s4 / u4 weights, per-column and K-block scales, empty experts, one expert taking every row,
 * E = 1, K and N off the tiles, experts of different K / N; rows past M_i hold NaN and are never read; bad M_i
 * and a NaN row raised at wait(), dst untouched.
 */
import { describe, expect, it, vi } from 'vitest';
import { ARG, Engine, GpuEngine, GpuMemory, Memory, PrimitiveAttr, RUNTIME_DIM_VAL as RT, Stream, dt, grouped_gemm, memory, reorder, tag, type DataType } from '../src/index.js';
import { useGpuAndCpuEngines } from './gpu_test_engines.js';
import { dqIntData, dqIntReference, expectClose } from './dynamic_int8_runner.js';
import { expectDnnlReject } from './helpers.js';
import { gpuKernelTuning } from '../src/primitives/matmul/webgpu_kernel_choice.js';

let gpu: GpuEngine;
let cpu: Engine;
useGpuAndCpuEngines((g, c) => { gpu = g; cpu = c; });

/**
 * Expert i: K, N, its rows M_i; its src / dst allocations hold `cap` rows (default M_i + 2, at least 5: NaN src rows
 * past M_i). Capacities of 5 to 64 rows all take the gemv's 8-row tile (and N not a multiple of 4 its scalar loads):
 * SwiftShader compiles a pipeline per tile and weights / scales kind, so the cases share few (seconds each).
 */
interface Ex { readonly K: number; readonly N: number; readonly rows: number; readonly cap?: number }
interface Data { readonly x: Float32Array[]; readonly w: Float64Array[]; readonly sc: Float32Array[] }
/** Weights type and scales: per column (blk 0) or in K blocks of `blk`, of type `sdt` (f32 by default). */
interface Wt { readonly wdt: DataType; readonly blk: number; readonly sdt?: DataType }
const E2M1 = [0, 0.5, 1, 1.5, 2, 3, 4, 6, -0, -0.5, -1, -1.5, -2, -3, -4, -6];
const SENTINEL = 12345;
const capOf = (e: Ex): number => e.cap ?? Math.max(e.rows + 2, 5);

/** A normal f8_e4m3 value near 64 v (v in [0.001, 0.021]: exponents -4..0, 3 mantissa bits kept). */
function e4m3Normal(v: number): number {
  const x = 64 * v, e = 2 ** Math.floor(Math.log2(x));
  return (e * Math.floor((8 * x) / e)) / 8;
}

/**
 * Per-expert data from the runner's seeded generator (one expert at a time: experts may differ in K / N); f4_e2m1
 * weights take e2m1 values, e8m0 scales powers of two, f8_e4m3 ones values of 3 mantissa bits (the types hold them).
 */
function makeData(ex: readonly Ex[], wt: Wt, seed: number): Data {
  const fp4 = wt.wdt === dt.f4_e2m1;
  const ds = ex.map((e, g) => dqIntData({ E: 1, sizes: [e.rows], K: e.K, N: e.N, wdt: fp4 ? dt.s4 : wt.wdt, blk: wt.blk }, seed + g));
  const w = ds.map((d) => (fp4 ? d.w.map((v) => E2M1[v + 8]) : d.w));
  const sc = ds.map((d) => (wt.sdt === dt.e8m0 ? d.sc.map((v) => 2 ** Math.round(Math.log2(v))) : wt.sdt === dt.f8_e4m3 ? d.sc.map(e4m3Normal) : d.sc));
  return { x: ds.map((d) => d.x), w, sc };
}

/** The float64 model of each expert's rows. */
function reference(ex: readonly Ex[], blk: number, d: Data): Float32Array[] {
  return ex.map((e, g) => dqIntReference({ sizes: [e.rows], K: e.K, N: e.N, blk }, d.x[g], d.w[g], d.sc[g], undefined));
}

interface P3 {
  readonly impl: string;
  run(dims?: readonly number[], slots?: (n: number) => void): Promise<Float32Array[]>;
  free(): void;
}

/** A P#3 `:dq` grouped_gemm on either engine kind: tag.any weights (reordered to the pd's layout), src rows past M_i NaN, dst past them SENTINEL. */
function setup(eng: Engine | GpuEngine, strm: Stream, ex: readonly Ex[], wt: Wt, d: Data): P3 {
  const G = ex.length, { wdt, blk } = wt;
  const attr = new PrimitiveAttr().setDynamicQuantization(ARG.SRC, dt.s8);
  if (blk) attr.setScales(ARG.MULTIPLE_WEIGHTS, 3, [blk, 1], wt.sdt ?? dt.f32);
  else attr.setScales(ARG.MULTIPLE_WEIGHTS, 2, [], wt.sdt ?? dt.f32);
  const srcMds = ex.map((e) => memory.desc([RT, e.K], dt.f32, tag.ab)), dstMds = ex.map((e) => memory.desc([RT, e.N], dt.f32, tag.ab));
  const dimsMd = memory.desc([G], dt.s32, tag.x);
  const pd = new grouped_gemm.PrimitiveDesc(eng, srcMds, ex.map((e) => memory.desc([e.K, e.N], wdt, tag.any)), dstMds, dimsMd, attr);
  const mems: (Memory | GpuMemory)[] = [], dsts: (Memory | GpuMemory)[] = [];
  const args: Record<number, Memory | GpuMemory> = {};
  const gpuKind = eng instanceof GpuEngine;
  // A runtime-rows view of `bytes` of a plain memory (its buffer or handle).
  const rows = (md: ReturnType<typeof memory.desc>, m: Memory | GpuMemory, bytes: number): Memory | GpuMemory => (gpuKind
    ? Memory.create(md, eng, (m as GpuMemory).buffers[0], { capacityBytes: bytes }) : Memory.create(md, eng, (m as Memory).handles[0], { capacityBytes: bytes }));
  ex.forEach((e, g) => {
    const cap = capOf(e);
    const xs = new Float32Array(cap * e.K).fill(Number.NaN);
    xs.set(d.x[g]);
    // (no rows of capacity: a 1-row allocation seen as 0 rows)
    const src = Memory.create(memory.desc([Math.max(cap, 1), e.K], dt.f32, tag.ab), eng).write(cap ? xs : new Float32Array(e.K));
    const dst = Memory.create(memory.desc([Math.max(cap, 1), e.N], dt.f32, tag.ab), eng).write(new Float32Array(Math.max(cap, 1) * e.N).fill(SENTINEL));
    const user = Memory.create(memory.desc([e.K, e.N], wdt, tag.ab), eng).write(d.w[g]);
    const scales = Memory.create(pd.queryMd('scales:weights', g)!, eng).write(d.sc[g]);
    const sv = rows(srcMds[g], src, cap * e.K * 4), dv = rows(dstMds[g], dst, cap * e.N * 4);
    mems.push(sv, dv, src, dst, user, scales);
    dsts.push(dst);
    const wmd = pd.queryMd('weights', g)!;
    let wei = user;
    if (!wmd.equals(user.desc)) {
      wei = Memory.create(wmd, eng);
      mems.push(wei);
      new reorder.Primitive(new reorder.PrimitiveDesc(eng, user.desc, wmd)).execute(strm, { [ARG.FROM]: user, [ARG.TO]: wei, [ARG.ATTR_SCALES | ARG.WEIGHTS]: scales });
    }
    args[ARG.MULTIPLE_SRC + g] = sv;
    args[ARG.MULTIPLE_DST + g] = dv;
    args[ARG.MULTIPLE_WEIGHTS + g] = wei;
    // (cpu x8 / x4 +q panels hold the scales)
    if (!wmd.packed?.quant?.scales) args[ARG.ATTR_SCALES | (ARG.MULTIPLE_WEIGHTS + g)] = scales;
  });
  const dims = Memory.create(dimsMd, eng);
  mems.push(dims);
  args[ARG.RUNTIME_DIMS] = dims;
  const prim = new grouped_gemm.Primitive(pd);
  return {
    impl: pd.implInfo,
    async run(m = ex.map((e) => e.rows), slots?: (n: number) => void) {
      dims.write(m);
      const before = gpuKind ? (eng as GpuEngine).status.pending : 0;
      prim.execute(strm, args);
      // (the status slots the execution took: the M_i checks', then one per quantization pass or the gemvs' one)
      slots?.((gpuKind ? (eng as GpuEngine).status.pending : 0) - before);
      await strm.wait();
      return Promise.all(dsts.map(async (x) => Float32Array.from(await x.read())));
    },
    free() {
      mems.forEach((m) => m.free());
      prim.destroy();
    },
  };
}

/** Runs `ex` on the gpu and the cpu engine: each expert's first M_i rows against the model and the cpu's; the rows past them untouched. */
async function compare(ex: readonly Ex[], wt: Wt, seed: number, what: string): Promise<void> {
  const d = makeData(ex, wt, seed);
  const want = reference(ex, wt.blk, d);
  const runs = [setup(gpu, new Stream(gpu), ex, wt, d), setup(cpu, new Stream(cpu), ex, wt, d)];
  try {
    expect(runs[0].impl, what).toMatch(/^webgpu:dynamic-quant\+/);
    expect(runs[1].impl, what).toMatch(/-dq8/);
    const [g, c] = [await runs[0].run(), await runs[1].run()];
    ex.forEach((e, i) => {
      const n = e.rows * e.N;
      expectClose(g[i].subarray(0, n), want[i], `${what} expert ${i} vs the model`);
      expectClose(g[i].subarray(0, n), c[i].subarray(0, n), `${what} expert ${i} vs the cpu`);
      expect(g[i].subarray(n).every((v) => v === SENTINEL), `${what} expert ${i}: rows past M_i untouched`).toBe(true);
    });
  } finally {
    runs.forEach((r) => r.free());
  }
}

const same = (rows: readonly number[], K: number, N: number): Ex[] => rows.map((r) => ({ K, N, rows: r }));

const SHAPES: [string, (blk: number) => Ex[]][] = [
  ['E = 5: a 70-row expert, an empty one, 1-row ones, N = 21', (blk) => same([70, 0, 9, 1, 33], blk ? 96 : 99, 21)],
  ['one expert takes all rows, N = 19', (blk) => same([0, 0, 41, 0], blk ? 64 : 70, 19)],
  ['E = 1, N = 13', (blk) => same([5], blk ? 160 : 130, 13)],
  ['decode: 1 row per expert, K = 256', () => same([1, 1, 1], 256, 24)],
];

describe('dynamic int8 activations on the gpu engine (grouped_gemm :dq, Proposal #3)', () => {
  // Each (weights type, scales) pair runs one shape, so that every shape meets both scale kinds and every int type
  // meets two shapes across the matrix (SwiftShader compiles pipelines per shape: the whole matrix takes minutes).
  const cases = [dt.s8, dt.u8, dt.s4, dt.u4].flatMap((wdt, wi) => [0, 32].map((blk, bi) => {
    const [name, shape] = SHAPES[(wi + 3 * bi) % 4];
    return [`${wdt}, ${blk ? `K-blocks of ${blk}` : 'per-column'} scales, ${name}`, { wdt, blk }, shape(blk)] as const;
  }));
  it.each(cases)('%s: vs the quantization model and the cpu engine', async (name, wt, ex) => {
    await compare(ex, wt, 7 + wt.blk, name);
  });

  it('f4_e2m1 weights: MXFP4 (e8m0 per 32 K) and NVFP4 (f8_e4m3 per 16 K)', async () => {
    // (4 rows of capacity: the gemv's 4-row tile, whose fp4 pipelines compile in half the 8-row one's time)
    const cap4 = (rows: readonly number[], K: number, N: number): Ex[] => rows.map((r) => ({ K, N, rows: r, cap: 4 }));
    await compare(cap4([3, 0, 1], 64, 21), { wdt: dt.f4_e2m1, blk: 32, sdt: dt.e8m0 }, 5, 'mxfp4');
    await compare(cap4([0, 3], 48, 19), { wdt: dt.f4_e2m1, blk: 16, sdt: dt.f8_e4m3 }, 6, 'nvfp4');
  });

  // (N multiples of 8, as the cpu engine's per-expert panels need: the vector-load pipelines of the decode shape's
  // u4 per-column and s8 K-block cases)
  it('experts of different K and N (per-column scales; K blocks of 32 on K multiples of 32)', async () => {
    await compare([{ K: 64, N: 24, rows: 7 }, { K: 160, N: 8, rows: 0 }, { K: 99, N: 40, rows: 3 }], { wdt: dt.u4, blk: 0 }, 3, 'u4 mixed');
    await compare([{ K: 64, N: 24, rows: 7 }, { K: 96, N: 24, rows: 0 }, { K: 32, N: 24, rows: 5 }], { wdt: dt.s8, blk: 32 }, 4, 's8 K-blocks mixed');
    // an expert of no rows of capacity (never quantized nor dispatched), one whose rows fill its allocations
    await compare([{ K: 64, N: 24, rows: 0, cap: 0 }, { K: 99, N: 40, rows: 6, cap: 6 }], { wdt: dt.u4, blk: 0 }, 8, 'u4 no capacity');
  });

  // gpuKernelTuning.gemvQuantSrc: where every expert with rows runs the gemv, it quantizes its own rows (no pass per
  // expert); against the two-pass path on the same primitive and data: the same bits, NaN rows and M_i errors.
  it.each([
    ['s8 per-column, an empty expert, 1-row ones, K and N off the tiles', same([3, 0, 1, 6], 99, 21), { wdt: dt.s8, blk: 0 }, [1, 0, 1, 3]],
    ['s4 K-blocks of 32, one expert takes all rows', same([0, 0, 9, 0], 96, 19), { wdt: dt.s4, blk: 32 }, [0, 0, 4, 0]],
    ['s8 K-blocks of 32, E = 1', same([5], 160, 13), { wdt: dt.s8, blk: 32 }, [2]],
    ['s4 per-column, E = 1', same([6], 130, 13), { wdt: dt.s4, blk: 0 }, [6]],
  ] as const)('gemvs quantizing their rows: the two-pass bits, NaN rows, bad M_i (%s)', async (name, ex, wt, other) => {
    const d = makeData(ex, wt, 11);
    const f = setup(gpu, new Stream(gpu), ex, wt, d);
    const bits = (xs: Float32Array[]): number[][] => xs.map((x) => Array.from(new Uint32Array(x.buffer, x.byteOffset, x.length)));
    // Runs `dims` with and without the gemvs quantizing: the same dst bits or the same error; the passes each path records.
    const both = async (dims: readonly number[]): Promise<{ out: (number[][] | string)[]; slots: number[] }> => {
      const out: (number[][] | string)[] = [], slots: number[] = [];
      for (const on of [true, false]) {
        gpuKernelTuning.gemvQuantSrc = on;
        try {
          out.push(bits(await f.run(dims, (n) => slots.push(n))));
        } catch (e) {
          out.push(String(e));
        } finally {
          gpuKernelTuning.gemvQuantSrc = true;
        }
      }
      return { out, slots };
    };
    try {
      const want = reference(ex, wt.blk, d);
      const first = await f.run();
      ex.forEach((e, i) => expectClose(first[i].subarray(0, e.rows * e.N), want[i], `${name}: expert ${i} vs the model`));
      for (const dims of [ex.map((e) => e.rows), other]) {
        const r = await both(dims);
        expect(typeof r.out[0], `${name} ${dims}`).not.toBe('string');
        expect(r.out[0], `${name} ${dims}: same bits`).toEqual(r.out[1]);
        // M_i checks + the gemvs' NaN slot, vs M_i checks + one quantization pass per expert with rows of capacity
        expect(r.slots, `${name} ${dims}: passes`).toEqual([2, 1 + ex.length]);
      }
      // The rows past M_i are NaN (the setup's padding): M_i + 1 takes one in, and in two experts the lower one is
      // reported; one M_i past the capacity is reported before any NaN row.
      const nan = ex.map((e) => e.rows + 1);
      const last = ex.length - 1;
      const bad = ex.map((e, i) => (i === last ? capOf(e) + 1 : e.rows + 1));
      for (const [dims, fragment] of [
        [nan, `grouped_gemm.execute: src[0] row ${ex[0].rows} has a NaN or infinite value`],
        [bad, `ARG.RUNTIME_DIMS[${last}] = ${capOf(ex[last]) + 1} rows do not fit expert ${last}'s src/dst allocations`],
      ] as const) {
        const r = await both(dims);
        expect(r.out[0], `${name} ${dims}`).toContain(fragment);
        expect(r.out[0], `${name} ${dims}: the two-pass error`).toEqual(r.out[1]);
      }
    } finally {
      f.free();
    }
  });

  // The gemv quantizing its rows stages their codes in workgroup memory where R rows x ceil(K / 4) words fit beside
  // its other variables (gemvQuantStageWords), else each lane requantizes the codes it reads: both give the two-pass
  // bits, and neither allocates the two-pass workspace. `staged`: the form gemvQuantStage = true takes.
  it.each([
    // 8-row tile: 8 x 2050 words (65600 bytes) past any workgroup memory limit up to 64 KiB
    ['K = 8200 past workgroup memory (8-row tile), an empty expert, one expert takes all rows', same([0, 6, 0], 8200, 12), { wdt: dt.s8, blk: 0 }, false],
    // 1-row tile: 2050 words (8200 bytes) beside the 4 KiB reduction fit the 16 KiB default
    ['K = 8200 staged (1 row of capacity), an empty expert', [{ K: 8200, N: 12, rows: 1, cap: 1 }, { K: 8200, N: 12, rows: 0, cap: 1 }], { wdt: dt.s8, blk: 0 }, true],
    ['E = 1, K = 1030 (not a multiple of 4 nor of the unroll), N = 13', same([5], 1030, 13), { wdt: dt.u8, blk: 0 }, true],
    ['K-blocks of 32, K = 352, 1-row experts and an empty one', same([1, 0, 2], 352, 19), { wdt: dt.u4, blk: 32 }, true],
  ] as const)('gemvs quantizing their rows, codes staged or requantized per lane: the two-pass bits, no workspace (%s)', async (name, ex, wt, staged) => {
    expect(gpu.caps.maxComputeWorkgroupStorageSize, 'the cases assume a limit from 16 to 64 KiB').toBeLessThanOrEqual(65536);
    const d = makeData(ex, wt, 13);
    const f = setup(gpu, new Stream(gpu), ex, wt, d);
    const pipes = vi.spyOn(gpu, 'pipeline'), buffers = vi.spyOn(gpu, 'createBuffer');
    // Runs `dims` with codes staged (where they fit), requantized per lane, and on the two-pass path: the dst bits or
    // the error, the gemv keys quantizing f32 rows (':qf32' then 'w<words>' where staged) and the buffers created.
    const run = async (dims: readonly number[], stage: boolean, quantSrc: boolean): Promise<{ out: number[][] | string; keys: string[]; made: string[] }> => {
      gpuKernelTuning.gemvQuantStage = stage;
      gpuKernelTuning.gemvQuantSrc = quantSrc;
      pipes.mockClear();
      buffers.mockClear();
      try {
        const xs = await f.run(dims);
        return { out: xs.map((x) => Array.from(new Uint32Array(x.buffer, x.byteOffset, x.length))), keys: keysOf(), made: madeOf() };
      } catch (e) {
        return { out: String(e), keys: keysOf(), made: madeOf() };
      } finally {
        gpuKernelTuning.gemvQuantStage = true;
        gpuKernelTuning.gemvQuantSrc = true;
      }
    };
    const keysOf = (): string[] => [...new Set(pipes.mock.calls.map((c) => c[0]).filter((k) => k.includes(':qf32')))];
    const madeOf = (): string[] => buffers.mock.calls.map((c) => c[1]);
    const words = Math.ceil(ex[0].K / 4);
    try {
      const want = reference(ex, wt.blk, d);
      for (const [j, dims] of [ex.map((e) => e.rows), ex.map((e) => Math.min(e.rows, 1))].entries()) {
        const [st, lanes, two] = [await run(dims, true, true), await run(dims, false, true), await run(dims, true, false)];
        expect(typeof st.out, `${name} ${dims}: ${st.out}`).not.toBe('string');
        ex.forEach((e, i) => {
          const got = new Float32Array(new Uint32Array((st.out as number[][])[i]).buffer).subarray(0, dims[i] * e.N);
          expectClose(got, want[i].subarray(0, dims[i] * e.N), `${name} ${dims}: expert ${i} vs the model`);
        });
        expect(st.out, `${name} ${dims}: staged vs per-lane bits`).toEqual(lanes.out);
        expect(st.out, `${name} ${dims}: vs the two-pass bits`).toEqual(two.out);
        expect(st.keys.length, `${name}: gemv keys ${st.keys}`).toBeGreaterThan(0);
        expect(st.keys.every((k) => k.includes(`:qf32w${words}:`) === staged), `${name}: staged keys ${st.keys}`).toBe(true);
        expect(lanes.keys.every((k) => k.includes(':qf32:')), `${name}: per-lane keys ${lanes.keys}`).toBe(true);
        // The two-pass workspace (s8 rows, scales, a quantization pass per expert) only where the passes run: made by
        // the primitive's first two-pass execution, then kept.
        for (const r of [st, lanes]) expect(r.made.filter((l) => l === 'dynamic_quant params' || l.startsWith('Memory.create')), `${name}: buffers made`).toEqual([]);
        if (j === 0) expect(two.made, `${name}: the passes' workspace`).toContain('dynamic_quant params');
      }
      // A NaN row (the setup's padding past M_i) in the first expert with rows: the two-pass error either way.
      const nan = ex.map((e, i) => (i === ex.findIndex((x) => x.rows > 0) ? e.rows + 1 : e.rows));
      if (nan.every((m, i) => m <= capOf(ex[i]))) {
        const [st, lanes, two] = [await run(nan, true, true), await run(nan, false, true), await run(nan, true, false)];
        expect(st.out, `${name} ${nan}`).toContain('has a NaN or infinite value');
        expect([lanes.out, two.out], `${name} ${nan}`).toEqual([st.out, st.out]);
      }
    } finally {
      pipes.mockRestore();
      buffers.mockRestore();
      f.free();
    }
  });

  it('a second execution with other M_i reuses the workspace; a bad M_i (dst untouched) and a NaN row are raised at wait()', async () => {
    const ex = same([3, 4, 5], 64, 17), wt = { wdt: dt.s4, blk: 32 }, d = makeData(ex, wt, 2);
    const strm = new Stream(gpu);
    const f = setup(gpu, strm, ex, wt, d);
    try {
      const full = await f.run();
      const want = reference(ex, 32, d);
      ex.forEach((e, i) => expectClose(full[i].subarray(0, e.rows * e.N), want[i], `expert ${i}`));
      // fewer rows: the first ones again, bit for bit (rows are quantized on their own)
      const fewer = await f.run([1, 0, 2]);
      [1, 0, 2].forEach((m, i) => expect(Array.from(fewer[i].subarray(0, m * 17)), `M = ${m}, expert ${i}`).toEqual(Array.from(full[i].subarray(0, m * 17))));
      for (const [dims, fragment] of [
        [[3, 7, 5], "ARG.RUNTIME_DIMS[1] = 7 rows do not fit expert 1's src/dst allocations (6 rows fit)"],
        [[3, -1, 5], 'ARG.RUNTIME_DIMS[1] = -1 must be non-negative'],
        [[3, 4, 8], "ARG.RUNTIME_DIMS[2] = 8 rows do not fit expert 2's src/dst allocations (7 rows fit)"],
        // expert 0's row 3 is a NaN row (the setup's padding): the M_i error comes first, as on the cpu engine
        [[4, 7, 5], "ARG.RUNTIME_DIMS[1] = 7 rows do not fit expert 1's src/dst allocations (6 rows fit)"],
      ] as const) {
        const before = await f.run([0, 0, 0]);
        await expectDnnlReject(f.run(dims), 'invalid_arguments', fragment);
        const after = await f.run([0, 0, 0]);
        after.forEach((a, i) => expect(Array.from(a), `${dims}: dst ${i} untouched`).toEqual(Array.from(before[i])));
      }
      // Row 4 of expert 1 is past its M_i = 4 (a NaN row of the setup's padding): inside at M_1 = 5. Reported at
      // wait(); the GEMM is recorded with the quantization, so unlike the cpu engine's, dst is not kept.
      await expectDnnlReject(f.run([3, 5, 5]), 'invalid_arguments', 'grouped_gemm.execute: src[1] row 4 has a NaN or infinite value');
    } finally {
      f.free();
    }
  });
});
