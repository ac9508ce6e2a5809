/**
 * Benchmark peer for the whole MoE layer: onnxruntime-web's `com.microsoft` contrib ops `MoE` (f32
 * weights) and `QMoE` (8- or 4-bit weights), one node, one session, weights as initializers.
 *
 * What ORT-web 1.30 computes (verified numerically by bench/ort_moe_peer_check.ts against groupdnn):
 * softmax over all E router logits, top-k, weights renormalized over the k (normalize_routing_weights=1),
 * FC1 [E, 2I, K] (rows = output features) with fused SwiGLU, gate / up interleaved (swiglu_fusion=1,
 * silu(gate) * up), FC2 [E, K, I], weighted sum. The same layer in groupdnn: `routing: { renormalize:
 * true }`, `glu: { alg: 'glu_swiglu', layout: 'interleaved' }`, w13 [E, K, 2I] = FC1 transposed per expert.
 *
 * QMoE weights are symmetric per output row: 8-bit `q = RNE(w / s) + 128`, `s = amax / 127`; 4-bit
 * `q = RNE(w / s) + 8`, `s = amax / 7`, two per byte, low nibble first (uint8 storage, as the op takes).
 */
import * as ort from 'onnxruntime-web';
import { configureOrt, SESSION_OPTIONS } from './ort_peer.js';
import { buildMoeModel, toOrtLayout, type OrtMoeShape, type OrtMoeVariant } from './ort_moe_model.js';

// The model (layouts, quantization, ONNX bytes) is in ort_moe_model.ts, shared with the WebGPU peer.
export { buildMoeModel, quantizeRows, toOrtLayout, type OrtMoeShape, type OrtMoeVariant } from './ort_moe_model.js';

export interface OrtMoePeer {
  /** out [T, K] = MoE(hidden [T, K], logits [T, E]). */
  run(hidden: Float32Array, logits: Float32Array, out: Float32Array): Promise<void>;
  close(): Promise<void>;
}

/** A session running the layer; `threads` is fixed once per process (see ort_peer.ts). */
export async function createOrtMoePeer(s: OrtMoeShape, variant: OrtMoeVariant, w13: Float32Array, w2: Float32Array, threads: number): Promise<OrtMoePeer> {
  configureOrt(threads);
  const { fc1, fc2 } = toOrtLayout(s, w13, w2);
  const { model, weights } = buildMoeModel(s, variant, fc1, fc2);
  const session = await ort.InferenceSession.create(model, { ...SESSION_OPTIONS, externalData: [{ path: 'weights.bin', data: weights }] });
  return {
    async run(hidden, logits, out) {
      const r = await session.run({ X: new ort.Tensor('float32', hidden, [s.T, s.K]), R: new ort.Tensor('float32', logits, [s.T, s.E]) });
      out.set(r.Y.data as Float32Array);
      r.Y.dispose();
    },
    close: () => session.release(),
  };
}
