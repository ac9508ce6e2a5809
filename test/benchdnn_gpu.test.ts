/**
 * benchdnn driver on the gpu engine (`--engine=gpu`, issues 17 and 20): groupdnn's gpu batch file in
 * correctness mode on SwiftShader's Vulkan (0 failed, the one problem the gpu engine refuses reported
 * UNIMPLEMENTED with the gpu impl's reason), and a wrong gpu result FAILS.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { runDriver } from '../bench/benchdnn/driver.js';
import { useSwiftShaderWithoutDriver } from './swiftshader_env.js';

async function run(args: string[], perturb?: (d: Float64Array) => void): Promise<{ lines: string[]; summary: Awaited<ReturnType<typeof runDriver>> }> {
  const lines: string[] = [];
  const summary = await runDriver(args, { out: (l) => lines.push(l), perturb });
  return { lines, summary };
}

beforeAll(() => {
  useSwiftShaderWithoutDriver(); // no GPU driver in CI: Dawn runs on SwiftShader
});

describe('benchdnn --engine=gpu', () => {
  it('test_groupdnn_gpu: every problem passes but the one the gpu engine refuses', async () => {
    const { lines, summary } = await run(['--engine=gpu', '--matmul', '--batch=bench/benchdnn/inputs/test_groupdnn_gpu']);
    const unimplemented = '10x30:30x20';
    const notPassed = lines.filter((l) => /^\d+:/.test(l) && !/^\d+:PASSED __REPRO: --engine=gpu --matmul /.test(l));
    expect(notPassed).toEqual([
      `${summary.tests - 1}:UNIMPLEMENTED (matmul: no implementation for ${unimplemented} on the gpu engine (webgpu: src and dst need unit column strides on the gpu engine: src dims[1] = 30 has stride 10 (reorder it to a row-major layout first; the stride of a dim of extent 1 does not matter))) __REPRO: --engine=gpu --matmul --stag=ba ${unimplemented}`,
    ]);
    expect(summary).toMatchObject({ failed: 0, mistrusted: 0, unimplemented: 1, invalid_arguments: 0 });
    expect(summary.tests).toBeGreaterThan(25);
    expect(summary.passed).toBe(summary.tests - 1);
  }, 600_000);

  it('a wrong gpu result fails', async () => {
    const problem = ['--engine=gpu', '--matmul', '--dt=bf16', '--wtag=any', '--grouped=0:4:3+0+5+8', '16x32:4x32x24'];
    expect((await run(problem)).summary).toMatchObject({ tests: 1, passed: 1 });
    const { lines, summary } = await run(problem, (d) => {
      d[5] += 1;
    });
    expect(summary).toMatchObject({ tests: 1, passed: 0, failed: 1 });
    expect(lines[0]).toMatch(/^0:FAILED \(errors:1 total:384\) __REPRO: --engine=gpu --matmul --dt=bf16 --grouped=0:4:3\+0\+5\+8 16x32:4x32x24$/);
  }, 120_000);

  it('perf mode names the webgpu implementation', async () => {
    const { lines } = await run(['--engine=gpu', '--mode=P', '--fix-times-per-prb=2', '--matmul', '--grouped=0:2:3+5', '8x16:2x16x8']);
    expect(lines[0]).toMatch(/^perf,gpu,webgpu:(gemm-tiled|gemv-splitk)-[^,]+\+(grouped|inline)-schedule,,--grouped=0:2:3\+5 8x16:2x16x8,/);
  }, 120_000);
});
