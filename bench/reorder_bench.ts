/**
 * --mode=reorder (issue 19): reorders into every packed layout against a plain copy of the same bytes
 * (the copy op job, same engine and thread count; with `+q`, the codes and the scales), interleaved round by round; ratio = median of the
 * per-round time ratios reorder / copy (target <= 2).
 */
import { ARG, Engine, Memory, Stream, memory, reorder, tag, type DataType } from '../src/index.js';
import type { MemoryDesc } from '../src/memory/desc.js';
import { packedLowpWeightsDesc, packedTransposedWeightsDesc, packedWeightsDesc, packedX16WeightsDesc, panelQuantValues, type PanelQuant } from '../src/memory/packed_weights.js';
import { PACK_FMT, packTask } from '../src/primitives/reorder/pack_job.js';

export interface ReorderRow {
  readonly layout: string;
  readonly threads: number;
  readonly isa: string;
  readonly bytes: number;
  readonly median_ms: number;
  readonly copy_ms: number;
  readonly ratio: number;
  readonly rounds: number;
}

const kq: PanelQuant = { scales: { dataType: 'f32', mask: 7, groups: [1, 32, 1] } };
const LAYOUTS: readonly { name: string; dt: DataType; to: (d: number[]) => MemoryDesc; quant?: PanelQuant }[] = [
  { name: 'f32 abc -> f32:p8', dt: 'f32', to: (d) => packedWeightsDesc(d) },
  { name: 'f32 abc -> f32:p8t', dt: 'f32', to: (d) => packedTransposedWeightsDesc(d) },
  { name: 'bf16 abc -> x16:p8', dt: 'bf16', to: (d) => packedX16WeightsDesc(d, 'bf16') },
  { name: 's8 abc -> x8:p8', dt: 's8', to: (d) => packedLowpWeightsDesc(d, 's8') },
  { name: 's4 abc -> x4:p8k2', dt: 's4', to: (d) => packedLowpWeightsDesc(d, 's4') },
  { name: 's4 abc -> x4:p8k2+q (k32 f32)', dt: 's4', to: (d) => packedLowpWeightsDesc(d, 's4', kq), quant: kq },
];

/** Groups of `dt` weights [G', K, N] with the bytes of f32 weights `base` = [G, K, N]. */
function groupsFor(base: readonly number[], dt: DataType): number {
  const perF32 = dt === 'f32' ? 1 : dt === 'bf16' ? 2 : dt === 's8' ? 4 : 8;
  return base[0] * perF32;
}

/** base [G, K, N]: f32 weights, the other types with as many bytes (groupsFor); `only` filters layouts by name prefix (f32, bf16, s8, s4). */
export async function reorderBench(base: number[], threads: number, isa: 'auto' | 'simd128' | 'relaxed', rounds: number, only?: string[]): Promise<ReorderRow[]> {
  const eng = await Engine.create({ threads, kernels: isa });
  const strm = new Stream(eng);
  const out: ReorderRow[] = [];
  for (const l of LAYOUTS.filter((x) => !only || only.some((o) => x.name.startsWith(o)))) {
    // As many experts as make the f32 bytes of `dims` (8 MoE-B experts: 92 MB, beyond the L3 of the
    // machines here): an 11 MB s4 source half fits a 32 MB L3, and its copy then ran 0.5-1.2 ms by the round.
    const dims = [groupsFor(base, l.dt), base[1], base[2]];
    const src = Memory.create(memory.desc(dims, l.dt, tag.abc), eng);
    src.bytes().fill(0x3c);
    const dst = Memory.create(l.to(dims), eng);
    const args: Record<number, Memory> = { [ARG.FROM]: src, [ARG.TO]: dst };
    let scales: Memory | undefined;
    if (l.quant?.scales) {
      scales = Memory.create(panelQuantValues(dims, l.quant.scales).md, eng);
      new Float32Array(eng.buffer, scales.handles[0], scales.desc.getSize(0) / 4).fill(0.5);
      args[ARG.ATTR_SCALES | ARG.WEIGHTS] = scales;
    }
    const prim = new reorder.Primitive(new reorder.PrimitiveDesc(eng, src.desc, dst.desc));
    // The same bytes the reorder moves: the codes, and with `+q` the scales it places beside the panels.
    const codeBytes = src.desc.getSize(0);
    const copyDst = Memory.create(memory.desc(dims, l.dt, tag.abc), eng);
    const copyTask = (from: number, to: number, n: number) => packTask(eng, from, to, { fmt: PACK_FMT.copy, dt: 0, G: 1, K: 1, N: n, sg: 0, sk: 0, sn: 0, ps: 0 });
    const copies = [copyTask(src.handles[0], copyDst.handles[0], codeBytes)];
    let scalesCopy: Memory | undefined;
    if (scales) {
      scalesCopy = Memory.create(scales.desc, eng);
      copies.push(copyTask(scales.handles[0], scalesCopy.handles[0], scales.desc.getSize(0)));
    }
    const bytes = codeBytes + (scales?.desc.getSize(0) ?? 0);
    const time = async (f: () => void): Promise<number> => {
      const t0 = performance.now();
      f();
      await strm.wait();
      return performance.now() - t0;
    };
    const tr: number[] = [], tc: number[] = [];
    for (let r = -1; r < rounds; r++) { // round -1 warms both up
      const c = await time(() => copies.forEach((x) => strm.enqueue(x)));
      const t = await time(() => prim.execute(strm, args));
      if (r >= 0) { tc.push(c); tr.push(t); }
    }
    const med = (v: number[]): number => [...v].sort((a, b) => a - b)[v.length >> 1];
    out.push({ layout: l.name, threads, isa: eng.isa ?? 'none', bytes, median_ms: med(tr), copy_ms: med(tc), ratio: med(tr.map((t, i) => t / tc[i])), rounds });
    [src, dst, scales, copyDst, scalesCopy].forEach((m) => m?.free());
  }
  eng.release();
  return out;
}
