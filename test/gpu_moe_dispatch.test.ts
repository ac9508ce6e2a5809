/**
 * moe.dispatch on the gpu engine (SwiftShader in CI): every output (routed rows, token index, token k,
 * row_of, offsets or counts, rows left unwritten) compared exactly with the cpu engine and with the
 * placement reference, over the cpu tests' shapes (skew to one expert, k = E, T = 1, E = 1, several
 * blocks of 256 slots), alignment, f32 / bf16 / f16 hidden with odd K, expert maps, the batched format,
 * repeated experts, T = 0 and bad runtime data (errors raised at wait, nothing written); and a grouped
 * matmul that reads the offsets the dispatch wrote on the device, with no host read in between.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ARG, Engine, GpuEngine, GpuMemory, Memory, RUNTIME_DIM_VAL, Stream, dt, matmul, memory, moe, tag, type DataType,
} from '../src/index.js';
import type { DispatchOptions } from '../src/primitives/moe/dispatch/index.js';
import { formOf } from '../src/primitives/moe/dispatch/webgpu_dispatch.js';
import { gpuEngine } from './gpu_helpers.js';
import { expectDnnlError, expectDnnlReject } from './helpers.js';
import { randomIds, refPlace } from './moe_dispatch_cases.js';
import { assertClose, refGroupedM, TOL_F32 } from './reference.js';
import { mulberry32, randomF32 } from './workloads.js';

let gpu: GpuEngine;
let cpu: Engine;
beforeAll(async () => {
  gpu = await gpuEngine();
  cpu = await Engine.create({ threads: 1, kernels: 'simd128' });
});
afterAll(() => {
  gpu?.release();
  cpu?.release();
});

type AnyMemory = Memory | GpuMemory;
const SENTINEL = 77;
const SENTINEL_H = -5;

/** Every output of one dispatch, read back as plain numbers (hidden values as f32 after decoding). */
interface Outputs {
  readonly implInfo: string;
  readonly dst?: number[];
  readonly offsets?: number[];
  readonly tokenIndex: number[];
  readonly tokenKs: number[];
  readonly rowOf: number[];
  readonly counts?: number[];
}

interface Inputs {
  readonly ids: ArrayLike<number>;
  readonly hidden?: ArrayLike<number>;
  readonly map?: ArrayLike<number>;
}

async function readAll(m: AnyMemory): Promise<number[]> {
  return Array.from(m instanceof GpuMemory ? await m.read() : m.read());
}

function filled(eng: Engine | GpuEngine, md: ReturnType<typeof memory.desc>, v: number): AnyMemory {
  const m = Memory.create(md, eng);
  return m.elementCount ? m.write(new Array<number>(m.elementCount).fill(v)) : m;
}

interface Prepared {
  readonly pd: moe.dispatch.PrimitiveDesc;
  readonly strm: Stream;
  readonly args: Record<number, AnyMemory | undefined>;
  readonly outs: Record<string, AnyMemory>;
}

function prepare(eng: Engine | GpuEngine, o: DispatchOptions, inp: Inputs): Prepared {
  const pd = new moe.dispatch.PrimitiveDesc(eng, o);
  const q = (what: Parameters<moe.dispatch.PrimitiveDesc['queryMd']>[0]) => pd.queryMd(what);
  const ids = Memory.create(q('topk_ids')!, eng);
  if (inp.ids.length) ids.write(inp.ids);
  const hidden = o.hidden ? Memory.create(o.hidden, eng) : undefined;
  if (hidden && inp.hidden && hidden.elementCount) hidden.write(inp.hidden);
  const map = inp.map ? Memory.create(q('expert_map')!, eng).write(inp.map) : undefined;
  const outs: Record<string, AnyMemory> = {
    tokenIndex: filled(eng, q('token_index')!, SENTINEL), tokenKs: filled(eng, q('token_ks')!, SENTINEL), rowOf: filled(eng, q('row_of')!, SENTINEL),
  };
  const dstMd = q('dst');
  if (dstMd) {
    const d = filled(eng, dstMd, o.hidden ? SENTINEL_H : SENTINEL);
    if (dstMd.isGrouped) {
      if (d instanceof GpuMemory) d.writeOffsets(new Array<number>(o.localExperts ?? o.experts).fill(SENTINEL).concat([SENTINEL]));
      else d.offsets.fill(SENTINEL);
    }
    outs.dst = d;
  }
  if (q('expert_num_tokens')) outs.counts = filled(eng, q('expert_num_tokens')!, SENTINEL);
  const args: Record<number, AnyMemory | undefined> = {
    [ARG.MOE_TOPK_IDS]: ids, [ARG.SRC]: hidden, [ARG.MOE_EXPERT_MAP]: map, [ARG.DST]: outs.dst, [ARG.MOE_TOKEN_INDEX]: outs.tokenIndex,
    [ARG.MOE_TOKEN_KS]: outs.tokenKs, [ARG.MOE_ROW_OF]: outs.rowOf, [ARG.MOE_EXPERT_NUM_TOKENS]: outs.counts,
  };
  return { pd, strm: new Stream(eng), args, outs };
}

