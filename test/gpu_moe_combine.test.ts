/**
 * moe.combine on the gpu engine (SwiftShader in CI): the cpu engine's bits (f32 products added in slot
 * order from +0) for routed (grouped, plain, batched) and scattered src, weighted or not, dst f32 /
 * bf16 / f16, against a float64 reference as well; T = 0 and 1, k = 1, rows no slot reads (empty
 * experts), every slot on one expert, N not a multiple of the 64-column workgroup; bad row_of raised
 * at wait() with dst untouched; a second run gives the same bits.
 */
import { describe, expect, it } from 'vitest';
import {
  ARG, Engine, GpuEngine, GpuMemory, Memory, RUNTIME_DIM_VAL, Stream, dt, memory, moe, tag, type DataType, type MemoryDesc,
} from '../src/index.js';
import { useGpuAndCpuEngines } from './gpu_test_engines.js';
import { expectDnnlError, expectDnnlReject } from './helpers.js';
import { mulberry32, randomF32, type Rng } from './workloads.js';

let gpu: GpuEngine;
let cpu: Engine;
useGpuAndCpuEngines((g, c) => { gpu = g; cpu = c; });

type SrcKind = 'plain' | 'grouped' | 'batched' | 'scattered';

interface Case {
  readonly name: string;
  readonly T: number;
  readonly k: number;
  readonly N: number;
  readonly src: SrcKind;
  /** Experts (grouped / batched); each slot's expert picks its row. */
  readonly E?: number;
  readonly weighted?: boolean;
  readonly dst?: DataType;
  /** All slots go to expert 0. */
  readonly oneExpert?: boolean;
  /** Every `absentEvery`-th slot is -1 (not routed here). */
  readonly absentEvery?: number;
}

interface Data {
  readonly srcMd: MemoryDesc;
  readonly dstMd: MemoryDesc;
  readonly y: Float64Array;
  readonly rowOf: Int32Array;
  readonly w: Float64Array;
  readonly offsets?: Int32Array;
  readonly srcLd: number;
}

/** Routed rows for the case: slots sorted by expert (stable), row_of their position; capacity spare rows. */
function makeData(c: Case, rng: Rng): Data {
  const { T, k, N } = c;
  const E = c.E ?? 3;
  const ids = Array.from({ length: T * k }, () => (c.oneExpert ? 0 : Math.floor(rng() * E)));
  const rowOf = new Int32Array(T * k);
  let srcMd: MemoryDesc, offsets: Int32Array | undefined, srcLd = N;
  if (c.src === 'scattered') {
    srcMd = memory.desc([T * k, N], dt.f32, tag.ab);
    for (let i = 0; i < T * k; i++) rowOf[i] = 0;
  } else if (c.src === 'batched') {
    const C = T + 1;
    srcMd = memory.desc([E, C, N], dt.f32, tag.abc);
    const fill = new Array<number>(E).fill(0);
    for (let i = 0; i < T * k; i++) rowOf[i] = ids[i] * C + fill[ids[i]]++;
  } else {
    const order = Array.from({ length: T * k }, (_, i) => i).sort((a, b) => ids[a] - ids[b] || a - b);
    order.forEach((slot, pos) => { rowOf[slot] = pos; });
    const rows = T * k + 2; // spare rows past the last offset: never read
    srcLd = N + (c.src === 'plain' ? 3 : 0);
    if (c.src === 'grouped') {
      srcMd = memory.desc.grouped([rows, N], dt.f32, E, [RUNTIME_DIM_VAL, N]);
      offsets = new Int32Array(E + 1);
      for (const e of ids) offsets[e + 1]++;
      for (let e = 0; e < E; e++) offsets[e + 1] += offsets[e];
    } else srcMd = memory.desc([rows, N], dt.f32, [srcLd, 1]);
  }
  if (c.absentEvery) for (let i = c.absentEvery - 1; i < T * k; i += c.absentEvery) rowOf[i] = -1;
  const y = randomF32(rng, srcMd.spanElems).map((v) => 4 * v);
  const w = randomF32(rng, T * k).map((v) => v + 0.5);
  const dstMd = memory.desc([T, N], c.dst ?? dt.f32, tag.ab);
  return { srcMd, dstMd, y, rowOf, w, offsets, srcLd };
}

