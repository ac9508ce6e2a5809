/**
 * groupdnn's MoE layer on the cpu engine in the configuration ORT's MoE / QMoE compute (softmax over all
 * logits, top-k renormalized, interleaved SwiGLU): the side both ORT peer checks compare against.
 */
import { ARG, Engine, Memory, Stream, dt, memory, moe, tag } from '../src/index.js';
import type { OrtMoeShape } from './ort_moe_model.js';

/** out [T, K] for hidden [T, K], logits [T, E], w13 [E, K, 2I], w2 [E, I, K] (f32, one thread). */
export async function groupdnnMoeLayer(s: OrtMoeShape, w13: Float32Array, w2: Float32Array, hidden: Float32Array, logits: Float32Array): Promise<Float32Array> {
  const eng = await Engine.create({ threads: 1 });
  try {
    const strm = new Stream(eng);
    const plain = (dims: number[], v: Float32Array): Memory => {
      const m = Memory.create(memory.desc(dims, dt.f32, dims.length === 2 ? tag.ab : tag.abc), eng);
      (m.values as Float32Array).set(v);
      return m;
    };
    const pd = new moe.layer.PrimitiveDesc(eng, {
      tokens: s.T, hidden: s.K, intermediate: s.I, experts: s.E, topK: s.k, routing: { renormalize: true }, glu: { alg: 'glu_swiglu', layout: 'interleaved' },
      weights: { w13: memory.desc([s.E, s.K, 2 * s.I], dt.f32, tag.abc), w2: memory.desc([s.E, s.I, s.K], dt.f32, tag.abc) },
    });
    const out = Memory.create(pd.queryMd('dst')!, eng);
    new moe.layer.Primitive(pd).execute(strm, {
      [ARG.SRC]: plain([s.T, s.K], hidden), [ARG.MOE_ROUTER_LOGITS]: plain([s.T, s.E], logits), [ARG.WEIGHTS]: plain([s.E, s.K, 2 * s.I], w13), [ARG.WEIGHTS_1]: plain([s.E, s.I, s.K], w2), [ARG.DST]: out,
    });
    await strm.wait();
    return Float32Array.from(out.values as Float32Array);
  } finally {
    eng.release();
  }
}

/** max |a - b| / max |b|. */
export function relMaxDiff(a: Float32Array, b: Float32Array): number {
  let d = 0, mag = 0;
  for (let i = 0; i < b.length; i++) {
    d = Math.max(d, Math.abs(a[i] - b[i]));
    mag = Math.max(mag, Math.abs(b[i]));
  }
  return d / mag;
}
