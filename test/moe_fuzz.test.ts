/**
 * A fixed seed of bench/moe_fuzz.ts in CI: a handful of random moe.layer configurations (routing
 * options, expert maps, GLU kinds and layouts, weight formats, stage variants) on the cpu and the gpu
 * engine against the float64 layer reference, the gpu's selected experts equal to the cpu's, the gpu
 * bit-reproducible, a NaN logit an error at wait; and random routing and dispatch problems alone
 * against their references. Any mismatch fails with the reproducible config.
 */
import { describe, expect, it } from 'vitest';
import type { Engine, GpuEngine } from '../src/index.js';
import { caseOf, fuzzOne, type StageKind } from '../bench/moe_fuzz.js';
import { useGpuAndCpuEngines } from './gpu_test_engines.js';

let gpu: GpuEngine;
let cpu: Engine;
useGpuAndCpuEngines((g, c) => { gpu = g; cpu = c; });

const SEED = 3;
const COUNT: Record<StageKind, number> = { layer: 4, routing: 4, dispatch: 3 };
type Sizes = { T: number; E: number; K: number; I: number };
/** SwiftShader time: the first cases of the seed that are small enough (the bench runs the rest). */
const SMALL: Record<StageKind, (c: Sizes) => boolean> = { layer: (c) => c.T <= 24 && c.E * c.K * c.I <= 8 * 64 * 48, routing: (c) => c.T <= 40, dispatch: () => true };

function indices(stage: StageKind): number[] {
  const out: number[] = [];
  for (let i = 0; out.length < COUNT[stage]; i++) if (SMALL[stage](caseOf(SEED, i, stage) as Sizes)) out.push(i);
  return out;
}

describe(`moe fuzz, seed ${SEED}`, () => {
  it('the seed covers what it claims (T = 0 aside, several weight formats, stage variants and routing options)', () => {
    const layers = indices('layer').map((i) => caseOf(SEED, i, 'layer') as { wfmt: string; gemm1: string; combine: string; routing: { scoring?: string } });
    expect(new Set(layers.map((c) => c.wfmt)).size).toBeGreaterThan(2);
    expect(new Set(layers.map((c) => `${c.gemm1}/${c.combine}`)).size).toBeGreaterThan(1);
    expect(new Set(layers.map((c) => c.routing.scoring)).size).toBe(2);
  });

  for (const stage of ['layer', 'routing', 'dispatch'] as const) {
    it(`${COUNT[stage]} random ${stage} cases: cpu and gpu agree with the float64 reference`, async () => {
      for (const i of indices(stage)) {
        const r = await fuzzOne({ cpu, gpu }, SEED, i, stage);
        const problems = r.problems.filter((p) => !p.startsWith('refused '));
        expect(problems, `--seed=${SEED} --stages=${stage} --only=${i}: ${JSON.stringify(r.config)}`).toEqual([]);
      }
    }, 120_000); // ~20 s on a quiet 2-core SwiftShader machine; room for a loaded one
  }
});
