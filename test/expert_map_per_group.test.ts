/**
 * attr.setExpertMap with operands of one value per group ([G, ...]: src / dst scales and zero points,
 * binary src1) beside the weights' per-expert ones: group g reads entry g of the former and expert
 * map[g] of the latter. Regression: every implementation read the per-group ones at map[g] (past a
 * [G] tensor's end when map[g] >= G, another group's value otherwise), so the pd refused them. Against
 * float64 (expert_map_per_group_cases.ts), bit for bit, on the wasm kernels (1 and 2 threads: groups
 * of one expert on different workers) and the reference, grouped descriptors (Proposal #1), the
 * grouped-offsets attribute (Proposal #2), a gather and a scatter.
 */
import { describe, expect, it } from 'vitest';
import { ARG, Engine, PrimitiveAttr, RUNTIME_DIM_VAL, Stream, dt, matmul, memory, tag, type EngineOptions } from '../src/index.js';
import { ENGINE_CONFIGS, expectDnnlError } from './helpers.js';
import { QUANTS, ROWS, SHAPES, expectExact, runCase } from './expert_map_per_group_cases.js';

const CONFIGS: ReadonlyArray<readonly [string, EngineOptions]> = [...ENGINE_CONFIGS, ['wasm simd128, 2 threads', { threads: 2, kernels: 'simd128' }]];

describe.each(CONFIGS)('matmul expert map with per-group operands [%s]', (cfg, opts) => {
  const cases = SHAPES.flatMap((s) => QUANTS.flatMap((q) => ROWS.map((r) => [`${s.name}, ${q}, ${r}`, s, q, r] as const)));
  it.each(cases)('%s', async (_n, s, q, r) => {
    const eng = await Engine.create(opts);
    try {
      const strm = new Stream(eng);
      // Twice: the second run starts from the A blocks the first left in the workers.
      for (let run = 0; run < 2; run++) {
        const o = await runCase(eng, strm, s, q, r);
        expect(o.implInfo).toMatch(cfg === 'reference' ? /^ref:any$/ : /^wasm:/);
        expectExact(o, s.N, `run ${run}`);
      }
    } finally {
      eng.release();
    }
  });
});

describe('matmul expert map: per-group operands are sized by the groups G, not the experts E', () => {
  const G = 2, E = 5, K = 4, N = 3, M = 4;
  const srcMd = memory.desc.grouped([M, K], dt.f32, G, [RUNTIME_DIM_VAL, K]), dstMd = memory.desc.grouped([M, N], dt.f32, G, [RUNTIME_DIM_VAL, N]);
  const weiMd = memory.desc([E, K, N], dt.f32, tag.abc);
  it('[G] scales, [G, N] src1 accepted; [E, N] src1 refused', async () => {
    const eng = await Engine.create({ threads: 1 });
    try {
      const attr = new PrimitiveAttr().setExpertMap().setScales(ARG.SRC, 0).setScales(ARG.DST, 0);
      attr.postOps.appendBinary('binary_add', memory.desc([G, N], dt.f32, tag.ab));
      const pd = new matmul.PrimitiveDesc(eng, srcMd, weiMd, dstMd, attr);
      expect(pd.queryMd('scales:src')!.dims).toEqual([G]);
      expect(pd.queryMd('scales:dst')!.dims).toEqual([G]);
      expect(pd.implInfo).toMatch(/^wasm:/);
      const bad = new PrimitiveAttr().setExpertMap();
      bad.postOps.appendBinary('binary_add', memory.desc([E, N], dt.f32, tag.ab));
      expectDnnlError(() => new matmul.PrimitiveDesc(eng, srcMd, weiMd, dstMd, bad), 'invalid_arguments', `[G = ${G}, ${N} or 1] (per group)`);
    } finally {
      eng.release();
    }
  });
});