function pdOf(eng: Engine | GpuEngine, c: Case, d: Data): moe.combine.PrimitiveDesc {
  return new moe.combine.PrimitiveDesc(eng, {
    tokens: c.T, topK: c.k, src: d.srcMd, dst: d.dstMd, input: c.src === 'scattered' ? 'scattered' : 'routed', ...(c.weighted === undefined ? {} : { weighted: c.weighted }),
  });
}

async function runGpu(c: Case, d: Data, runs = 1): Promise<{ out: Float32Array[]; implInfo: string }> {
  const pd = pdOf(gpu, c, d);
  const strm = new Stream(gpu);
  const prim = new moe.combine.Primitive(pd);
  const src = Memory.create(d.srcMd, gpu).write(d.y);
  if (d.offsets) src.writeOffsets(d.offsets);
  const ro = Memory.create(pd.queryMd('row_of')!, gpu).write(d.rowOf);
  const wmd = pd.queryMd('topk_weights');
  const w = wmd ? Memory.create(wmd, gpu).write(d.w) : undefined;
  const out: Float32Array[] = [];
  for (let i = 0; i < runs; i++) {
    const dst = Memory.create(d.dstMd, gpu).write(new Array<number>(d.dstMd.spanElems).fill(-7));
    prim.execute(strm, { [ARG.SRC]: src, [ARG.MOE_ROW_OF]: ro, [ARG.MOE_TOPK_WEIGHTS]: w, [ARG.DST]: dst });
    await strm.wait();
    out.push(Float32Array.from(await dst.read()));
    dst.free();
  }
  return { out, implInfo: pd.implInfo };
}

async function runCpu(c: Case, d: Data): Promise<Float32Array> {
  const pd = pdOf(cpu, c, d);
  const strm = new Stream(cpu);
  const src = Memory.create(d.srcMd, cpu);
  src.write(d.y);
  if (d.offsets) src.offsets.set(d.offsets);
  const ro = Memory.create(pd.queryMd('row_of')!, cpu);
  (ro.values as Int32Array).set(d.rowOf);
  const wmd = pd.queryMd('topk_weights');
  const w = wmd ? Memory.create(wmd, cpu) : undefined;
  w?.write(d.w);
  const dst = Memory.create(d.dstMd, cpu);
  new moe.combine.Primitive(pd).execute(strm, { [ARG.SRC]: src, [ARG.MOE_ROW_OF]: ro, [ARG.MOE_TOPK_WEIGHTS]: w, [ARG.DST]: dst });
  await strm.wait();
  return Float32Array.from(dst.read());
}

/** Float64 reference of the routed / scattered weight-and-reduce (the inputs as stored in f32). */
function reference(c: Case, d: Data): { ref: Float64Array; mag: Float64Array } {
  const { T, k, N } = c;
  const weighted = c.weighted ?? c.src !== 'scattered';
  const y = Float32Array.from(d.y), w = Float32Array.from(d.w);
  const ref = new Float64Array(T * N), mag = new Float64Array(T * N);
  for (let t = 0; t < T; t++) for (let s = 0; s < k; s++) {
    const i = t * k + s, r = d.rowOf[i];
    if (r < 0) continue;
    const row = c.src === 'scattered' ? i : r;
    for (let n = 0; n < N; n++) {
      const v = (weighted ? w[i] : 1) * y[row * d.srcLd + n];
      ref[t * N + n] += v;
      mag[t * N + n] += Math.abs(v);
    }
  }
  return { ref, mag };
}

