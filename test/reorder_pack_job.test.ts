/**
 * Issue 19: reorders into packed weights run as one op job on the workers (wasm/src/pack-weights.c).
 * Every packed byte must be the reference packer's (src/memory/packed_weights.ts, the engine without
 * kernels), at 1, 2 and 3 threads: f32:p8 / f32:p8t from row-major (fast path), column-major (the
 * transposed fast path) and bf16 sources; x8:p8 and x4:p8k2 codes from row-major sources (4-bit: rows
 * on whole bytes or not), with K odd, N not a multiple of 8 or 32, E = 1, and `+q` layouts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ARG, Engine, Memory, Stream, memory, reorder, tag, type DataType } from '../src/index.js';
import type { MemoryDesc } from '../src/memory/desc.js';
import { packedLowpWeightsDesc, packedTransposedWeightsDesc, packedWeightsDesc, panelQuantValues, type PanelQuant } from '../src/memory/packed_weights.js';
import { mulberry32 } from './workloads.js';

interface Case {
  readonly name: string;
  readonly dims: readonly number[];
  readonly dt: DataType;
  readonly layout: 'abc' | 'acb';
  readonly to: (dims: readonly number[], dt: DataType) => MemoryDesc;
  readonly quant?: PanelQuant;
}

const p8 = (d: readonly number[]): MemoryDesc => packedWeightsDesc(d);
const p8t = (d: readonly number[]): MemoryDesc => packedTransposedWeightsDesc(d);
const lowp = (q?: PanelQuant) => (d: readonly number[], t: DataType): MemoryDesc => packedLowpWeightsDesc(d, t, q);
const kq: PanelQuant = { scales: { dataType: 'f32', mask: 7, groups: [1, 32, 1] } };
const mx: PanelQuant = { scales: { dataType: 'e8m0', mask: 7, groups: [1, 32, 1] } };
const colz: PanelQuant = { scales: { dataType: 'f16', mask: 5, groups: [1, 1, 1] }, zeroPoints: { dataType: 'u8', mask: 5, groups: [1, 1, 1] } };
const grouped: PanelQuant = { scales: { dataType: 'bf16', mask: 6, groups: [1, 16, 2] } };

const CASES: readonly Case[] = [
  { name: 'f32 abc -> p8, K 131, N 45, 3 experts', dims: [3, 131, 45], dt: 'f32', layout: 'abc', to: p8 },
  { name: 'f32 abc -> p8, E = 1, K 64, N 256', dims: [1, 64, 256], dt: 'f32', layout: 'abc', to: p8 },
  { name: 'f32 acb -> p8 (K contiguous), K 130, N 41', dims: [2, 130, 41], dt: 'f32', layout: 'acb', to: p8 },
  { name: 'f32 abc -> p8t, K 133, N 72', dims: [2, 133, 72], dt: 'f32', layout: 'abc', to: p8t },
  { name: 'bf16 abc -> p8, K 70, N 19', dims: [2, 70, 19], dt: 'bf16', layout: 'abc', to: p8 },
  { name: 's8 abc -> x8:p8, K 129 (odd), N 300', dims: [2, 129, 300], dt: 's8', layout: 'abc', to: lowp() },
  { name: 'u8 acb -> x8:p8, K 64, N 21', dims: [3, 64, 21], dt: 'u8', layout: 'acb', to: lowp() },
  { name: 's4 abc -> x4:p8k2, K 131 (odd), N 96 (rows on whole bytes)', dims: [2, 131, 96], dt: 's4', layout: 'abc', to: lowp() },
  { name: 'u4 abc -> x4:p8k2, E = 1, K 64, N 45 (rows on half bytes)', dims: [1, 64, 45], dt: 'u4', layout: 'abc', to: lowp() },
  { name: 'f4_e2m1 abc -> x4:p8k2, K 66, N 40', dims: [3, 66, 40], dt: 'f4_e2m1', layout: 'abc', to: lowp() },
  { name: 's4 abc -> x4:p8k2+q (K-block 32 f32 scales), K 128, N 72', dims: [2, 128, 72], dt: 's4', layout: 'abc', to: lowp(kq), quant: kq },
  { name: 's8 abc -> x8:p8+q (K-block 32 f32 scales), K 96, N 24', dims: [2, 96, 24], dt: 's8', layout: 'abc', to: lowp(kq), quant: kq },
  { name: 'f4_e2m1 abc -> x4:p8k2+q (MXFP4: e8m0 scales per 32 k), K 64, N 45 (last panel partial)', dims: [2, 64, 45], dt: 'f4_e2m1', layout: 'abc', to: lowp(mx), quant: mx },
  { name: 'u8 abc -> x8:p8+q (f16 scales and u8 zero points per expert column), K 33, N 20', dims: [3, 33, 20], dt: 'u8', layout: 'abc', to: lowp(colz), quant: colz },
  { name: 'E = 1, s4 abc -> x4:p8k2+q (bf16 scales over 16 k x 2 columns: written by the host), K 32, N 16', dims: [1, 32, 16], dt: 's4', layout: 'abc', to: lowp(grouped), quant: grouped },
];

describe('reorder into packed weights on the workers (pack-weights.c): the reference packer\'s bytes at 1/2/3 threads', () => {
  const engines: { eng: Engine; strm: Stream }[] = [];
  beforeAll(async () => {
    for (const opts of [{ threads: 1, kernels: 'none' }, { threads: 1, kernels: 'simd128' }, { threads: 2, kernels: 'relaxed' }, { threads: 3, kernels: 'simd128' }] as const) {
      const eng = await Engine.create(opts);
      engines.push({ eng, strm: new Stream(eng) });
    }
  });
  afterAll(() => engines.forEach((e) => e.eng.release()));

  it.each(CASES)('$name', async (c) => {
    const results: Uint8Array[] = [];
    for (const { eng, strm } of engines) {
      const src = Memory.create(memory.desc(c.dims, c.dt, c.layout === 'abc' ? tag.abc : tag.acb), eng);
      const rng = mulberry32(7);
      const sb = src.bytes();
      for (let i = 0; i < sb.length; i++) sb[i] = c.dt === 'f32' ? (i % 4 === 3 ? 0x3f : Math.floor(rng() * 256)) : c.dt === 'bf16' && i % 2 === 1 ? 0x3f : Math.floor(rng() * 256);
      const dst = Memory.create(c.to(c.dims, c.dt), eng);
      dst.bytes().fill(0xab); // every byte of a packed layout is written (codes, values, their padding)
      const args: Record<number, Memory> = { [ARG.FROM]: src, [ARG.TO]: dst };
      const values: Memory[] = [];
      for (const [spec, id] of [[c.quant?.scales, ARG.ATTR_SCALES | ARG.WEIGHTS], [c.quant?.zeroPoints, ARG.ATTR_ZERO_POINTS | ARG.WEIGHTS]] as const) {
        if (!spec) continue;
        const m = Memory.create(panelQuantValues(c.dims, spec).md, eng);
        const b = m.bytes();
        for (let i = 0; i < b.length; i++) b[i] = (i * 37 + 5) & 255;
        args[id] = m;
        values.push(m);
      }
      const pd = new reorder.PrimitiveDesc(eng, src.desc, dst.desc);
      expect(pd.implInfo.startsWith(eng.kernels ? 'wasm:' : 'ref:')).toBe(true);
      new reorder.Primitive(pd).execute(strm, args);
      await strm.wait();
      results.push(Uint8Array.from(dst.bytes()));
      [src, dst, ...values].forEach((m) => m.free());
    }
    for (let e = 1; e < results.length; e++) {
      const [want, got] = [results[0], results[e]];
      expect(got.length).toBe(want.length);
      const bad = got.findIndex((b, i) => b !== want[i]);
      expect(bad, `engine ${e}: first differing byte`).toBe(-1);
    }
  });
});
