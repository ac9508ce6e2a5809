/**
 * The gpu engine's side of expert_map_per_group.test.ts: attr.setExpertMap with per-group src / dst
 * scales, zero points and binary src1 beside per-expert weights, bias and weights scales, bit for bit
 * against float64. The schedule's tiles (grouped-schedule table and the in-kernel schedule) carry the
 * group beside its expert; every kernel that reads them runs: gemv-splitk with each schedule,
 * gemm-tiled-vec4, gemm-tiled-dot4 and gemm-tiled.
 */
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { GpuEngine, Stream } from '../src/index.js';
import { gpuKernelTuning } from '../src/primitives/matmul/webgpu_kernel_choice.js';
import { useGpuEngine } from './gpu_test_engines.js';
import { QUANTS, ROWS, SHAPES, expectExact, runCase, type Rows } from './expert_map_per_group_cases.js';

let eng: GpuEngine;
let strm: Stream;
useGpuEngine((e, s) => { eng = e; strm = s; });
const DEFAULT_TUNING = { ...gpuKernelTuning };
afterEach(() => Object.assign(gpuKernelTuning, DEFAULT_TUNING));

// Every row mode on the in-kernel schedule and gemm-tiled; two on the others (the suite's time on SwiftShader).
const TUNINGS: ReadonlyArray<readonly [string, Partial<typeof gpuKernelTuning>, readonly Rows[]]> = [
  ['gemv-splitk, in-kernel schedule', { gemvMaxRows: 128 }, ROWS],
  ['gemv-splitk, grouped-schedule table', { gemvMaxRows: 128, gemvInline: false }, ['P1', 'scatter']],
  ['no gemv (vec4 / dot4 where they take it)', { gemv: false }, ['P2', 'gather']],
  ['gemm-tiled', { gemv: false, vec4: false, dot4: false }, ROWS],
];
const kernels = new Set<string>();

describe.each(TUNINGS)('gpu matmul expert map with per-group operands [%s]', (_t, tuning, rows) => {
  const cases = SHAPES.flatMap((s) => QUANTS.flatMap((q) => rows.map((r) => [`${s.name}, ${q}, ${r}`, s, q, r] as const)));
  it.each(cases)('%s', async (_n, s, q, r) => {
    Object.assign(gpuKernelTuning, tuning);
    const o = await runCase(eng, strm, s, q, r);
    expect(o.implInfo).toMatch(/^webgpu/);
    kernels.add(o.implInfo);
    expectExact(o, s.N, 'gpu');
  });
});

afterAll(() => {
  // Each schedule form and kernel family ran at least once.
  const all = [...kernels].join(' ');
  expect(all).toMatch(/gemv-splitk[^ ]*\+inline-schedule/);
  expect(all).toMatch(/gemv-splitk[^ ]*\+grouped-schedule/);
  expect(all).toMatch(/gemm-tiled-\d[^ ]*\+grouped-schedule/);
  expect(all).toMatch(/gemm-tiled-vec4[^ ]*\+grouped-schedule/);
  expect(all).toMatch(/gemm-tiled-dot4[^ ]*\+grouped-schedule/);
});
