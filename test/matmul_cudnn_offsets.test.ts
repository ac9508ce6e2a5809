/**
 * cuDNN's MoE grouped matmul offsets where groupdnn's canonical offsets were stricter (rfcs/0001):
 *  - none mode with rows outside every group: `first_token_offset` whose first entry is not 0, rows in
 *    no group zero-filled (`attr.setZeroFillUngroupedRows`, `offsets.fromStarts(..., { leadingRows })`);
 *  - batched offsets, B·E groups where group g uses expert g mod E (`attr.setExpertMap` +
 *    `ARG.MOE_EXPERT_MAP`), instead of repeating the weights per group.
 * Expected values come from a float64 loop written here; the library's kernels and its reference
 * implementation both run.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ARG, Engine, Memory, PrimitiveAttr, RUNTIME_DIM_VAL, Stream, dt, matmul, memory, offsets, reorder, tag,
  type DataType, type MemoryDesc,
} from '../src/index.js';
import { expectDnnlError, expectDnnlReject } from './helpers.js';
import { mulberry32 } from './workloads.js';

const RT = RUNTIME_DIM_VAL;
const CONFIGS = [
  ['simd128 1T', { threads: 1, kernels: 'simd128' }],
  ['relaxed 2T', { threads: 2, kernels: 'relaxed' }],
  ['reference', { threads: 1, kernels: 'none' }],
] as const;
const SENTINEL = 77;

interface Case {
  readonly M: number;
  readonly K: number;
  readonly N: number;
  /** G + 1 offsets (offs[0] may be > 0). */
  readonly offs: readonly number[];
  /** Experts of the weights; the expert of each group (default: group g is expert g). */
  readonly E: number;
  readonly map?: readonly number[];
  readonly bias?: boolean;
  /** s8 weights with per-expert-column f32 scales (mask 5). */
  readonly s8?: boolean;
  readonly packed?: boolean;
  readonly glu?: boolean;
  readonly dstDt?: DataType;
}

/** float64: row r of group g = x[r] . deq(w[e]) (+ bias[e]), e = map[g]; GLU swiglu halves when asked. */
function expected(c: Case, x: Float64Array, w: Float64Array, scales: Float64Array, bias: Float64Array): (number | undefined)[] {
  const G = c.offs.length - 1, Nd = c.glu ? c.N / 2 : c.N;
  const out: (number | undefined)[] = new Array(c.M * Nd).fill(undefined);
  for (let g = 0; g < G; g++) {
    const e = c.map ? c.map[g] : g;
    for (let r = c.offs[g]; r < c.offs[g + 1]; r++) {
      const y = new Float64Array(c.N);
      for (let n = 0; n < c.N; n++) {
        let s = 0;
        for (let k = 0; k < c.K; k++) s += x[r * c.K + k] * w[(e * c.K + k) * c.N + n] * (c.s8 ? scales[e * c.N + n] : 1);
        y[n] = s + (c.bias ? bias[e * c.N + n] : 0);
      }
      for (let n = 0; n < Nd; n++) {
        const gate = y[n], up = y[Nd + n];
        out[r * Nd + n] = c.glu ? (gate / (1 + Math.exp(-gate))) * up : y[n];
      }
    }
  }
  return out;
}