async function collect(p: Prepared): Promise<Outputs> {
  const o = p.outs;
  const d = o.dst;
  const grouped = d?.desc.isGrouped;
  return {
    implInfo: p.pd.implInfo,
    dst: d && p.pd.problem.hidden ? await readAll(d) : undefined,
    offsets: d && grouped ? Array.from(d instanceof GpuMemory ? await d.readOffsets() : d.offsets) : d && !p.pd.problem.hidden ? await readAll(d) : undefined,
    tokenIndex: await readAll(o.tokenIndex), tokenKs: await readAll(o.tokenKs), rowOf: await readAll(o.rowOf), counts: o.counts ? await readAll(o.counts) : undefined,
  };
}

async function run(eng: Engine | GpuEngine, o: DispatchOptions, inp: Inputs): Promise<Outputs> {
  const p = prepare(eng, o, inp);
  new moe.dispatch.Primitive(p.pd).execute(p.strm, p.args);
  await p.strm.wait();
  return collect(p);
}

/** The gpu outputs equal the cpu engine's, every element (rows the dispatch leaves alone included). */
async function expectSameAsCpu(o: DispatchOptions, inp: Inputs): Promise<Outputs> {
  const g = await run(gpu, o, inp), h = await run(cpu, o, inp);
  expect(g.implInfo).toMatch(/^webgpu:moe-dispatch-counting-sort/);
  expect({ ...g, implInfo: '' }).toEqual({ ...h, implInfo: '' });
  return g;
}

/** Independent check of a contiguous result against the placement reference. */
function expectPlacement(r: Outputs, ids: Int32Array, T: number, k: number, G: number, K: number, hidden: ArrayLike<number> | undefined, block = 1, map?: Int32Array): void {
  const ref = refPlace(ids, T, k, G, map, block);
  expect(r.offsets).toEqual(ref.offs);
  ref.rows.forEach((rows, g) => {
    for (let i = 0; i < ref.offs[g + 1] - ref.offs[g]; i++) {
      const row = ref.offs[g] + i;
      if (i < rows.length) {
        const [t, s] = rows[i];
        expect([r.tokenIndex[row], r.tokenKs[row], r.rowOf[t * k + s]]).toEqual([t, s, row]);
        if (hidden && r.dst) expect(r.dst.slice(row * K, (row + 1) * K)).toEqual(Array.from(hidden).slice(t * K, (t + 1) * K));
      } else {
        expect([r.tokenIndex[row], r.tokenKs[row]]).toEqual([-1, -1]);
        if (r.dst) expect(r.dst.slice(row * K, (row + 1) * K).every((v) => v === 0)).toBe(true);
      }
    }
  });
  for (let row = ref.offs[G]; row < r.tokenIndex.length; row++) {
    expect([r.tokenIndex[row], r.tokenKs[row]]).toEqual([-1, -1]);
    if (r.dst && K) expect(r.dst[row * K]).toBe(SENTINEL_H);
  }
}

