/**
 * Invalid inputs of the grouped matmul backward. Creation: a DnnlError naming the argument and the
 * rule. Execution (runtime offsets / rows, only known when the work runs): `stream.wait()` rejects
 * with the forward's status (invalid_arguments) and a message naming the argument, and every output
 * buffer still holds its sentinel: the kernels check before they write anything.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ARG, Engine, Memory, MemoryDesc, PrimitiveAttr, RUNTIME_DIM_VAL, Stream, dt, grouped_gemm_backward_data, grouped_gemm_backward_weights, matmul,
  matmul_backward_data, matmul_backward_weights, memory, offsets, tag,
} from '../src/index.js';
import { ENGINE_CONFIGS, expectDnnlError, expectDnnlReject } from './helpers.js';

const RT = RUNTIME_DIM_VAL;
const G = 3, K = 5, N = 4, TOTAL = 10, SIZES = [2, 3, 4];
const SENT = 4242;
const rows = (cols: number, total = TOTAL, g = G): MemoryDesc => memory.desc.grouped([total, cols], dt.f32, g, [RT, cols]);
const wMd = memory.desc([G, K, N], dt.f32, tag.abc);
const biasMd = memory.desc([G, N], dt.f32, tag.ab);

describe('creation rules', () => {
  let eng: Engine;
  beforeAll(async () => { eng = await Engine.create({ threads: 1 }); });
  afterAll(() => eng.release());

  it.each([
    ['diff_dst columns', () => new matmul_backward_data.PrimitiveDesc(eng, rows(K), wMd, rows(N + 1)), 'diff_dst dims[1] = 5 must equal N = 4'],
    ['diff_src columns', () => new matmul_backward_data.PrimitiveDesc(eng, rows(K + 2), wMd, rows(N)), 'diff_src dims[1] = 7 must equal K = 5'],
    ['group count', () => new matmul_backward_data.PrimitiveDesc(eng, rows(K, TOTAL, 4), wMd, rows(N)), 'diff_src group count 4 must equal the weights\' G = 3'],
    ['row totals', () => new matmul_backward_data.PrimitiveDesc(eng, rows(K, 11), wMd, rows(N)), 'diff_src dims[0] = 11 must equal diff_dst dims[0] = 10'],
    ['plain rows without the attribute', () => new matmul_backward_data.PrimitiveDesc(eng, memory.desc([TOTAL, K], dt.f32, tag.ab), wMd, rows(N)), 'diff_src must be grouped by rows'],
    ['2D weights', () => new matmul_backward_data.PrimitiveDesc(eng, rows(K), memory.desc([K, N], dt.f32, tag.ab), rows(N)), 'weights must be 3D [G, K, N]'],
    ['src columns', () => new matmul_backward_weights.PrimitiveDesc(eng, rows(K + 1), wMd, rows(N)), 'src dims[1] = 6 must equal K = 5'],
    ['diff_bias shape', () => new matmul_backward_weights.PrimitiveDesc(eng, rows(K), wMd, rows(N), undefined, undefined, memory.desc([G, N + 1], dt.f32, tag.ab)), 'diff_bias dims [3,5] must be [G, N] = [3,4] or [G, 1, N]'],
    ['grouped rows with the attribute', () => new matmul_backward_weights.PrimitiveDesc(eng, rows(K), wMd, rows(N), undefined, new PrimitiveAttr().setGroupedOffsets(ARG.SRC, G)), 'with the grouped-offsets attribute, src must be a plain descriptor'],
    ['attribute group count', () => new matmul_backward_weights.PrimitiveDesc(eng, memory.desc([TOTAL, K], dt.f32, tag.ab), wMd, memory.desc([TOTAL, N], dt.f32, tag.ab), undefined, new PrimitiveAttr().setGroupedOffsets(ARG.SRC, 2)), 'grouped-offsets group count 2 must equal diff_weights dims[0] = 3'],
    ['forward hint of another shape', () => {
      const fwd = new matmul.PrimitiveDesc(eng, rows(K), memory.desc([G, K, N + 1], dt.f32, tag.abc), rows(N + 1));
      return new matmul_backward_weights.PrimitiveDesc(eng, rows(K), wMd, rows(N), fwd);
    }, 'hint_fwd_pd shape g3 m10 k5 n5 differs from this problem\'s g3 m10 k5 n4'],
    ['P#3 diff_weights shape', () => new grouped_gemm_backward_weights.PrimitiveDesc(eng, [memory.desc([RT, K], dt.f32, tag.ab)], [memory.desc([K, N + 1], dt.f32, tag.ab)], [memory.desc([RT, N], dt.f32, tag.ab)], memory.desc([1], dt.s32, tag.a)), 'diff_weights[0] dims[1] = 5 must equal diff_dst[0] N = 4'],
    ['P#3 backward data diff_src columns', () => new grouped_gemm_backward_data.PrimitiveDesc(eng, [memory.desc([RT, K + 1], dt.f32, tag.ab)], [memory.desc([K, N], dt.f32, tag.ab)], [memory.desc([RT, N], dt.f32, tag.ab)], memory.desc([1], dt.s32, tag.a)), 'diff_src[0] dims[1] = 6 must equal weights[0] K = 5'],
    ['P#3 diff_bias shape', () => new grouped_gemm_backward_weights.PrimitiveDesc(eng, [memory.desc([RT, K], dt.f32, tag.ab)], [memory.desc([K, N], dt.f32, tag.ab)], memory.desc([1, N + 1], dt.f32, tag.ab), [memory.desc([RT, N], dt.f32, tag.ab)], memory.desc([1], dt.s32, tag.a)), 'diff_bias must be a plain [G, N] = [1,4] descriptor'],
    ['P#3 expert counts', () => new grouped_gemm_backward_weights.PrimitiveDesc(eng, [memory.desc([RT, K], dt.f32, tag.ab)], [], [memory.desc([RT, N], dt.f32, tag.ab)], memory.desc([1], dt.s32, tag.a)), '1 src descriptors but 0 diff_weights descriptors'],
  ] as const)('%s', (_n, make, fragment) => {
    expectDnnlError(make, 'invalid_arguments', fragment);
  });

  it('an integer data type is unimplemented, naming the argument', () => {
    expectDnnlError(() => new matmul_backward_data.PrimitiveDesc(eng, rows(K), memory.desc([G, K, N], dt.s8, tag.abc), rows(N)), 'unimplemented', 'weights data type s8 is not supported');
  });

  it('diff_bias is the last argument; a forgotten diff_dst is named, not taken from the bias', () => {
    const bMd = memory.desc([G, N], dt.f32, tag.ab);
    const pd = new matmul_backward_weights.PrimitiveDesc(eng, rows(K), wMd, rows(N), undefined, undefined, bMd);
    expect(pd.queryMd('diff_bias')).toBe(bMd);
    expect(pd.queryMd('diff_dst')?.dims).toEqual([TOTAL, N]);
    expectDnnlError(() => new matmul_backward_weights.PrimitiveDesc(eng, rows(K), wMd, undefined as unknown as MemoryDesc, undefined, undefined, bMd), 'invalid_arguments', 'matmul_backward_weights: diff_dst must be');
    // The earlier (src, diff_weights, diff_bias, diff_dst) order: a descriptor where the hint goes.
    const oldOrder = matmul_backward_weights.PrimitiveDesc as unknown as new (...a: unknown[]) => unknown;
    expectDnnlError(() => new oldOrder(eng, rows(K), wMd, bMd, rows(N)), 'invalid_arguments', 'the 5th argument is hint_fwd_pd, got a memory descriptor (diff_bias is the last argument');
  });

  it('a missing argument at execute names it', () => {
    const pd = new matmul_backward_weights.PrimitiveDesc(eng, rows(K), wMd, rows(N));
    const x = Memory.create(rows(K), eng), dy = Memory.create(rows(N), eng);
    expectDnnlError(() => new matmul_backward_weights.Primitive(pd).execute(new Stream(eng), { [ARG.SRC]: x, [ARG.DIFF_DST]: dy }), 'invalid_arguments', 'missing argument ARG.DIFF_WEIGHTS');
  });
});

/** Every output of one backward-weights + backward-data pair, sentinel-filled. */
interface Fixture {
  readonly x: Memory; readonly dy: Memory; readonly dx: Memory; readonly w: Memory; readonly dw: Memory; readonly db: Memory;
  readonly offs: Memory | undefined;
  readonly data: matmul_backward_data.Primitive; readonly weights: matmul_backward_weights.Primitive;
}

