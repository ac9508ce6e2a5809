/**
 * Checks that groupdnn's MoE layer and onnxruntime-web's MoE op compute the same function on the same
 * weights, routing and inputs (what makes their timings comparable):
 *   npx tsx bench/ort_moe_peer_check.ts          # prints max |diff| / max |out| for f32, int8, int4
 */
import { ARG, Engine, Memory, Stream, dt, memory, moe, tag } from '../src/index.js';
import { createOrtMoePeer, type OrtMoeVariant } from './ort_moe_peer.js';
import { fillRandom } from './timing.js';

const s = { T: 7, E: 4, k: 2, K: 64, I: 48 };
const w13 = new Float32Array(s.E * s.K * 2 * s.I), w2 = new Float32Array(s.E * s.I * s.K);
const hidden = new Float32Array(s.T * s.K), logits = new Float32Array(s.T * s.E);
fillRandom(w13, 1, 0.2);
fillRandom(w2, 2, 0.2);
fillRandom(hidden, 3);
fillRandom(logits, 4, 4);

const eng = await Engine.create({ threads: 1 });
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
const ours = out.values as Float32Array;
let mag = 0;
for (const v of ours) mag = Math.max(mag, Math.abs(v));
for (const variant of ['moe-f32', 'qmoe-int8', 'qmoe-int4'] as OrtMoeVariant[]) {
  const peer = await createOrtMoePeer(s, variant, w13, w2, 1);
  const y = new Float32Array(s.T * s.K);
  await peer.run(hidden, logits, y);
  await peer.close();
  let d = 0;
  for (let i = 0; i < y.length; i++) d = Math.max(d, Math.abs(y[i] - ours[i]));
  console.log(`${variant}: max |ORT - groupdnn| / max |out| = ${(d / mag).toExponential(2)}`);
}
eng.release();