/** Values exact in bf16 and f16 (k / 8, |k| <= 64). */
function exactHidden(seed: number, n: number): number[] {
  const rng = mulberry32(seed);
  return Array.from({ length: n }, () => (Math.floor(rng() * 129) - 64) / 8);
}

const CASES = [
  { name: 'random', T: 37, E: 8, k: 2, K: 19, skew: undefined },
  { name: 'all tokens to expert 3', T: 20, E: 6, k: 1, K: 8, skew: 3 },
  { name: 'k = E', T: 5, E: 4, k: 4, K: 16, skew: undefined },
  { name: 'T = 1, E = 256', T: 1, E: 256, k: 8, K: 33, skew: undefined },
  { name: 'E = 1', T: 9, E: 1, k: 1, K: 4, skew: undefined },
  { name: 'several blocks of 256 slots, skewed', T: 300, E: 16, k: 3, K: 5, skew: 7 },
  { name: 'G > 256 experts (two scan chunks)', T: 40, E: 300, k: 6, K: 3, skew: undefined },
] as const;

describe('gpu moe.dispatch, contiguous: the cpu engine\'s outputs and the placement reference', () => {
  for (const c of CASES) {
    for (const block of [1, 4]) {
      it(`${c.name}, alignBlockSize ${block}`, async () => {
        const rng = mulberry32(c.T * 7 + block);
        const ids = randomIds(rng, c.T, c.E, c.k, c.skew);
        const hidden = randomF32(rng, c.T * c.K);
        const o: DispatchOptions = { tokens: c.T, topK: c.k, experts: c.E, hidden: memory.desc([c.T, c.K], dt.f32, tag.ab), alignBlockSize: block };
        const r = await expectSameAsCpu(o, { ids, hidden });
        expect(r.implInfo).toBe('webgpu:moe-dispatch-counting-sort+permute');
        expectPlacement(r, ids, c.T, c.k, c.E, c.K, hidden, block);
      });
    }
  }

  for (const [hdt, K] of [['bf16', 19], ['f16', 33], ['bf16', 8], ['f16', 1]] as const) {
    it(`16-bit hidden (${hdt}, K ${K}): rows copied bit for bit, odd K (rows sharing a word) included; strided hidden rows`, async () => {
      const T = 29, E = 5, k = 2;
      const ids = randomIds(mulberry32(K), T, E, k, 2);
      const hidden = exactHidden(K, T * K);
      for (const block of [1, 3]) {
        const r = await expectSameAsCpu({ tokens: T, topK: k, experts: E, hidden: memory.desc([T, K], hdt as DataType, tag.ab), alignBlockSize: block }, { ids, hidden });
        expectPlacement(r, ids, T, k, E, K, hidden, block);
      }
      const ld = K + 3;
      const strided = new Array<number>((T - 1) * ld + K).fill(Number.NaN);
      for (let t = 0; t < T; t++) for (let c = 0; c < K; c++) strided[t * ld + c] = hidden[t * K + c];
      const r = await expectSameAsCpu({ tokens: T, topK: k, experts: E, hidden: memory.desc([T, K], hdt as DataType, [ld, 1]) }, { ids, hidden: strided });
      expectPlacement(r, ids, T, k, E, K, hidden);
    });
  }

  it('index-only: the [G + 1] offsets memory; expert maps split the rows over 2 and 4 ranks', async () => {
    const T = 29, E = 8, k = 3;
    const ids = randomIds(mulberry32(3), T, E, k);
    for (const P of [1, 2, 4]) {
      const G = E / P;
      const seen = new Set<string>();
      for (let rank = 0; rank < P; rank++) {
        const map = Int32Array.from({ length: E }, (_, e) => (Math.floor(e / G) === rank ? e - rank * G : -1));
        const r = await expectSameAsCpu({ tokens: T, topK: k, experts: E, localExperts: G, expertMap: true }, { ids, map });
        expect(r.implInfo).toBe('webgpu:moe-dispatch-counting-sort');
        expectPlacement(r, ids, T, k, G, 0, undefined, 1, map);
        for (let i = 0; i < T * k; i++) expect(r.rowOf[i] >= 0).toBe(map[ids[i]] >= 0);
        for (let row = 0; row < r.offsets![G]; row++) seen.add(`${r.tokenIndex[row]},${r.tokenKs[row]}`);
      }
      expect(seen.size).toBe(T * k);
    }
  });

  it('a token choosing one expert in several slots gets one routed row per slot (the cpu fix of issue 21)', async () => {
    for (const [T, E, k, K, block] of [[13, 5, 3, 9, 1], [7, 2, 2, 17, 4], [5, 3, 3, 8, 1], [300, 3, 2, 2, 2]] as const) {
      const rng = mulberry32(T * 31 + k);
      const ids = Int32Array.from({ length: T * k }, () => Math.floor(rng() * E));
      for (let t = 0; t < T; t += 2) ids.fill(ids[t * k], t * k, (t + 1) * k);
      const hidden = randomF32(rng, T * K);
      const r = await expectSameAsCpu({ tokens: T, topK: k, experts: E, hidden: memory.desc([T, K], dt.f32, tag.ab), alignBlockSize: block }, { ids, hidden });
      expectPlacement(r, ids, T, k, E, K, hidden, block);
      expect(new Set(r.rowOf).size).toBe(T * k);
    }
  });
});

