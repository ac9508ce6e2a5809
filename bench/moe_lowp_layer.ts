/**
 * The MoE layer with weight-only int8 / int4 weights (f32 activations), quantized exactly as the
 * onnxruntime-web QMoE peer quantizes them (symmetric per expert and output column: s = amax / 127 or
 * amax / 7, q = RNE(w / s)), packed by a reorder into the pd's `tag.any` choice (x8:p8 / x4:p8k2 code
 * panels, decoded in the microkernel): the apples-to-apples row beside ORT's QMoE in `--mode=moe`. Mode `dq`
 * runs the same weights with dynamic int8 activations (`dynamicQuantization: 's8'`, issue 19's `:dq`).
 */
import { ARG, Engine, Memory, Stream, dt, memory, moe, reorder, tag, type MemoryDesc } from '../src/index.js';
import { fillRandom } from './timing.js';
import { MOE_SEEDS, MOE_WEIGHT_SCALE, type MoeWorkload } from './moe_workloads.js';

/** Quantizes f32 [G, R, C] per (expert, column) into codes (as numbers) and scales [G, C]. */
function quantizeColumns(w: Float32Array, G: number, R: number, C: number, qmax: number): { codes: Int8Array; scales: Float32Array } {
  const codes = new Int8Array(w.length), scales = new Float32Array(G * C);
  for (let g = 0; g < G; g++) {
    const amax = new Float32Array(C);
    for (let r = 0; r < R; r++) {
      const o = (g * R + r) * C;
      for (let c = 0; c < C; c++) amax[c] = Math.max(amax[c], Math.abs(w[o + c]));
    }
    for (let c = 0; c < C; c++) scales[g * C + c] = Math.fround(amax[c] / qmax || 1);
    for (let r = 0; r < R; r++) {
      const o = (g * R + r) * C;
      for (let c = 0; c < C; c++) codes[o + c] = Math.max(-qmax, Math.min(qmax, Math.round(w[o + c] / scales[g * C + c])));
    }
  }
  return { codes, scales };
}

/** Exact weight-only (`strict`), accumulation_mode relaxed, or dynamic int8 activations (`dq`). */
export type LowpLayerMode = 'strict' | 'relaxed' | 'dq';
export const LOWP_LAYER_MODES: readonly LowpLayerMode[] = ['strict', 'relaxed', 'dq'];

export interface RunnableLayer {
  /** One execution and its wait. */
  run: () => Promise<void>;
  implInfo: string;
  /** Frees the layer (the last one freed also frees the shared weights and buffers). */
  free: () => void;
}

/** Layers with `bits`-bit weight-only weights on `eng`, one per case (workloads of the same E, K, I: decode-1 and
    decode-4; accumulation modes), all on one copy of the packed weights (quantizing MoE-B's takes a minute or more). */
export async function lowpLayers(eng: Engine, bits: 8 | 4, cases: readonly { w: MoeWorkload; mode: LowpLayerMode }[]): Promise<RunnableLayer[]> {
  const wdt = bits === 8 ? dt.s8 : dt.s4, qmax = bits === 8 ? 127 : 7;
  const strm = new Stream(eng);
  const anyMd = (dims: number[]): MemoryDesc => memory.desc(dims, wdt, tag.any);
  const pds = cases.map(({ w, mode }) => new moe.layer.PrimitiveDesc(eng, {
    tokens: w.T, hidden: w.K, intermediate: w.I, experts: w.E, topK: w.k, routing: { scoring: 'softmax', renormalize: true },
    glu: { alg: 'glu_swiglu', layout: 'interleaved' }, weights: { w13: anyMd([w.E, w.K, 2 * w.I]), w2: anyMd([w.E, w.I, w.K]) },
    weightScales: { w13: { mask: 5 }, w2: { mask: 5 } },
    ...(mode === 'dq' ? { dynamicQuantization: 's8' as const } : { accumulationMode: mode }),
  }));
  const pd = pds[0], w = cases[0].w;
  for (const p of pds)
    for (const name of ['w13', 'w2'])
      if (p.queryMd(name)!.toString() !== pd.queryMd(name)!.toString()) throw new Error(`lowpLayers: the cases pack ${name} differently`);
  const owned: Memory[] = [];
  const weights: Memory[] = [], scales: Memory[] = [];
  for (const [name, dims, seed] of [['w13', [w.E, w.K, 2 * w.I], MOE_SEEDS.w13], ['w2', [w.E, w.I, w.K], MOE_SEEDS.w2]] as const) {
    const f = new Float32Array(dims[0] * dims[1] * dims[2]);
    fillRandom(f, seed, MOE_WEIGHT_SCALE);
    const q = quantizeColumns(f, dims[0], dims[1], dims[2], qmax);
    const plain = Memory.create(memory.desc([...dims], wdt, tag.abc), eng);
    plain.write(q.codes);
    const packed = Memory.create(pd.queryMd(name)!, eng);
    const s = Memory.create(memory.desc([dims[0], dims[2]], dt.f32, tag.ab), eng);
    (s.values as Float32Array).set(q.scales);
    // tag.any with weight scales: the pd's layout stores them beside the panels (`+q`), the reorder writes them.
    const r: Record<number, Memory> = { [ARG.FROM]: plain, [ARG.TO]: packed };
    if (packed.desc.packed?.quant) r[ARG.ATTR_SCALES | ARG.WEIGHTS] = s;
    new reorder.Primitive(new reorder.PrimitiveDesc(eng, plain.desc, packed.desc)).execute(strm, r);
    await strm.wait();
    plain.free();
    weights.push(packed);
    scales.push(s);
    owned.push(packed, s);
  }
  const mem = (md: MemoryDesc, seed?: number, scale = 1): Memory => {
    const m = Memory.create(md, eng);
    if (seed !== undefined) fillRandom(m.values as Float32Array, seed, scale);
    owned.push(m);
    return m;
  };
  let live = pds.length;
  return pds.map((p) => {
    const args = {
      [ARG.SRC]: mem(p.queryMd('hidden')!, MOE_SEEDS.hidden), [ARG.MOE_ROUTER_LOGITS]: mem(p.queryMd('logits')!, MOE_SEEDS.logits, 4),
      [ARG.WEIGHTS]: weights[0], [ARG.WEIGHTS_1]: weights[1], [ARG.DST]: mem(p.queryMd('dst')!),
      ...(weights[0].desc.packed?.quant ? {} : { [ARG.ATTR_SCALES | ARG.WEIGHTS]: scales[0], [ARG.ATTR_SCALES | ARG.WEIGHTS_1]: scales[1] }),
    };
    const layer = new moe.layer.Primitive(p);
    return {
      run: async () => {
        layer.execute(strm, args);
        await strm.wait();
      },
      implInfo: p.implInfo,
      free: () => {
        layer.destroy();
        if (--live === 0) for (const m of owned) m.free();
      },
    };
  });
}
