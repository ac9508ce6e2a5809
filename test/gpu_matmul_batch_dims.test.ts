import { describe, expect, it } from 'vitest';
import type { GpuEngine, Stream } from '../src/index.js';
import { useGpuEngine } from './gpu_test_engines.js';
import { BATCH_CASES, runBatchCase } from './batch_dims_cases.js';

/** Dense matmul with more than one batch dim on the gpu engine: one dispatch where the batch dims collapse, else one per launch in one pass. */
describe('gpu engine: matmul with more than one batch dim', () => {
  let eng: GpuEngine;
  let strm: Stream;
  useGpuEngine((e, s) => {
    eng = e;
    strm = s;
  });

  it.each(BATCH_CASES.map((c) => [c.name, c] as const))('%s', async (_n, c) => {
    const { implInfo } = await runBatchCase(eng, strm, c);
    expect(implInfo).toMatch(/^webgpu:/);
  });

  it('a batch that does not collapse runs as launches of one kernel (named in implInfo)', async () => {
    const { implInfo } = await runBatchCase(eng, strm, { name: 'launches', src: [2, 1, 5, 7], wei: [2, 3, 7, 9] });
    expect(implInfo).toMatch(/^webgpu:gemm-tiled-.*\+2-batch-launches$/);
  });
});
