/**
 * Determinism of the grouped matmul backward: every output element is computed by one tile (one
 * worker) in a fixed order, so 1, 2 and 3 threads give the same bits; and the three proposals run
 * the same kernel core, so P#1, P#2 and P#3 weight gradients are bit-identical.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Engine, Stream } from '../src/index.js';
import { bwdInputs, runBackward, type BwdCase, type BwdResult, type Proposal } from './matmul_backward_helpers.js';
import { refBackward } from './matmul_backward_reference.js';
import { assertClose, TOL_F32 } from './reference.js';

/** Several M blocks (64), N blocks (128 forward / 512 weight gradient), K blocks (256) and an empty expert. */
const CASE: BwdCase = { G: 5, K: 70, N: 600, sizes: [300, 0, 45, 130, 7], bias: true, weights: 'any', seed: 11 };

const bits = (v: Float64Array): number[] => Array.from(new Float32Array(v));

describe('grouped matmul backward: threads and proposals', () => {
  const engines = new Map<number, { eng: Engine; strm: Stream }>();
  beforeAll(async () => {
    for (const threads of [1, 2, 3]) {
      const eng = await Engine.create({ threads, kernels: 'simd128' });
      engines.set(threads, { eng, strm: new Stream(eng) });
    }
  });
  afterAll(() => engines.forEach(({ eng }) => eng.release()));

  const inp = bwdInputs(CASE);
  const results = new Map<string, BwdResult>();
  const run = async (threads: number, p: Proposal): Promise<BwdResult> => {
    const key = `${threads}:${p}`;
    if (!results.has(key)) {
      const { eng, strm } = engines.get(threads)!;
      results.set(key, await runBackward(eng, strm, CASE, p, inp));
    }
    return results.get(key)!;
  };

  it('the 1-thread result matches the float64 reference', async () => {
    const r = await run(1, 'p1');
    const ref = refBackward(inp.x, inp.w, inp.dy, CASE.sizes, CASE.K, CASE.N);
    assertClose(r.dx, ref.dx, TOL_F32, 'diff_src');
    assertClose(r.dw, ref.dw, TOL_F32, 'diff_weights');
    assertClose(r.db!, ref.db, TOL_F32, 'diff_bias');
  });

  it.each([2, 3])('%i threads give the 1-thread bits (P#1, P#2, P#3)', async (threads) => {
    for (const p of ['p1', 'p2', 'p3'] as const) {
      const a = await run(1, p), b = await run(threads, p);
      expect(bits(b.dw), `${p} diff_weights`).toEqual(bits(a.dw));
      expect(bits(b.dx), `${p} diff_src`).toEqual(bits(a.dx));
      if (a.db) expect(bits(b.db!), `${p} diff_bias`).toEqual(bits(a.db));
    }
  });

  it.each([1, 2])('P#1, P#2 and P#3 gradients are bit-identical (%i threads)', async (threads) => {
    const [p1, p2, p3] = [await run(threads, 'p1'), await run(threads, 'p2'), await run(threads, 'p3')];
    expect(bits(p2.dw)).toEqual(bits(p1.dw));
    expect(bits(p3.dw)).toEqual(bits(p1.dw));
    expect(bits(p2.dx)).toEqual(bits(p1.dx));
    expect(bits(p3.dx)).toEqual(bits(p1.dx.subarray(0, p3.dx.length)));
    expect(bits(p2.db!)).toEqual(bits(p1.db!));
    expect(bits(p3.db!)).toEqual(bits(p1.db!));
  });
});