describe.each([...ENGINE_CONFIGS, ['wasm, 2 threads', { threads: 2, kernels: 'simd128' }] as const])('runtime rules, nothing written [%s]', (_name, opts) => {
  let eng: Engine;
  let strm: Stream;
  beforeAll(async () => {
    eng = await Engine.create(opts);
    strm = new Stream(eng);
  });
  afterAll(() => eng.release());

  function fixture(p: 'p1' | 'p2'): Fixture {
    const attr = p === 'p2' ? new PrimitiveAttr().setGroupedOffsets(ARG.SRC, G) : undefined;
    const r = (cols: number): MemoryDesc => (p === 'p1' ? rows(cols) : memory.desc([TOTAL, cols], dt.f32, tag.ab));
    const dataPd = new matmul_backward_data.PrimitiveDesc(eng, r(K), wMd, r(N), undefined, attr);
    const wPd = new matmul_backward_weights.PrimitiveDesc(eng, r(K), wMd, r(N), undefined, attr, biasMd);
    const x = Memory.create(r(K), eng), dy = Memory.create(r(N), eng), dx = Memory.create(r(K), eng);
    const w = Memory.create(wMd, eng), dw = Memory.create(wMd, eng), db = Memory.create(biasMd, eng);
    x.write(new Float64Array(TOTAL * K).fill(0.5));
    dy.write(new Float64Array(TOTAL * N).fill(0.25));
    w.write(new Float64Array(G * K * N).fill(1));
    for (const m of [dx, dw, db]) m.write(new Float64Array(m.elementCount).fill(SENT));
    let offs: Memory | undefined;
    if (p === 'p1') for (const m of [x, dy, dx]) offsets.fromSizes(SIZES, m.offsets);
    else {
      offs = Memory.create(memory.desc([G + 1], dt.s32, tag.a), eng);
      offsets.fromSizes(SIZES, offs.values as Int32Array);
    }
    return { x, dy, dx, w, dw, db, offs, data: new matmul_backward_data.Primitive(dataPd), weights: new matmul_backward_weights.Primitive(wPd) };
  }

  const untouched = (f: Fixture): void => {
    for (const [name, m] of [['diff_src', f.dx], ['diff_weights', f.dw], ['diff_bias', f.db]] as const) {
      expect([...m.read()].every((v) => v === SENT), `${name} was written despite the error`).toBe(true);
    }
  };
  const extra = (f: Fixture): Record<number, Memory> => (f.offs ? { [ARG.ATTR_GROUPED_OFFSETS | ARG.SRC]: f.offs } : {});
  const runWeights = (f: Fixture): Promise<void> => {
    f.weights.execute(strm, { [ARG.SRC]: f.x, [ARG.DIFF_DST]: f.dy, [ARG.DIFF_WEIGHTS]: f.dw, [ARG.DIFF_BIAS]: f.db, ...extra(f) });
    return strm.wait();
  };
  const runData = (f: Fixture): Promise<void> => {
    f.data.execute(strm, { [ARG.DIFF_DST]: f.dy, [ARG.WEIGHTS]: f.w, [ARG.DIFF_SRC]: f.dx, ...extra(f) });
    return strm.wait();
  };

  it('valid offsets: the fixture itself writes (so the checks below can fail)', async () => {
    const f = fixture('p1');
    await runWeights(f);
    await runData(f);
    expect(f.dw.read()[0]).toBe(2 * 0.5 * 0.25);
    expect(f.db.read()[0]).toBe(2 * 0.25);
    expect(f.dx.read()[0]).toBe(N * 0.25);
    expect(f.dx.read()[9 * K]).toBe(SENT); // row 9 is past the last offset
  });

  it.each([
    ['src vs diff_dst offsets disagree', (f: Fixture) => { f.dy.offsets[2] = 4; }, 'weights', 'ARG.DIFF_DST offsets must equal ARG.SRC offsets: ARG.DIFF_DST offsets[2] = 4, ARG.SRC offsets[2] = 5'],
    ['a non-zero first src offset', (f: Fixture) => { f.x.offsets[0] = 1; f.dy.offsets[0] = 1; }, 'weights', 'ARG.SRC offsets[0] must be 0, got 1'],
    ['decreasing src offsets', (f: Fixture) => { f.x.offsets[2] = 1; f.dy.offsets[2] = 1; }, 'weights', 'ARG.SRC offsets must be non-decreasing: offsets[2] = 1 < offsets[1] = 2'],
    ['src offsets past the rows', (f: Fixture) => { f.x.offsets[3] = 11; f.dy.offsets[3] = 11; }, 'weights', 'ARG.SRC offsets[3] = 11 exceeds the total extent 10'],
    ['diff_src vs diff_dst offsets disagree', (f: Fixture) => { f.dx.offsets[1] = 1; }, 'data', 'ARG.DIFF_SRC offsets must equal ARG.DIFF_DST offsets: ARG.DIFF_SRC offsets[1] = 1, ARG.DIFF_DST offsets[1] = 2'],
    ['a non-zero first diff_dst offset', (f: Fixture) => { f.dy.offsets[0] = 2; f.dx.offsets[0] = 2; }, 'data', 'ARG.DIFF_DST offsets[0] must be 0, got 2'],
  ] as const)('P#1 %s', async (_n, spoil, which, fragment) => {
    const f = fixture('p1');
    spoil(f);
    const e = await expectDnnlReject(which === 'weights' ? runWeights(f) : runData(f), 'invalid_arguments', fragment);
    expect(e.message).toContain(which === 'weights' ? 'matmul_backward_weights.execute' : 'matmul_backward_data.execute');
    untouched(f);
  });

  it.each([
    ['a non-zero first offset', [1, 2, 5, 9], 'ARG.ATTR_GROUPED_OFFSETS | ARG.SRC offsets[0] must be 0, got 1'],
    ['decreasing offsets', [0, 5, 2, 9], 'ARG.ATTR_GROUPED_OFFSETS | ARG.SRC offsets must be non-decreasing: offsets[2] = 2 < offsets[1] = 5'],
    ['offsets past the rows', [0, 2, 5, 12], 'ARG.ATTR_GROUPED_OFFSETS | ARG.SRC offsets[3] = 12 exceeds the total extent 10'],
  ] as const)('P#2 %s (both primitives)', async (_n, offs, fragment) => {
    const f = fixture('p2');
    (f.offs!.values as Int32Array).set(offs);
    await expectDnnlReject(runWeights(f), 'invalid_arguments', fragment);
    await expectDnnlReject(runData(f), 'invalid_arguments', fragment);
    untouched(f);
  });

  it.each([
    ['a negative row count', [2, -1], 'ARG.RUNTIME_DIMS[1] = -1 must be non-negative'],
    ['more rows than an expert\'s allocation', [2, 100000], 'ARG.RUNTIME_DIMS[1] = 100000 rows do not fit expert 1\'s src / diff_dst allocations'],
  ] as const)('P#3 %s', async (_n, dims, fragment) => {
    const xMd = memory.desc([RT, K], dt.f32, tag.ab), dyMd = memory.desc([RT, N], dt.f32, tag.ab), dwMd = memory.desc([K, N], dt.f32, tag.ab);
    const dbMd = memory.desc([2, N], dt.f32, tag.ab);
    const pd = new grouped_gemm_backward_weights.PrimitiveDesc(eng, [xMd, xMd], [dwMd, dwMd], dbMd, [dyMd, dyMd], memory.desc([2], dt.s32, tag.a));
    const args: Record<number, Memory> = {};
    const db = Memory.create(dbMd, eng);
    db.write(new Float64Array(2 * N).fill(SENT));
    args[ARG.DIFF_BIAS] = db;
    const dws: Memory[] = [db];
    for (let i = 0; i < 2; i++) {
      args[ARG.MULTIPLE_SRC + i] = Memory.create(xMd, eng, Memory.create(memory.desc([4, K], dt.f32, tag.ab), eng).handles[0]);
      args[ARG.MULTIPLE_DST + i] = Memory.create(dyMd, eng, Memory.create(memory.desc([4, N], dt.f32, tag.ab), eng).handles[0]);
      const dw = Memory.create(dwMd, eng);
      dw.write(new Float64Array(K * N).fill(SENT));
      dws.push(dw);
      args[ARG.MULTIPLE_WEIGHTS + i] = dw;
    }
    const rd = Memory.create(memory.desc([2], dt.s32, tag.a), eng);
    (rd.values as Int32Array).set(dims);
    args[ARG.RUNTIME_DIMS] = rd;
    new grouped_gemm_backward_weights.Primitive(pd).execute(strm, args);
    await expectDnnlReject(strm.wait(), 'invalid_arguments', fragment);
    for (const dw of dws) expect([...dw.read()].every((v) => v === SENT), 'diff_weights / diff_bias written despite the error').toBe(true);
  });

  it('P#3 backward data: more rows than an expert\'s diff_src allocation, nothing written', async () => {
    const xMd = memory.desc([RT, K], dt.f32, tag.ab), dyMd = memory.desc([RT, N], dt.f32, tag.ab), wiMd = memory.desc([K, N], dt.f32, tag.ab);
    const pd = new grouped_gemm_backward_data.PrimitiveDesc(eng, [xMd, xMd], [wiMd, wiMd], [dyMd, dyMd], memory.desc([2], dt.s32, tag.a));
    const args: Record<number, Memory> = {};
    const dxs: Memory[] = [];
    for (let i = 0; i < 2; i++) {
      // diff_dst holds 64 rows, diff_src only 4: 20 rows fit the first, not the second.
      args[ARG.MULTIPLE_DST + i] = Memory.create(dyMd, eng, Memory.create(memory.desc([64, N], dt.f32, tag.ab), eng).handles[0]);
      const dxPlain = Memory.create(memory.desc([4, K], dt.f32, tag.ab), eng);
      dxPlain.write(new Float64Array(4 * K).fill(SENT));
      dxs.push(dxPlain);
      args[ARG.MULTIPLE_SRC + i] = Memory.create(xMd, eng, dxPlain.handles[0]);
      args[ARG.MULTIPLE_WEIGHTS + i] = Memory.create(wiMd, eng);
    }
    const rd = Memory.create(memory.desc([2], dt.s32, tag.a), eng);
    (rd.values as Int32Array).set([3, 20]);
    args[ARG.RUNTIME_DIMS] = rd;
    new grouped_gemm_backward_data.Primitive(pd).execute(strm, args);
    await expectDnnlReject(strm.wait(), 'invalid_arguments', "grouped_gemm_backward_data.execute: ARG.RUNTIME_DIMS[1] = 20 rows do not fit expert 1's diff_dst / diff_src allocations");
    for (const dx of dxs) expect([...dx.read()].every((v) => v === SENT), 'diff_src written despite the error').toBe(true);
  });
});
