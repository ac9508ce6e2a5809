/**
 * Grouped matmul backward (issue 10, item 1): diff_src = diff_dst W^T, diff_weights = src^T diff_dst,
 * diff_bias = row sums, for P#1 grouped memory, P#2 the offsets attribute and P#3 per-expert memories,
 * against a float64 reference (test/matmul_backward_reference.ts) on every implementation family.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Engine, Stream, setVerbose, setVerboseSink, type DataType } from '../src/index.js';
import { ENGINE_CONFIGS } from './helpers.js';
import { assertClose, TOL_BF16, TOL_F16, TOL_F32, type Tolerance } from './reference.js';
import { refBackward } from './matmul_backward_reference.js';
import { SENTINEL, bwdInputs, runBackward, type BwdCase, type Proposal } from './matmul_backward_helpers.js';

const tol = (t: DataType): Tolerance => (t === 'bf16' ? TOL_BF16 : t === 'f16' ? TOL_F16 : TOL_F32);

/** Shapes of the brief: empty experts, one expert with every row, E = 1, K = 1, K and N off the 4x8 / 64x128 tiles. */
const SHAPES: ReadonlyArray<readonly [string, BwdCase]> = [
  ['empty experts, N = 13, K = 37', { G: 4, K: 37, N: 13, sizes: [5, 0, 17, 9] }],
  ['all rows to one expert', { G: 3, K: 37, N: 13, sizes: [0, 31, 0] }],
  ['E = 1', { G: 1, K: 37, N: 13, sizes: [23] }],
  ['K = 1', { G: 5, K: 1, N: 13, sizes: [3, 0, 4, 1, 2] }],
  ['N = 1', { G: 3, K: 9, N: 1, sizes: [2, 5, 0] }],
  ['several tiles: K = 70, N = 150, a 300-row expert (K blocks of the contraction)', { G: 3, K: 70, N: 150, sizes: [300, 1, 66] }],
  ['rows past the last offset stay untouched', { G: 3, K: 37, N: 13, sizes: [4, 0, 6], total: 15 }],
  ['padded rows (row stride 41)', { G: 3, K: 37, N: 13, sizes: [4, 7, 6], ld: 41 }],
];

function checkResult(c: BwdCase, p: Proposal, r: Awaited<ReturnType<typeof runBackward>>, inp: ReturnType<typeof bwdInputs>): void {
  const ref = refBackward(inp.x, inp.w, inp.dy, c.sizes, c.K, c.N);
  const t = inp.dt;
  assertClose(r.dw, ref.dw, tol(t), 'diff_weights');
  const M = c.sizes.reduce((a, b) => a + b, 0);
  assertClose(r.dx.subarray(0, M * c.K), ref.dx, tol(t), 'diff_src');
  if (c.bias) assertClose(r.db!, ref.db, TOL_F32, 'diff_bias');
  if (p === 'p3') return;
  expect([...r.dx.subarray(M * c.K)].every((v) => v === SENTINEL), 'diff_src rows past the last offset were written').toBe(true);
}

describe.each(ENGINE_CONFIGS)('grouped matmul backward vs float64 reference [%s]', (_name, opts) => {
  let eng: Engine;
  let strm: Stream;
  beforeAll(async () => {
    eng = await Engine.create(opts);
    strm = new Stream(eng);
  });
  afterAll(() => eng.release());

  describe.each(['p1', 'p2', 'p3'] as const)('%s', (p) => {
    it.each(SHAPES)('%s', async (_n, shape) => {
      if (p === 'p3' && (shape.total !== undefined || shape.ld !== undefined)) return;
      const c: BwdCase = { ...shape, bias: true };
      const inp = bwdInputs(c);
      checkResult(c, p, await runBackward(eng, strm, c, p, inp), inp);
    });
  });

  it.each([['abc'], ['acb'], ['any']] as const)('backward data with %s weights (P#1, P#3)', async (w) => {
    if (w === 'any' && opts.kernels === 'none') return;
    for (const p of ['p1', 'p3'] as const) {
      const c: BwdCase = { G: 4, K: 37, N: 13, sizes: [5, 0, 17, 9], weights: w };
      const inp = bwdInputs(c);
      checkResult(c, p, await runBackward(eng, strm, c, p, inp), inp);
    }
  });

  it('verbose: one create and one exec line per backward primitive, naming the implementation', async () => {
    const lines: string[] = [];
    const prevSink = setVerboseSink((l) => lines.push(l));
    const prev = setVerbose(1);
    try {
      await runBackward(eng, strm, { G: 2, K: 3, N: 4, sizes: [1, 2], bias: true }, 'p1');
    } finally {
      setVerbose(prev);
      setVerboseSink(prevSink);
    }
    for (const name of ['matmul_backward_data', 'matmul_backward_weights']) {
      expect(lines.filter((l) => l.includes(`create:cache_miss,cpu,${name},`)), name).toHaveLength(1);
      expect(lines.filter((l) => l.includes(`exec,cpu,${name},`)), name).toHaveLength(1);
    }
    expect(lines.find((l) => l.includes('exec,cpu,matmul_backward_weights,'))).toContain(opts.kernels === 'none' ? 'ref:any' : 'wasm:');
  });

  it.each([['bf16'], ['f16']] as const)('%s data, f32 accumulation', async (t) => {
    for (const p of ['p1', 'p2', 'p3'] as const) {
      const c: BwdCase = { G: 4, K: 37, N: 13, sizes: [5, 0, 17, 9], dt: t, bias: true, weights: p !== 'p2' && opts.kernels !== 'none' ? 'any' : 'abc' };
      const inp = bwdInputs(c);
      checkResult(c, p, await runBackward(eng, strm, c, p, inp), inp);
    }
  });
});