const CASES: readonly Case[] = [
  { name: 'grouped src, weighted, N = 37', T: 9, k: 2, N: 37, src: 'grouped', E: 4 },
  { name: 'grouped src with empty experts, slots absent', T: 11, k: 3, N: 70, src: 'grouped', E: 8, absentEvery: 4 },
  { name: 'one expert takes every slot', T: 6, k: 2, N: 65, src: 'grouped', E: 3, oneExpert: true },
  { name: 'plain strided src, k = 1', T: 5, k: 1, N: 64, src: 'plain' },
  { name: 'plain src, unweighted', T: 4, k: 3, N: 19, src: 'plain', weighted: false },
  { name: 'batched [E, C, N] src', T: 7, k: 2, N: 33, src: 'batched', E: 3 },
  { name: 'scattered (unweighted default), absent slots', T: 8, k: 2, N: 129, src: 'scattered', absentEvery: 3 },
  { name: 'scattered weighted', T: 3, k: 4, N: 12, src: 'scattered', weighted: true },
  { name: 'T = 1', T: 1, k: 4, N: 5, src: 'grouped', E: 1 },
  { name: 'E = 1', T: 5, k: 1, N: 8, src: 'grouped', E: 1 },
  { name: 'dst bf16', T: 6, k: 2, N: 21, src: 'grouped', dst: dt.bf16 },
  { name: 'dst f16, odd N (halves of a word in two rows)', T: 6, k: 3, N: 31, src: 'plain', dst: dt.f16 },
  { name: 'N = 1', T: 7, k: 2, N: 1, src: 'grouped', E: 2 },
  { name: 'T k = 609 > 256: the check pass before the combine', T: 203, k: 3, N: 70, src: 'grouped', E: 5, absentEvery: 7 },
  { name: 'dst bf16, T = 21', T: 21, k: 2, N: 21, src: 'grouped', dst: dt.bf16 },
  { name: 'k = 6 (four slots at a time, then a tail), absent slots, N = 44 (four columns per invocation)', T: 9, k: 6, N: 44, src: 'grouped', E: 5, absentEvery: 5 },
  { name: 'k = 8 unweighted plain src, absent slots', T: 5, k: 8, N: 70, src: 'plain', weighted: false, absentEvery: 3 },
  { name: 'k = 8 weighted, N = 260 (four columns per invocation, a partial workgroup)', T: 6, k: 8, N: 260, src: 'grouped', E: 7, absentEvery: 6 },
];

