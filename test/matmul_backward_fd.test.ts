/**
 * The backward is the gradient of the library's own forward: central finite differences of
 * L = sum(dst * dy) through `matmul` (grouped variable M, with bias) against diff_src, diff_weights
 * and diff_bias. L is bilinear, so the central difference is exact up to f32 rounding of the forward:
 * a transposed or misplaced gradient is off by O(1), far outside the bound.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ARG, Engine, Memory, RUNTIME_DIM_VAL, Stream, dt, matmul, memory, offsets, tag } from '../src/index.js';
import { ENGINE_CONFIGS } from './helpers.js';
import { bwdInputs, runBackward, type BwdCase } from './matmul_backward_helpers.js';

const RT = RUNTIME_DIM_VAL;
const H = 2 ** -4;

/** L(x, W, b) = sum_r sum_n (x[r] W[g(r)] + b[g(r)])_n dy[r, n], the forward run by the library. */
function lossFn(eng: Engine, strm: Stream, c: BwdCase, dy: Float64Array): { loss: (x: Float64Array, w: Float64Array, b: Float64Array) => Promise<number>; free: () => void } {
  const { G, K, N, sizes } = c;
  const M = sizes.reduce((a, b) => a + b, 0);
  const srcMd = memory.desc.grouped([M, K], dt.f32, G, [RT, K]), dstMd = memory.desc.grouped([M, N], dt.f32, G, [RT, N]);
  const weiMd = memory.desc([G, K, N], dt.f32, tag.abc), biasMd = memory.desc([G, N], dt.f32, tag.ab);
  const prim = new matmul.Primitive(new matmul.PrimitiveDesc(eng, srcMd, weiMd, biasMd, dstMd));
  const src = Memory.create(srcMd, eng), dst = Memory.create(dstMd, eng, [undefined, src.handles[1]]);
  const wei = Memory.create(weiMd, eng), bias = Memory.create(biasMd, eng);
  offsets.fromSizes(sizes, src.offsets);
  return {
    loss: async (x, w, b) => {
      src.write(x);
      wei.write(w);
      bias.write(b);
      prim.execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.BIAS]: bias, [ARG.DST]: dst });
      await strm.wait();
      const y = dst.read();
      let l = 0;
      for (let i = 0; i < M * N; i++) l += y[i] * dy[i];
      return l;
    },
    free: () => [src, dst, wei, bias].forEach((m) => m.free()),
  };
}

async function centralDiff(loss: (v: Float64Array) => Promise<number>, v: Float64Array): Promise<Float64Array> {
  const g = new Float64Array(v.length);
  for (let i = 0; i < v.length; i++) {
    const keep = v[i];
    v[i] = keep + H;
    const up = await loss(v);
    v[i] = keep - H;
    const down = await loss(v);
    v[i] = keep;
    g[i] = (up - down) / (2 * H);
  }
  return g;
}

function expectNear(got: Float64Array, fd: Float64Array, what: string): void {
  expect(got.length).toBe(fd.length);
  const bad: string[] = [];
  for (let i = 0; i < got.length; i++) if (!(Math.abs(got[i] - fd[i]) <= 1e-3 * (1 + Math.abs(fd[i])))) bad.push(`[${i}] ${got[i]} vs fd ${fd[i]}`);
  expect(bad, `${what} differs from central differences`).toEqual([]);
}

const CASES: ReadonlyArray<readonly [string, BwdCase]> = [
  ['an empty expert, K = 3, N = 4', { G: 3, K: 3, N: 4, sizes: [2, 0, 3], seed: 3 }],
  ['K = 1, all rows to one expert', { G: 2, K: 1, N: 3, sizes: [0, 4], seed: 4 }],
  ['E = 1', { G: 1, K: 5, N: 2, sizes: [3], seed: 5 }],
];

describe.each([ENGINE_CONFIGS[0], ENGINE_CONFIGS[2]])('backward vs central finite differences of the forward [%s]', (_n, opts) => {
  let eng: Engine;
  let strm: Stream;
  beforeAll(async () => {
    eng = await Engine.create(opts);
    strm = new Stream(eng);
  });
  afterAll(() => eng.release());

  it.each(CASES)('%s', async (_name, shape) => {
    const c: BwdCase = { ...shape, bias: true };
    const inp = bwdInputs(c);
    const b = new Float64Array(c.G * c.N).map((_, i) => ((i * 7) % 5) / 8 - 0.25);
    const r = await runBackward(eng, strm, c, 'p1', inp);
    const f = lossFn(eng, strm, c, inp.dy);
    try {
      const x = Float64Array.from(inp.x), w = Float64Array.from(inp.w);
      expectNear(r.dx, await centralDiff((v) => f.loss(v, w, b), x), 'diff_src');
      expectNear(r.dw, await centralDiff((v) => f.loss(x, v, b), w), 'diff_weights');
      expectNear(r.db!, await centralDiff((v) => f.loss(x, w, v), b), 'diff_bias');
    } finally {
      f.free();
    }
  });
});
