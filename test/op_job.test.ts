import { afterAll, describe, expect, it } from 'vitest';
import { Engine, Stream } from '../src/index.js';
import { OP_KIND, OpJob } from '../src/kernels/op_job.js';

const FILL = { ptr: 32, n: 36, value: 40, SIZE: 48 } as const;
const engines: Engine[] = [];
afterAll(() => engines.forEach((e) => e.release()));

describe('op jobs on the shared scheduler', () => {
  for (const threads of [1, 2, 3]) {
    it(`fill op writes every element exactly once (${threads} threads)`, async () => {
      const eng = await Engine.create({ threads, kernels: 'simd128' });
      engines.push(eng);
      const strm = new Stream(eng);
      const n = 5000;
      const ptr = eng.alloc(n * 4 + 64);
      const view = new Int32Array(eng.buffer, ptr, n + 16).fill(-1);
      const job = new OpJob(eng, OP_KIND.fill, FILL);
      let seen = -1;
      strm.enqueue(job.task(() => {
        job.reset();
        job.set('ptr', ptr);
        job.set('n', n);
        job.set('value', 7);
      }, (s) => { seen = s.code; }));
      await strm.wait();
      expect(seen).toBe(0);
      expect(view.subarray(0, n).every((v) => v === 7)).toBe(true);
      expect(view[n]).toBe(-1);
    });
  }
  it('an unknown kind reports a status, writes nothing', async () => {
    const eng = await Engine.create({ threads: 2, kernels: 'simd128' });
    engines.push(eng);
    const strm = new Stream(eng);
    const job = new OpJob(eng, 99, FILL);
    let code = 0;
    strm.enqueue(job.task(() => job.reset(), (s) => { code = s.code; }));
    await strm.wait();
    expect(code).toBe(100);
  });
});