describe('moe.combine on the gpu engine', () => {
  it.each(CASES)('$name: the cpu engine\'s bits, float64 within the f32 rounding, the same bits twice', async (c) => {
    const d = makeData(c, mulberry32(c.T * 131 + c.N));
    const g = await runGpu(c, d, 2);
    expect(g.implInfo).toBe('webgpu:moe-combine');
    const want = await runCpu(c, d);
    const bad: string[] = [];
    for (let i = 0; i < want.length; i++) if (!Object.is(g.out[0][i], want[i])) bad.push(`[${i}] gpu ${g.out[0][i]} cpu ${want[i]}`);
    expect(bad.slice(0, 5), `${bad.length} of ${want.length} differ from the cpu engine`).toEqual([]);
    expect(Buffer.from(g.out[1].buffer).equals(Buffer.from(g.out[0].buffer)), 'second run').toBe(true);
    const { ref, mag } = reference(c, d);
    const u = c.dst === dt.bf16 ? 2 ** -8 : c.dst === dt.f16 ? 2 ** -11 : 0;
    for (let i = 0; i < ref.length; i++) {
      expect(Math.abs(g.out[0][i] - ref[i]), `element ${i}`).toBeLessThanOrEqual(c.k * 2 ** -23 * mag[i] + u * Math.abs(ref[i]) + 1e-30);
    }
  });

  it('T = 0 is a no-op (routed, scattered, batched)', async () => {
    const strm = new Stream(gpu);
    for (const [src, input] of [[memory.desc([0, 5], dt.f32, tag.ab), 'routed'], [memory.desc([0, 5], dt.f32, tag.ab), 'scattered'], [memory.desc([3, 4, 5], dt.f32, tag.abc), 'routed']] as const) {
      const pd = new moe.combine.PrimitiveDesc(gpu, { tokens: 0, topK: 2, input, src, dst: memory.desc([0, 5], dt.f32, tag.ab) });
      const m = (what: Parameters<moe.combine.PrimitiveDesc['queryMd']>[0]): GpuMemory | undefined => {
        const md = pd.queryMd(what);
        return md && Memory.create(md, gpu);
      };
      const y = m('src')!;
      if (y.elementCount) y.write(new Array<number>(y.elementCount).fill(3));
      new moe.combine.Primitive(pd).execute(strm, { [ARG.SRC]: y, [ARG.MOE_ROW_OF]: m('row_of'), [ARG.MOE_TOPK_WEIGHTS]: m('topk_weights'), [ARG.DST]: m('dst') });
      await strm.wait();
      expect(Array.from(await y.read()).every((v) => v === 3)).toBe(true);
    }
  });

  it.each([[13, 37], [1400, 37], [13, 36], [1400, 36]])('row_of out of [-1, rows) is raised at wait() with the cpu message; dst untouched; a good run after it works (T = %i, k = 3: check fused / check pass; N = %i: a column per invocation / four)', async (T, N) => {
    const c: Case = { name: 'bad', T, k: 3, N, src: 'plain' };
    const d = makeData(c, mulberry32(5));
    const rows = d.srcMd.dims[0];
    const pd = pdOf(gpu, c, d);
    const prim = new moe.combine.Primitive(pd);
    const strm = new Stream(gpu);
    const src = Memory.create(d.srcMd, gpu).write(d.y);
    const w = Memory.create(pd.queryMd('topk_weights')!, gpu).write(d.w);
    const dst = Memory.create(d.dstMd, gpu);
    for (const [i, v, msg] of [
      [7, rows, `ARG.MOE_ROW_OF[2, 1] = ${rows} is out of range [-1, rows = ${rows})`],
      [38, -2, 'ARG.MOE_ROW_OF[12, 2] = -2 is out of range'],
      [3 * T - 1, -2, `ARG.MOE_ROW_OF[${T - 1}, 2] = -2 is out of range`],
    ] as const) {
      const bad = Int32Array.from(d.rowOf);
      bad[i] = v;
      if (i === 7) bad[30] = rows + 5; // a later bad entry: the first one is reported
      const ro = Memory.create(pd.queryMd('row_of')!, gpu).write(bad);
      dst.write(new Array<number>(d.dstMd.spanElems).fill(3));
      prim.execute(strm, { [ARG.SRC]: src, [ARG.MOE_ROW_OF]: ro, [ARG.MOE_TOPK_WEIGHTS]: w, [ARG.DST]: dst });
      await expectDnnlReject(strm.wait(), 'invalid_arguments', msg);
      expect(Array.from(await dst.read()).every((x) => x === 3), 'dst untouched').toBe(true);
    }
    const ro = Memory.create(pd.queryMd('row_of')!, gpu).write(d.rowOf);
    prim.execute(strm, { [ARG.SRC]: src, [ARG.MOE_ROW_OF]: ro, [ARG.MOE_TOPK_WEIGHTS]: w, [ARG.DST]: dst });
    await strm.wait();
    expect(Array.from(await dst.read())).toEqual(Array.from(await runCpu(c, d)));
  });

  it('a scattered row_of is a mask: any value >= 0 is fine, below -1 is an error', async () => {
    const c: Case = { name: 'mask', T: 4, k: 2, N: 6, src: 'scattered' };
    const d = makeData(c, mulberry32(9));
    const rowOf = Int32Array.from([5, 1000, -1, 0, 7, 7, -1, -1]);
    const dm = { ...d, rowOf };
    const g = await runGpu(c, dm);
    expect(Array.from(g.out[0])).toEqual(Array.from(await runCpu(c, dm)));
    const pd = pdOf(gpu, c, d);
    const strm = new Stream(gpu);
    const dst = Memory.create(d.dstMd, gpu);
    new moe.combine.Primitive(pd).execute(strm, {
      [ARG.SRC]: Memory.create(d.srcMd, gpu).write(d.y), [ARG.MOE_ROW_OF]: Memory.create(pd.queryMd('row_of')!, gpu).write([0, 1, 2, -3, 0, 0, 0, 0]), [ARG.DST]: dst,
    });
    await expectDnnlReject(strm.wait(), 'invalid_arguments', 'ARG.MOE_ROW_OF[1, 1] = -3 is out of range [-1, inf)');
  });

  it('argument rules: the same descriptor checks; cpu memory, a missing or an aliased argument are refused', () => {
    expectDnnlError(() => new moe.combine.PrimitiveDesc(gpu, { tokens: 4, topK: 2, input: 'scattered', src: memory.desc([7, 8], dt.f32, tag.ab), dst: memory.desc([4, 8], dt.f32, tag.ab) }), 'invalid_arguments', 'a scattered src must have tokens x topK = 8 rows');
    expectDnnlError(() => new moe.combine.PrimitiveDesc(gpu, { tokens: 4, topK: 2, src: memory.desc([8, 8], dt.bf16, tag.ab), dst: memory.desc([4, 8], dt.f32, tag.ab) }), 'unimplemented', 'src data type bf16');
    const pd = new moe.combine.PrimitiveDesc(gpu, { tokens: 4, topK: 2, src: memory.desc([8, 8], dt.f32, tag.ab), dst: memory.desc([4, 8], dt.f32, tag.ab) });
    const prim = new moe.combine.Primitive(pd);
    const strm = new Stream(gpu);
    const y = Memory.create(pd.queryMd('src')!, gpu), ro = Memory.create(pd.queryMd('row_of')!, gpu), w = Memory.create(pd.queryMd('topk_weights')!, gpu), out = Memory.create(pd.queryMd('dst')!, gpu);
    expectDnnlError(() => prim.execute(strm, { [ARG.SRC]: y, [ARG.MOE_ROW_OF]: ro, [ARG.DST]: out }), 'invalid_arguments', 'missing argument ARG.MOE_TOPK_WEIGHTS');
    const host = Memory.create(pd.queryMd('row_of')!, cpu);
    expectDnnlError(() => prim.execute(strm, { [ARG.SRC]: y, [ARG.MOE_ROW_OF]: host as never, [ARG.MOE_TOPK_WEIGHTS]: w, [ARG.DST]: out }), 'invalid_arguments', 'ARG.MOE_ROW_OF must be a Memory object of the gpu engine');
    const alias = Memory.create(pd.queryMd('dst')!, gpu, y.buffers[0]);
    expectDnnlError(() => prim.execute(strm, { [ARG.SRC]: y, [ARG.MOE_ROW_OF]: ro, [ARG.MOE_TOPK_WEIGHTS]: w, [ARG.DST]: alias }), 'invalid_arguments', 'ARG.DST values overlap ARG.SRC values');
  });
});