describe.each(CONFIGS)('matmul: cuDNN offsets [%s]', (_name, opts) => {
  let eng: Engine;
  let strm: Stream;
  beforeAll(async () => {
    eng = await Engine.create(opts);
    strm = new Stream(eng);
  });
  afterAll(() => eng.release());

  /** Runs a case through Proposal #1 (grouped src / dst) or #2 (offsets attribute); checks every dst element. */
  async function run(c: Case, attr: PrimitiveAttr, proposal: 'P1' | 'P2', seed: number): Promise<void> {
    const G = c.offs.length - 1, Nd = c.glu ? c.N / 2 : c.N, dstDt = c.dstDt ?? dt.f32;
    const rng = mulberry32(seed);
    const rand = (n: number, amp: number): Float64Array => Float64Array.from({ length: n }, () => Math.fround((rng() * 2 - 1) * amp));
    const x = rand(c.M * c.K, 1);
    const w = c.s8 ? Float64Array.from({ length: c.E * c.K * c.N }, () => Math.round((rng() * 2 - 1) * 127)) : rand(c.E * c.K * c.N, 1);
    const scales = rand(c.E * c.N, 0.01), bias = rand(c.E * c.N, 1);
    if (c.glu) attr.postOps.appendGlu('glu_swiglu', 'halves');
    if (c.s8) attr.setScales(ARG.WEIGHTS, 5, [1, 1, 1], dt.f32);
    if (proposal === 'P2') attr.setGroupedOffsets(ARG.SRC, G);
    const srcMd = proposal === 'P1' ? memory.desc.grouped([c.M, c.K], dt.f32, G, [RT, c.K]) : memory.desc([c.M, c.K], dt.f32, tag.ab);
    const dstMd = proposal === 'P1' ? memory.desc.grouped([c.M, Nd], dstDt, G, [RT, Nd]) : memory.desc([c.M, Nd], dstDt, tag.ab);
    const weiDt = c.s8 ? dt.s8 : dt.f32;
    const weiPlainMd = memory.desc([c.E, c.K, c.N], weiDt, tag.abc);
    const biasMd = c.bias ? memory.desc([c.E, c.N], dt.f32, tag.ab) : undefined;
    const pd = biasMd
      ? new matmul.PrimitiveDesc(eng, srcMd, c.packed ? memory.desc([c.E, c.K, c.N], weiDt, tag.any) : weiPlainMd, biasMd, dstMd, attr)
      : new matmul.PrimitiveDesc(eng, srcMd, c.packed ? memory.desc([c.E, c.K, c.N], weiDt, tag.any) : weiPlainMd, dstMd, attr);
    if (c.packed && opts.kernels !== 'none') expect(pd.queryMd('weights')!.format).toBe('packed');
    const mems: Memory[] = [];
    const mk = (md: MemoryDesc, shared?: number): Memory => {
      const m = Memory.create(md, eng, shared === undefined ? undefined : [undefined, shared]);
      mems.push(m);
      return m;
    };
    const src = mk(srcMd).write(x);
    const dst = proposal === 'P1' ? mk(dstMd, src.handles[1]) : mk(dstMd);
    dst.write(new Array(c.M * Nd).fill(SENTINEL));
    const args: Record<number, Memory> = { [ARG.SRC]: src, [ARG.DST]: dst };
    if (proposal === 'P1') src.offsets.set(c.offs);
    else args[ARG.ATTR_GROUPED_OFFSETS | ARG.SRC] = mk(pd.queryMd('grouped_offsets')!).write(c.offs);
    const weiMd = pd.queryMd('weights')!;
    const wei = mk(weiMd);
    if (weiMd.format === 'packed') {
      const plain = mk(weiPlainMd).write(w);
      const sc = weiMd.packed?.quant ? mk(memory.desc([c.E, c.N], dt.f32, tag.ab)).write(scales) : undefined;
      new reorder.Primitive(new reorder.PrimitiveDesc(eng, weiPlainMd, weiMd)).execute(strm, { [ARG.FROM]: plain, [ARG.TO]: wei, ...(sc ? { [ARG.ATTR_SCALES | ARG.WEIGHTS]: sc } : {}) });
      if (!sc && c.s8) args[ARG.ATTR_SCALES | ARG.WEIGHTS] = mk(pd.queryMd('scales:weights')!).write(scales);
    } else {
      wei.write(w);
      if (c.s8) args[ARG.ATTR_SCALES | ARG.WEIGHTS] = mk(pd.queryMd('scales:weights')!).write(scales);
    }
    args[ARG.WEIGHTS] = wei;
    if (biasMd) args[ARG.BIAS] = mk(biasMd).write(bias);
    if (c.map) args[ARG.MOE_EXPERT_MAP] = mk(pd.queryMd('expert_map')!).write(c.map);
    new matmul.Primitive(pd).execute(strm, args);
    await strm.wait();
    const got = dst.read(), want = expected(c, x, w, scales, bias);
    const zeroFill = attr.moeRows.zeroFillUngrouped;
    const tol = dstDt === dt.f32 ? 2e-5 : 1e-2;
    for (let i = 0; i < want.length; i++) {
      const r = Math.floor(i / Nd), wv = want[i];
      if (wv === undefined) expect(got[i], `row ${r} is in no group`).toBe(zeroFill ? 0 : SENTINEL);
      else expect(Math.abs(got[i] - wv), `row ${r} col ${i % Nd}: ${got[i]} vs ${wv}`).toBeLessThanOrEqual(tol * (1 + Math.abs(wv)));
    }
    mems.forEach((m) => m.free());
  }

  describe('none mode with rows outside every group (attr.setZeroFillUngroupedRows)', () => {
    const starts = [3, 3, 7]; // cuDNN first_token_offset: rows 0-2 in no group, group 1 empty
    for (const proposal of ['P1', 'P2'] as const) {
      it(`${proposal}: first_token_offset [3, 3, 7] of 12 rows: rows 0-2 zero, K and N not multiples of the tile`, async () => {
        const offs = Array.from(offsets.fromStarts(starts, 12, undefined, { leadingRows: true }));
        expect(offs).toEqual([3, 3, 7, 12]);
        await run({ M: 12, K: 13, N: 10, offs, E: 3, bias: true }, new PrimitiveAttr().setZeroFillUngroupedRows(), proposal, 1);
      });
    }
    it('rows on both sides of the groups, one expert taking all routed rows, bf16 dst, GLU (N/2 dst columns)', async () => {
      await run({ M: 11, K: 9, N: 12, offs: [2, 9], E: 1, glu: true, dstDt: dt.bf16 }, new PrimitiveAttr().setZeroFillUngroupedRows(), 'P1', 2);
    });
    it('every row in no group (offsets all equal), and E = 1 with offsets [0, M] (nothing to fill)', async () => {
      await run({ M: 6, K: 5, N: 3, offs: [4, 4, 4], E: 2 }, new PrimitiveAttr().setZeroFillUngroupedRows(), 'P1', 3);
      await run({ M: 6, K: 5, N: 3, offs: [0, 6], E: 1 }, new PrimitiveAttr().setZeroFillUngroupedRows(), 'P1', 4);
    });
    it('without the attribute the strict rules stay: offsets[0] must be 0, rows past the last offset untouched', async () => {
      await run({ M: 10, K: 4, N: 5, offs: [0, 2, 7], E: 2 }, new PrimitiveAttr(), 'P1', 5);
      const srcMd = memory.desc.grouped([10, 4], dt.f32, 2, [RT, 4]), dstMd = memory.desc.grouped([10, 5], dt.f32, 2, [RT, 5]);
      const pd = new matmul.PrimitiveDesc(eng, srcMd, memory.desc([2, 4, 5], dt.f32, tag.abc), dstMd);
      const src = Memory.create(srcMd, eng), dst = Memory.create(dstMd, eng, [undefined, src.handles[1]]), wei = Memory.create(pd.queryMd('weights')!, eng);
      src.offsets.set([1, 2, 7]);
      new matmul.Primitive(pd).execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst });
      await expectDnnlReject(strm.wait(), 'invalid_arguments', 'src offsets[0] must be 0, got 1 (attr.setZeroFillUngroupedRows lets the first group start later)');
      [src, dst, wei].forEach((m) => m.free());
      expect(() => offsets.fromStarts([1, 2], 3)).toThrow('pass { leadingRows: true }');
    });
    it('is refused with a gather or a scatter, and outside grouped rows', () => {
      const gathered = new PrimitiveAttr().setZeroFillUngroupedRows().setGather();
      expectDnnlError(() => new matmul.PrimitiveDesc(eng, memory.desc([4, 3], dt.f32, tag.ab), memory.desc([2, 3, 5], dt.f32, tag.abc), memory.desc.grouped([6, 5], dt.f32, 2, [RT, 5]), gathered), 'invalid_arguments', "cuDNN's none mode: it does not combine with a gather or a scatter");
      expectDnnlError(() => new matmul.PrimitiveDesc(eng, memory.desc([4, 3], dt.f32, tag.ab), memory.desc([3, 5], dt.f32, tag.ab), memory.desc([4, 5], dt.f32, tag.ab), new PrimitiveAttr().setZeroFillUngroupedRows()), 'invalid_arguments', 'setZeroFillUngroupedRows needs grouped rows');
    });
  });

  describe('groups mapped to experts (attr.setExpertMap, cuDNN batched offsets: group g uses expert g mod E)', () => {
    const B = 2, E = 3;
    const map = Array.from({ length: B * E }, (_, g) => g % E);
    const offs = [0, 2, 2, 5, 6, 10, 12]; // B·E = 6 groups, one empty
    for (const proposal of ['P1', 'P2'] as const) {
      it(`${proposal}: f32 weights [E, K, N] and bias [E, N], 6 groups over 3 experts`, async () => {
        await run({ M: 13, K: 11, N: 9, offs, E, map, bias: true }, new PrimitiveAttr().setExpertMap(), proposal, 10);
      });
    }
    it('packed (tag.any) weights, and s8 weights with per-expert-column scales, plain and packed (scales in the panels)', async () => {
      await run({ M: 12, K: 20, N: 17, offs, E, map, packed: true }, new PrimitiveAttr().setExpertMap(), 'P1', 11);
      await run({ M: 12, K: 20, N: 17, offs, E, map, s8: true, bias: true }, new PrimitiveAttr().setExpertMap(), 'P1', 12);
      await run({ M: 12, K: 20, N: 17, offs, E, map, s8: true, packed: true }, new PrimitiveAttr().setExpertMap(), 'P2', 15);
    });
    it('E = 1: every group on the one expert; an arbitrary map; with zero-filled leading rows', async () => {
      await run({ M: 9, K: 6, N: 4, offs: [0, 3, 3, 9], E: 1, map: [0, 0, 0] }, new PrimitiveAttr().setExpertMap(), 'P1', 13);
      await run({ M: 9, K: 6, N: 4, offs: [1, 3, 3, 8], E: 4, map: [3, 0, 3] }, new PrimitiveAttr().setExpertMap().setZeroFillUngroupedRows(), 'P2', 14);
    });
    it('a map entry outside [0, E) is an error at wait() with nothing written; the map is a required argument', async () => {
      const srcMd = memory.desc.grouped([6, 4], dt.f32, 3, [RT, 4]), dstMd = memory.desc.grouped([6, 5], dt.f32, 3, [RT, 5]);
      const pd = new matmul.PrimitiveDesc(eng, srcMd, memory.desc([2, 4, 5], dt.f32, tag.abc), dstMd, new PrimitiveAttr().setExpertMap());
      expect(pd.queryMd('expert_map')!.dims).toEqual([3]);
      const src = Memory.create(srcMd, eng), dst = Memory.create(dstMd, eng, [undefined, src.handles[1]]), wei = Memory.create(pd.queryMd('weights')!, eng);
      const m = Memory.create(pd.queryMd('expert_map')!, eng).write([0, 2, 1]);
      src.offsets.set([0, 2, 4, 6]);
      dst.write(new Array(30).fill(SENTINEL));
      new matmul.Primitive(pd).execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst, [ARG.MOE_EXPERT_MAP]: m });
      await expectDnnlReject(strm.wait(), 'invalid_arguments', 'matmul.execute: ARG.MOE_EXPERT_MAP[1] = 2 is out of range [0, experts = 2)');
      expect(Array.from(dst.read())).toEqual(new Array(30).fill(SENTINEL));
      expectDnnlError(() => new matmul.Primitive(pd).execute(strm, { [ARG.SRC]: src, [ARG.WEIGHTS]: wei, [ARG.DST]: dst }), 'invalid_arguments', 'missing argument ARG.MOE_EXPERT_MAP');
      expectDnnlError(() => new matmul.PrimitiveDesc(eng, srcMd, memory.desc([2, 4, 5], dt.f32, tag.abc), dstMd), 'invalid_arguments', 'src group count 3 must equal weights dims[0] = 2 (or map groups to experts: attr.setExpertMap)');
      [src, dst, wei, m].forEach((x) => x.free());
    });
  });
});
