/**
 * Checks that groupdnn's MoE layer and onnxruntime-web's MoE op compute the same function on the same
 * weights, routing and inputs (what makes their timings comparable):
 *   npx tsx bench/ort_moe_peer_check.ts          # prints max |diff| / max |out| for f32, int8, int4
 */
import { createOrtMoePeer, type OrtMoeVariant } from './ort_moe_peer.js';
import { groupdnnMoeLayer, relMaxDiff } from './moe_layer_cpu.js';
import { fillRandom } from './timing.js';

const s = { T: 7, E: 4, k: 2, K: 64, I: 48 };
const w13 = new Float32Array(s.E * s.K * 2 * s.I), w2 = new Float32Array(s.E * s.I * s.K);
const hidden = new Float32Array(s.T * s.K), logits = new Float32Array(s.T * s.E);
fillRandom(w13, 1, 0.2);
fillRandom(w2, 2, 0.2);
fillRandom(hidden, 3);
fillRandom(logits, 4, 4);

const ours = await groupdnnMoeLayer(s, w13, w2, hidden, logits);
for (const variant of ['moe-f32', 'qmoe-int8', 'qmoe-int4'] as OrtMoeVariant[]) {
  const peer = await createOrtMoePeer(s, variant, w13, w2, 1);
  const y = new Float32Array(s.T * s.K);
  await peer.run(hidden, logits, y);
  await peer.close();
  console.log(`${variant}: max |ORT - groupdnn| / max |out| = ${relMaxDiff(y, ours).toExponential(2)}`);
}
