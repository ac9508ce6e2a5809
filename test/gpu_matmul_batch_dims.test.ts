import { describe, expect, it } from 'vitest';
import { dt, matmul, memory, type GpuEngine, type Stream } from '../src/index.js';
import { useGpuEngine } from './gpu_test_engines.js';
import { BATCH_CASES, expectGluBitsOf3D, runBatchCase } from './batch_dims_cases.js';

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

  it('a GLU: the bits of the 3D matmuls (one collapsed batch, and two launches)', async () => {
    await expectGluBitsOf3D(eng, strm);
  });

  it('a src or dst whose columns are not contiguous is refused as in 2D / 3D', () => {
    const md = (d: number[], t = 'abcd'): ReturnType<typeof memory.desc> => memory.desc(d, dt.f32, t);
    expect(() => new matmul.PrimitiveDesc(eng, md([2, 3, 5, 7], 'abdc'), md([2, 3, 7, 9]), md([2, 3, 5, 9]))).toThrow(/unimplemented.*src and dst need unit column strides/);
    expect(() => new matmul.PrimitiveDesc(eng, md([2, 1, 5, 7]), md([2, 3, 7, 9]), md([2, 3, 5, 9], 'abdc'))).toThrow(/unimplemented.*src and dst need unit column strides/);
  });

  it('a batch that does not collapse runs as launches of one kernel (named in implInfo)', async () => {
    const { implInfo } = await runBatchCase(eng, strm, { name: 'launches', src: [2, 1, 5, 7], wei: [2, 3, 7, 9] });
    expect(implInfo).toMatch(/^webgpu:gemm-tiled-.*\+2-batch-launches$/);
  });
});