describe('gpu moe.dispatch, batched format', () => {
  it('[G, C, K] values, expert_num_tokens, -1 past each count, rows past the count never written (f32 and bf16)', async () => {
    const T = 17, E = 5, k = 2, K = 7, C = 20;
    const ids = randomIds(mulberry32(8), T, E, k, 1);
    const hidden = exactHidden(9, T * K);
    for (const hdt of ['f32', 'bf16'] as const) {
      const r = await expectSameAsCpu({ tokens: T, topK: k, experts: E, hidden: memory.desc([T, K], hdt, tag.ab), format: 'batched', maxTokens: C }, { ids, hidden });
      expect(r.implInfo).toBe('webgpu:moe-dispatch-counting-sort+permute:batched');
      const ref = refPlace(ids, T, k, E);
      expect(r.counts).toEqual(ref.rows.map((x) => x.length));
      ref.rows.forEach((rows, g) => {
        for (let i = 0; i < C; i++) {
          const row = g * C + i;
          if (i < rows.length) {
            expect(r.rowOf[rows[i][0] * k + rows[i][1]]).toBe(row);
            expect(r.dst!.slice(row * K, (row + 1) * K)).toEqual(hidden.slice(rows[i][0] * K, (rows[i][0] + 1) * K));
          } else {
            expect(r.tokenIndex[row]).toBe(-1);
            expect(r.dst!.slice(row * K, (row + 1) * K).every((v) => v === SENTINEL_H)).toBe(true);
          }
        }
      });
    }
    const idx = await expectSameAsCpu({ tokens: T, topK: k, experts: E, format: 'batched', maxTokens: C }, { ids });
    expect(idx.counts).toEqual(refPlace(ids, T, k, E).rows.map((x) => x.length));
  });

  it('an expert over capacity and a repeated expert are errors with nothing written', async () => {
    const T = 17, E = 5, k = 2, K = 6;
    const ids = randomIds(mulberry32(8), T, E, k, 1);
    const hidden = randomF32(mulberry32(9), T * K);
    await expectRejected({ tokens: T, topK: k, experts: E, hidden: memory.desc([T, K], dt.f32, tag.ab), format: 'batched', maxTokens: 4 }, { ids, hidden }, 'moe.dispatch.execute: expert 1 receives 17 rows, more than maxTokens = 4');
    await expectRejected({ tokens: 3, topK: 2, experts: 4, format: 'batched', maxTokens: 4 }, { ids: [0, 1, 2, 2, 1, 0] },
      'ARG.MOE_TOPK_IDS[1, 1] = 2 repeats slot 0 of token 1 (the batched format holds one row per token and expert');
  });
});

