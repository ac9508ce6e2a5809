/**
 * A fixed seed of the grouped GEMM cross-check (bench/grouped_gemm_fuzz.ts): random Proposal #3 (`grouped_gemm`,
 * experts of different K / N, runtime M_i, weight-only and `:dq` types, scales, zero points, post-ops) and Proposal #2
 * (offsets attribute) problems, small ones, on the cpu and gpu engines against the float64 expectation; the gpu's
 * second run gives the same bits; bad M_i / offsets are a DnnlError at wait() with dst and its guard rows untouched.
 * Larger seeds and counts run from the command line.
 */
import { describe, expect, it } from 'vitest';
import type { Engine, GpuEngine } from '../src/index.js';
import { describeCase, generateCase, runCase, type FuzzCase } from '../bench/grouped_gemm_fuzz_cases.js';
import { useGpuAndCpuEngines } from './gpu_test_engines.js';

let gpu: GpuEngine;
let cpu: Engine;
useGpuAndCpuEngines((g, c) => { gpu = g; cpu = c; });

const SEED = 3;
/**
 * (kind, case index) of seed 3, small sizes, chosen for what they cover and for SwiftShader's pipeline compile times
 * (the `:dq` kinds take tens of seconds there: the command line and their own tests run them): P#3 E = 1 with
 * per-column weights and dst scales into f16; P#3 E = 6 f16 with empty experts, M_i at its capacity and a sum post-op;
 * P#2 u8 weights with per-expert-column scales, empty groups and a per-expert binary; an M_i one row above capacity;
 * P#2 offsets past the extent.
 */
const CASES: readonly (readonly [FuzzCase['kind'], number])[] = [['P3', 0], ['P3', 5], ['P2', 3], ['bad-P3', 10], ['bad-P2', 3]];

describe(`grouped GEMM cross-check, seed ${SEED} (small cases)`, () => {
  it.each(CASES)('%s case %i: cpu and gpu match the float64 reference', async (kind, i) => {
    const fc = generateCase(SEED, i, kind, 'small');
    const what = describeCase(fc);
    for (const eng of [cpu, gpu]) {
      const v = await runCase(eng, fc);
      expect(v, `${eng.kind}: ${what}`).toEqual({ status: 'ok' });
    }
  });
});
