/**
 * Issue 19: the 1-2 row `:dq` tiles on relaxed SIMD's i16x8 dot (s8_dq_1x16w4r / s8_dq_2x8w4r / s8_dq_1x16f4r, where relaxed
 * SIMD is native) keep int16 partial sums before widening them to int32: 16 k of s4 / u4 codes (biased to [0, 15]), 8 k of
 * f4_e2m1 codes (as 2 v + 12 in [0, 24]). Rows quantized to +-127 everywhere against the largest code put those sums at
 * their bound (16 x 127 x 15 = 30480 and 8 x 127 x 24 = 24384 of 32767): one more step per sum would wrap. The result
 * must be the quantization model's bits (dqReference) on every engine, with 1-row and 2-row experts, per-column and
 * K-block scales, and a last k-pair (K = 2050).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dt, type Engine, type Stream } from '../src/index.js';
import { expectF32Bits } from './helpers.js';
import { dqEngines, dqReference, runDqMatmul } from './dynamic_int8_runner.js';

/** The largest value of each type (the largest code the kernels multiply) and how the kernels count it. */
const WEIGHTS = [
  { wdt: dt.s4, value: 7, times: 1 },
  { wdt: dt.u4, value: 15, times: 1 },
  { wdt: dt.f4_e2m1, value: 6, times: 2 }, // summed as 2 v, the 0.5 in the scales
] as const;

describe('relaxed i16x8 dot kernels: int16 partial sums at their bound', () => {
  const engines: [string, Engine, Stream][] = [];
  beforeAll(async () => { engines.push(...(await dqEngines())); });
  afterAll(() => engines.forEach(([, e]) => e.release()));

  for (const { wdt, value, times } of WEIGHTS) {
    for (const blk of [0, 32]) {
      it(`${wdt}, ${blk ? `K-blocks of ${blk} (${wdt === dt.f4_e2m1 ? 'e8m0' : 'f32'})` : 'per-column'} scales`, async () => {
        const E = 3, sizes = [1, 2, 0], K = blk ? 2048 : 2050, N = 24, T = 3;
        // rows +1, -1, +1 with one -1 every 5 k: quantized to +-127 (the bound both ways)
        const x = Float32Array.from({ length: T * K }, (_, i) => { const r = Math.floor(i / K), k = i % K; return r === 1 ? -1 : r === 2 && k % 5 === 0 ? -1 : 1; });
        const w = new Float64Array(E * K * N).fill(value);
        const nb = blk ? K / blk : 1;
        const sdt = wdt === dt.f4_e2m1 && blk ? dt.e8m0 : dt.f32;
        const sc = Float32Array.from({ length: E * nb * N }, (_, i) => (sdt === dt.e8m0 ? 2 ** -(3 + (i % 5)) : Math.fround(0.001 + (i % 7) * 0.003)));
        const want = dqReference({ sizes, K, N, blk }, x, (_g, _k, _n) => times * value, (g, b, n) => sc[(g * nb + b) * N + n] / times, undefined);
        for (const [name, eng, strm] of engines) {
          const o = await runDqMatmul(eng, strm, { E, sizes, K, N, x, w, wdt, scales: { data: sc, blk, sdt } });
          expect(o.impl, name).toMatch(/-dq8/);
          expectF32Bits(o.got, want, `${name} ${wdt} blk ${blk}`);
        }
      });
    }
  }
});