/** Runs a dispatch that must fail on the gpu with `fragment`, the cpu engine failing alike; every output keeps its sentinel. */
async function expectRejected(o: DispatchOptions, inp: Inputs, fragment: string): Promise<void> {
  for (const eng of [cpu, gpu]) {
    const p = prepare(eng, o, inp);
    new moe.dispatch.Primitive(p.pd).execute(p.strm, p.args);
    await expectDnnlReject(p.strm.wait(), 'invalid_arguments', fragment);
    const r = await collect(p);
    for (const [name, v] of Object.entries(r)) {
      if (name === 'implInfo' || v === undefined) continue;
      expect((v as number[]).every((x) => x === SENTINEL || x === SENTINEL_H), `${eng.kind}: ${name} untouched`).toBe(true);
    }
  }
}

describe('gpu moe.dispatch runtime errors (found on the device, nothing written)', () => {
  const o: DispatchOptions = { tokens: 3, topK: 2, experts: 4, localExperts: 2 };
  it('ids out of range and map entries out of [-1, G): the first in the cpu\'s order', async () => {
    await expectRejected(o, { ids: [0, 1, 2, 4, 1, 0], map: [0, 1, -1, -1] }, 'ARG.MOE_TOPK_IDS[1, 1] = 4 is out of range [0, experts = 4)');
    await expectRejected(o, { ids: [0, 1, 2, 3, 1, 0], map: [0, 2, -1, -1] }, 'ARG.MOE_EXPERT_MAP[1] = 2 is out of range [-1, local experts = 2)');
    await expectRejected(o, { ids: [0, -1, 2, 3, 1, 0], map: [0, 1, -1, -2] }, 'ARG.MOE_TOPK_IDS[0, 1] = -1');
    await expectRejected(o, { ids: [0, 1, 2, 3, 1, 9], map: [0, 1, -1, 5] }, 'ARG.MOE_TOPK_IDS[2, 1] = 9');
  });

  it('two executions in one submit (bad, then good): the error is raised, the good one\'s outputs are written', async () => {
    const T = 11, E = 4, k = 2;
    const ids = randomIds(mulberry32(21), T, E, k);
    const bad = Int32Array.from(ids);
    bad[7] = 4;
    const o: DispatchOptions = { tokens: T, topK: k, experts: E };
    const pb = prepare(gpu, o, { ids: bad }), pg = prepare(gpu, o, { ids });
    const strm = new Stream(gpu);
    new moe.dispatch.Primitive(pb.pd).execute(strm, pb.args);
    new moe.dispatch.Primitive(pg.pd).execute(strm, pg.args);
    await expectDnnlReject(strm.wait(), 'invalid_arguments', 'ARG.MOE_TOPK_IDS[3, 1] = 4 is out of range');
    expect((await collect(pb)).rowOf.every((v) => v === SENTINEL)).toBe(true);
    expectPlacement(await collect(pg), ids, T, k, E, 0, undefined);
  });

  it('with hidden: nothing of dst written; a later good run writes', async () => {
    const T = 300, E = 4, k = 2, K = 3;
    const ids = randomIds(mulberry32(5), T, E, k);
    const hidden = randomF32(mulberry32(6), T * K);
    const bad = Int32Array.from(ids);
    bad[555] = 4;
    bad[599] = -3;
    const ho: DispatchOptions = { tokens: T, topK: k, experts: E, hidden: memory.desc([T, K], dt.f32, tag.ab), alignBlockSize: 2 };
    await expectRejected(ho, { ids: bad, hidden }, 'ARG.MOE_TOPK_IDS[277, 1] = 4 is out of range');
    expectPlacement(await run(gpu, ho, { ids, hidden }), ids, T, k, E, K, hidden, 2);
  });

  it('with hidden, the storage-scratch form (its scan counts the rows even after an error): nothing of dst written', async () => {
    const T = 5, E = 1100, k = 2, K = 3;
    const ids = randomIds(mulberry32(7), T, E, k);
    const hidden = randomF32(mulberry32(8), T * K);
    const ho: DispatchOptions = { tokens: T, topK: k, experts: E, hidden: memory.desc([T, K], dt.f32, tag.ab) };
    expect(formOf(new moe.dispatch.PrimitiveDesc(gpu, ho).problem)).toBe('four');
    const bad = Int32Array.from(ids);
    bad[9] = E;
    await expectRejected(ho, { ids: bad, hidden }, `ARG.MOE_TOPK_IDS[4, 1] = ${E} is out of range`);
    expectPlacement(await run(gpu, ho, { ids, hidden }), ids, T, k, E, K, hidden, 1);
  });
});