describe('moe.combine on the gpu engine: more tokens than one dispatch dimension holds', () => {
  it('T = 32771 tokens (the grid folds tokens past 32768 into z): the cpu engine\'s bits', async () => {
    const c: Case = { name: 'fold', T: 32771, k: 2, N: 3, src: 'grouped', E: 2 };
    const d = makeData(c, mulberry32(17));
    const g = await runGpu(c, d);
    const want = await runCpu(c, d);
    expect(Buffer.from(g.out[0].buffer).equals(Buffer.from(want.buffer))).toBe(true);
  });
});

describe('the MoE stages of this file on the gpu engine, chained', () => {
  it('GEMM1 -> moe.activation -> dynamic_quant -> GEMM2 -> moe.combine record into one submit (nothing submitted or mapped before wait) and agree with the cpu engine', async () => {
    const { dynamic_quant, matmul } = await import('../src/index.js');
    const T = 5, k = 2, E = 3, K = 12, I = 10, N = 9;
    const rng = mulberry32(2024);
    const rowOf = Int32Array.from([0, 5, 1, 6, 2, 9, 3, 7, 4, 8]); // expert 0: slots 0, 2, 4, 6, 8; expert 1: 1, 3, 7, 9; expert 2: 5
    const offs = [0, 5, 9, 10];
    const R = T * k;
    const x = randomF32(rng, R * K), w1 = randomF32(rng, E * K * 2 * I), w2 = randomF32(rng, E * I * N), tw = randomF32(rng, T * k).map((v) => v + 0.5);
    const xMd = memory.desc.grouped([R, K], dt.f32, E, [RUNTIME_DIM_VAL, K]);
    const hMd = memory.desc.grouped([R, 2 * I], dt.f32, E, [RUNTIME_DIM_VAL, 2 * I]);
    const aMd = memory.desc.grouped([R, I], dt.f32, E, [RUNTIME_DIM_VAL, I]);
    const yMd = memory.desc.grouped([R, N], dt.f32, E, [RUNTIME_DIM_VAL, N]);
    const qMd = memory.desc([R, I], dt.s8, tag.ab);
    const oMd = memory.desc([T, N], dt.f32, tag.ab);
    const run = async (eng: Engine | GpuEngine): Promise<{ out: Float32Array; q: Int8Array; submits: number; maps: number }> => {
      const strm = new Stream(eng);
      const mk = (md: MemoryDesc): Memory | GpuMemory => (eng instanceof GpuEngine ? Memory.create(md, eng) : Memory.create(md, eng));
      const put = (m: Memory | GpuMemory, v: ArrayLike<number>): void => { m.write(v); };
      const xs = mk(xMd);
      put(xs, x);
      if (xs instanceof GpuMemory) xs.writeOffsets(offs); else xs.offsets.set(offs);
      const share = (md: MemoryDesc): Memory | GpuMemory => (xs instanceof GpuMemory ? Memory.create(md, eng as GpuEngine, [undefined, xs.buffers[1]]) : Memory.create(md, eng as Engine, [undefined, xs.handles[1]]));
      const w1m = mk(memory.desc([E, K, 2 * I], dt.f32, tag.abc)), w2m = mk(memory.desc([E, I, N], dt.f32, tag.abc));
      put(w1m, w1);
      put(w2m, w2);
      const h = share(hMd), act = share(aMd), y = share(yMd);
      const q = mk(qMd), qs = mk(memory.desc([R], dt.f32, tag.a)), out = mk(oMd), ro = mk(memory.desc([T, k], dt.s32, tag.ab)), wt = mk(memory.desc([T, k], dt.f32, tag.ab));
      put(ro, rowOf);
      put(wt, tw);
      let submits = 0, maps = 0;
      const restore: (() => void)[] = [];
      if (eng instanceof GpuEngine) {
        const queue = eng.device.queue, sub = queue.submit.bind(queue);
        queue.submit = (cbs) => { submits++; sub(cbs); };
        const proto = Object.getPrototypeOf(eng.device.createBuffer({ size: 16, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST })) as { mapAsync: (...a: unknown[]) => Promise<void> };
        const map = proto.mapAsync;
        proto.mapAsync = function (this: unknown, ...a: unknown[]) { maps++; return map.apply(this, a); };
        restore.push(() => { queue.submit = sub; proto.mapAsync = map; });
      }
      new matmul.Primitive(new matmul.PrimitiveDesc(eng, xMd, w1m.desc, hMd)).execute(strm, { [ARG.SRC]: xs, [ARG.WEIGHTS]: w1m, [ARG.DST]: h } as never);
      new moe.activation.Primitive(new moe.activation.PrimitiveDesc(eng, hMd, aMd, { alg: 'glu_swiglu', layout: 'interleaved' })).execute(strm, { [ARG.SRC]: h, [ARG.DST]: act });
      new dynamic_quant.Primitive(new dynamic_quant.PrimitiveDesc(eng, aMd, qMd)).execute(strm, { [ARG.SRC]: act, [ARG.DST]: q, [ARG.ATTR_SCALES | ARG.DST]: qs });
      new matmul.Primitive(new matmul.PrimitiveDesc(eng, aMd, w2m.desc, yMd)).execute(strm, { [ARG.SRC]: act, [ARG.WEIGHTS]: w2m, [ARG.DST]: y } as never);
      new moe.combine.Primitive(new moe.combine.PrimitiveDesc(eng, { tokens: T, topK: k, src: yMd, dst: oMd })).execute(strm, { [ARG.SRC]: y, [ARG.MOE_ROW_OF]: ro, [ARG.MOE_TOPK_WEIGHTS]: wt, [ARG.DST]: out });
      const before = { submits, maps };
      restore.forEach((f) => f());
      await strm.wait();
      const read = async (m: Memory | GpuMemory): Promise<ArrayLike<number>> => (m instanceof GpuMemory ? m.read() : m.read());
      return { out: Float32Array.from(await read(out)), q: Int8Array.from(await read(q)), ...before };
    };
    const g = await run(gpu);
    expect(g.submits, 'queue submits before wait()').toBe(0);
    expect(g.maps, 'host maps before wait()').toBe(0);
    const c = await run(cpu);
    for (let i = 0; i < T * N; i++) expect(Math.abs(g.out[i] - c.out[i]), `out ${i}`).toBeLessThanOrEqual(1e-5 * (1 + Math.abs(c.out[i])));
    // Codes may differ by one where the GEMM / GLU rounding moved a value across a half-integer.
    for (let i = 0; i < R * I; i++) expect(Math.abs(g.q[i] - c.q[i]), `code ${i}`).toBeLessThanOrEqual(1);
  });
});