describe('gpu moe.dispatch: T = 0 and rules', () => {
  it('T = 0: aligned, index-only and batched write only offsets / counts and -1 indices', async () => {
    const E = 3, k = 2, K = 5, C = 4, B = 4;
    const hidden = memory.desc([0, K], dt.f32, tag.ab);
    const a = await expectSameAsCpu({ tokens: 0, topK: k, experts: E, hidden, alignBlockSize: B }, { ids: [] });
    expect(a.offsets).toEqual([0, 0, 0, 0]);
    expect(a.tokenIndex).toEqual(new Array<number>(E * (B - 1)).fill(-1));
    expect(a.dst!.every((v) => v === SENTINEL_H)).toBe(true);
    expect((await expectSameAsCpu({ tokens: 0, topK: k, experts: E }, { ids: [] })).offsets).toEqual([0, 0, 0, 0]);
    const b = await expectSameAsCpu({ tokens: 0, topK: k, experts: E, hidden, format: 'batched', maxTokens: C }, { ids: [] });
    expect(b.counts).toEqual([0, 0, 0]);
    expect(b.tokenIndex).toEqual(new Array<number>(E * C).fill(-1));
  });

  it('the pd rules and execute rules are the cpu engine\'s', async () => {
    expectDnnlError(() => new moe.dispatch.PrimitiveDesc(gpu, { tokens: 4, topK: 5, experts: 4 }), 'invalid_arguments', 'topK must be an integer in [1, experts = 4]');
    expectDnnlError(() => new moe.dispatch.PrimitiveDesc(gpu, { tokens: 4, topK: 1, experts: 4, hidden: memory.desc([4, 8], dt.s8, tag.ab) }), 'unimplemented', 'hidden data type s8');
    const p = prepare(gpu, { tokens: 3, topK: 2, experts: 4 }, { ids: [0, 1, 2, 3, 1, 0] });
    const prim = new moe.dispatch.Primitive(p.pd);
    const F = 'moe.dispatch.execute: ';
    const sameBuffer = Memory.create(p.outs.tokenKs.desc, gpu, p.outs.tokenIndex.handles[0] as GPUBuffer);
    expectDnnlError(() => prim.execute(p.strm, { ...p.args, [ARG.MOE_TOKEN_KS]: sameBuffer }), 'invalid_arguments', `${F}ARG.MOE_TOKEN_INDEX values overlap ARG.MOE_TOKEN_KS values`);
    expectDnnlError(() => prim.execute(p.strm, { ...p.args, [ARG.MOE_TOKEN_KS]: p.outs.tokenIndex }), 'invalid_arguments', `${F}ARG.MOE_TOKEN_INDEX values overlap ARG.MOE_TOKEN_KS values`);
    expectDnnlError(() => prim.execute(p.strm, { ...p.args, [ARG.MOE_ROW_OF]: Memory.create(memory.desc([3, 2], dt.s32, tag.ab), cpu) }), 'invalid_arguments', `${F}ARG.MOE_ROW_OF belongs to another engine`);
    expectDnnlError(() => prim.execute(p.strm, { ...p.args, [ARG.SRC]: Memory.create(memory.desc([3, 4], dt.f32, tag.ab), gpu) }), 'invalid_arguments', `${F}ARG.SRC was given but the pd was created without hidden`);
    prim.execute(p.strm, p.args);
    await p.strm.wait();
    expect(await readAll(p.outs.dst)).toEqual([0, 2, 4, 5, 6]);
  });
});

describe('gpu moe.dispatch feeds the grouped matmul on the device', () => {
  it('the GEMM reads the offsets the dispatch wrote, with no host read in between (one submit)', async () => {
    const T = 23, E = 4, k = 2, K = 9, N = 11, B = 4;
    const ids = randomIds(mulberry32(12), T, E, k, 2);
    const hidden = randomF32(mulberry32(13), T * K), w = randomF32(mulberry32(14), E * K * N);
    const dpd = new moe.dispatch.PrimitiveDesc(gpu, { tokens: T, topK: k, experts: E, hidden: memory.desc([T, K], dt.f32, tag.ab), alignBlockSize: B });
    const R = dpd.problem.R;
    const routed = Memory.create(dpd.queryMd('dst')!, gpu);
    const q = (what: 'token_index' | 'token_ks' | 'row_of') => Memory.create(dpd.queryMd(what)!, gpu);
    const dstMd = memory.desc.grouped([R, N], dt.f32, E, [RUNTIME_DIM_VAL, N]);
    const wei = Memory.create(memory.desc([E, K, N], dt.f32, tag.abc), gpu).write(w);
    const out = Memory.create(dstMd, gpu, [undefined, routed.handles[1]]);
    const mm = new matmul.Primitive(new matmul.PrimitiveDesc(gpu, routed.desc, wei.desc, dstMd));
    const args = {
      [ARG.MOE_TOPK_IDS]: Memory.create(dpd.queryMd('topk_ids')!, gpu).write(ids), [ARG.SRC]: Memory.create(memory.desc([T, K], dt.f32, tag.ab), gpu).write(hidden),
      [ARG.DST]: routed, [ARG.MOE_TOKEN_INDEX]: q('token_index'), [ARG.MOE_TOKEN_KS]: q('token_ks'), [ARG.MOE_ROW_OF]: q('row_of'),
    };
    const strm = new Stream(gpu);
    strm.submit(); // the writes above reach the queue first: only the two primitives are recorded below
    // Any host read-back (mapAsync) between the dispatch and the GEMM would show here.
    const proto = Object.getPrototypeOf(routed.handles[0]) as { mapAsync: (...a: unknown[]) => Promise<void> };
    const mapAsync = proto.mapAsync;
    let maps = 0;
    proto.mapAsync = function (this: GPUBuffer, ...a: unknown[]) { maps++; return mapAsync.apply(this, a); };
    try {
      new moe.dispatch.Primitive(dpd).execute(strm, args);
      mm.execute(strm, { [ARG.SRC]: routed, [ARG.WEIGHTS]: wei, [ARG.DST]: out });
      expect(maps).toBe(0);
    } finally {
      proto.mapAsync = mapAsync;
    }
    await strm.wait();
    const ref = refPlace(ids, T, k, E, undefined, B);
    expect(Array.from(await out.readOffsets())).toEqual(ref.offs);
    // The GEMM's input as the reference builds it: each expert's rows (tokens' hidden, zero padding).
    const x = new Float64Array(ref.offs[E] * K);
    ref.rows.forEach((rows, g) => rows.forEach(([t], i) => x.set(hidden.subarray(t * K, (t + 1) * K), (ref.offs[g] + i) * K)));
    const sizes = ref.offs.slice(1).map((v, g) => v - ref.offs[g]);
    const got = (await out.read()) as Float32Array;
    assertClose(got.subarray(0, ref.offs[E] * N), refGroupedM(x, w, sizes, K, N), TOL_F32, 'GEMM after the gpu dispatch');
  });
});

describe('gpu moe.dispatch: each form (one workgroup, one pass over a grid, two passes, the storage-scratch four passes) against the cpu engine', () => {
  /** A case per form and feature; the form is the one formOf picks, checked, so a rule change cannot hide one. */
  const cases: [string, 'one' | 'grid' | 'two' | 'four', DispatchOptions, number][] = [
    ['decode, k = 6 of E = 64', 'one', { tokens: 1, topK: 6, experts: 64 }, 1],
    ['256 slots, aligned to 4, skewed', 'one', { tokens: 32, topK: 8, experts: 16, alignBlockSize: 4 }, 2],
    ['E = 1', 'one', { tokens: 5, topK: 1, experts: 1 }, 3],
    ['expert map over 3 of 7 local (E = 300 > n)', 'one', { tokens: 9, topK: 3, experts: 300, localExperts: 7, expertMap: true }, 4],
    ['batched, index-only', 'one', { tokens: 9, topK: 2, experts: 6, format: 'batched', maxTokens: 9 }, 5],
    ['G = 1024, 300 slots', 'two', { tokens: 100, topK: 3, experts: 1024 }, 6],
    ['several blocks, aligned to 3, skewed', 'grid', { tokens: 700, topK: 2, experts: 40, alignBlockSize: 3 }, 7],
    ['hidden at decode', 'grid', { tokens: 2, topK: 2, experts: 8, hidden: memory.desc([2, 5], dt.f32, tag.ab) }, 8],
    ['expert map, E = 600 > n = 40, hidden', 'grid', { tokens: 20, topK: 2, experts: 600, localExperts: 5, expertMap: true, hidden: memory.desc([20, 3], dt.f32, tag.ab) }, 9],
    ['expert map, G = 600 of E = 2000 > n = 40 (more place workgroups than blocks), hidden', 'two', { tokens: 20, topK: 2, experts: 2000, localExperts: 600, expertMap: true, hidden: memory.desc([20, 3], dt.f32, tag.ab) }, 12],
    ['33 blocks, aligned to 2', 'two', { tokens: 4200, topK: 2, experts: 40, alignBlockSize: 2 }, 13],
    ['batched with hidden, several blocks', 'grid', { tokens: 300, topK: 2, experts: 4, hidden: memory.desc([300, 3], dt.f32, tag.ab), format: 'batched', maxTokens: 300 }, 10],
    ['G = 1025', 'four', { tokens: 7, topK: 4, experts: 1025, alignBlockSize: 2 }, 11],
  ];
  it.each(cases)('%s: form %s', async (_name, form, o, seed) => {
    const pd = new moe.dispatch.PrimitiveDesc(gpu, o);
    expect(formOf(pd.problem)).toBe(form);
    const E = o.experts, G = o.localExperts ?? E;
    const rng = mulberry32(seed);
    const ids = randomIds(rng, o.tokens, E, o.topK, seed % 2 === 0 ? 0 : undefined);
    const map = o.expertMap ? Int32Array.from({ length: E }, (_, e) => (e % 3 === 0 ? (e / 3) % G : -1)) : undefined;
    const hidden = o.hidden ? randomF32(mulberry32(seed + 50), o.hidden.dims[0] * o.hidden.dims[1]) : undefined;
    const r = await expectSameAsCpu(o, { ids, map, hidden });
    if (!o.format) expectPlacement(r, ids, o.tokens, o.topK, G, o.hidden ? o.hidden.dims[1] : 0, hidden, o.alignBlockSize ?? 1, map);
  });

  it.each([['one', 3], ['grid', 400], ['two', 400], ['four', 3]] as const)('form %s: the first bad id, a bad map entry, an expert over capacity, each raised at wait with nothing written', async (form, T) => {
    const E = form === 'four' ? 1100 : form === 'two' ? 600 : 8, k = 2;
    const ids = randomIds(mulberry32(T), T, E, k);
    const o: DispatchOptions = { tokens: T, topK: k, experts: E };
    expect(formOf(new moe.dispatch.PrimitiveDesc(gpu, o).problem)).toBe(form);
    const bad = Int32Array.from(ids);
    bad[2 * T - 1] = -4;
    bad[2 * T - 3] = E;
    await expectRejected(o, { ids: bad }, `ARG.MOE_TOPK_IDS[${T - 2}, 1] = ${E} is out of range [0, experts = ${E})`);
    const mo: DispatchOptions = { ...o, localExperts: 4, expertMap: true };
    const map = Int32Array.from({ length: E }, (_, e) => (e < 4 ? e : -1));
    map[E - 1] = 4;
    await expectRejected(mo, { ids, map }, `ARG.MOE_EXPERT_MAP[${E - 1}] = 4 is out of range [-1, local experts = 4)`);
    const skew = randomIds(mulberry32(T + 1), T, E, k, 1);
    await expectRejected({ ...o, format: 'batched', maxTokens: T - 1 }, { ids: skew }, `expert 1 receives ${T} rows, more than maxTokens = ${T - 1}`);
  });
});
