/**
 * The model both onnxruntime-web MoE peers run (wasm EP: ort_moe_peer.ts; WebGPU EP: ort_moe_gpu.ts): the
 * `com.microsoft` contrib op `MoE` (f32 weights) or `QMoE` (8- or 4-bit weights), one node, weights as
 * initializers in one external-data blob. No ORT import here (each peer brings its own ORT build).
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
import { f32le, fBytes, fInt, fStr, msg } from './onnx_proto.js';

export type OrtMoeVariant = 'moe-f32' | 'qmoe-int8' | 'qmoe-int4';

export interface OrtMoeShape {
  readonly T: number;
  readonly E: number;
  readonly k: number;
  readonly K: number;
  readonly I: number;
}

const FLOAT = 1, UINT8 = 2;

/**
 * Initializers go to one external-data blob (a protobuf model is limited to 2 GB; MoE-B's f32 weights
 * are 2.2 GB): the tensor records its offset and length in `weights.bin`, mounted at session creation.
 */
class External {
  readonly parts: Uint8Array[] = [];
  size = 0;
  tensor(name: string, dims: readonly number[], bytes: Uint8Array, dtype: number): Uint8Array {
    const entry = (k: string, v: string): Uint8Array => fBytes(13, msg(fStr(1, k), fStr(2, v)));
    const offset = this.size;
    this.parts.push(bytes);
    this.size += bytes.byteLength;
    return msg(...dims.map((d) => fInt(1, d)), fInt(2, dtype), fStr(8, name),
      entry('location', 'weights.bin'), entry('offset', String(offset)), entry('length', String(bytes.byteLength)), fInt(14, 1));
  }
  blob(): Uint8Array {
    const out = new Uint8Array(this.size);
    let o = 0;
    for (const p of this.parts) {
      out.set(p, o);
      o += p.byteLength;
    }
    return out;
  }
}

/** A number is a dim_value, a string a dim_param (symbolic: one session serves every token count). */
function valueInfo(name: string, dims: readonly (number | string)[]): Uint8Array {
  const shape = msg(...dims.map((d) => fBytes(1, typeof d === 'number' ? fInt(1, d) : fStr(2, d))));
  return msg(fStr(1, name), fBytes(2, msg(fBytes(1, msg(fInt(1, FLOAT), fBytes(2, shape))))));
}

const attrInt = (name: string, v: number): Uint8Array => msg(fStr(1, name), fInt(3, v), fInt(20, 2));
const attrStr = (name: string, v: string): Uint8Array => msg(fStr(1, name), fBytes(4, new TextEncoder().encode(v)), fInt(20, 3));

/** FC1 [E, 2I, K] (interleaved gate / up rows) from groupdnn's w13 [E, K, 2I]; FC2 [E, K, I] from w2 [E, I, K]. */
export function toOrtLayout(s: OrtMoeShape, w13: Float32Array, w2: Float32Array): { fc1: Float32Array; fc2: Float32Array } {
  const { E, K, I } = s;
  const fc1 = new Float32Array(E * 2 * I * K), fc2 = new Float32Array(E * K * I);
  for (let e = 0; e < E; e++) {
    for (let q = 0; q < K; q++) for (let c = 0; c < 2 * I; c++) fc1[(e * 2 * I + c) * K + q] = w13[(e * K + q) * 2 * I + c];
    for (let j = 0; j < I; j++) for (let n = 0; n < K; n++) fc2[(e * K + n) * I + j] = w2[(e * I + j) * K + n];
  }
  return { fc1, fc2 };
}

/** Symmetric per-row quantization of [rows, cols] to uint8 (8-bit: +128; 4-bit: +8, two per byte). */
export function quantizeRows(w: Float32Array, rows: number, cols: number, bits: 4 | 8): { q: Uint8Array; scales: Float32Array } {
  const qmax = bits === 8 ? 127 : 7, zero = bits === 8 ? 128 : 8;
  const scales = new Float32Array(rows);
  const q = new Uint8Array(bits === 8 ? rows * cols : (rows * cols) / 2);
  for (let r = 0; r < rows; r++) {
    let amax = 0;
    for (let c = 0; c < cols; c++) amax = Math.max(amax, Math.abs(w[r * cols + c]));
    const s = Math.fround(amax / qmax) || 1;
    scales[r] = s;
    for (let c = 0; c < cols; c++) {
      const v = Math.max(-qmax - 1, Math.min(qmax, Math.round(w[r * cols + c] / s))) + zero;
      if (bits === 8) q[r * cols + c] = v;
      else q[(r * cols + c) >> 1] |= (c & 1 ? v << 4 : v);
    }
  }
  return { q, scales };
}

/** w13 [E, K, 2I] and w2 [E, I, K] (groupdnn's layout) from FC1 [E, 2I, K] and FC2 [E, K, I]: toOrtLayout's inverse. */
export function fromOrtLayout(s: OrtMoeShape, fc1: Float32Array, fc2: Float32Array): { w13: Float32Array; w2: Float32Array } {
  const { E, K, I } = s;
  const w13 = new Float32Array(E * K * 2 * I), w2 = new Float32Array(E * I * K);
  for (let e = 0; e < E; e++) {
    for (let q = 0; q < K; q++) for (let c = 0; c < 2 * I; c++) w13[(e * K + q) * 2 * I + c] = fc1[(e * 2 * I + c) * K + q];
    for (let j = 0; j < I; j++) for (let n = 0; n < K; n++) w2[(e * I + j) * K + n] = fc2[(e * K + n) * I + j];
  }
  return { w13, w2 };
}

/** The f32 weights QMoE actually multiplies by: (q - zero) * s per row (quantizeRows' inverse, exact in f32). */
export function dequantizeRows(w: Float32Array, rows: number, cols: number, bits: 4 | 8): Float32Array {
  const { q, scales } = quantizeRows(w, rows, cols, bits);
  const zero = bits === 8 ? 128 : 8;
  const out = new Float32Array(rows * cols);
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < cols; c++) {
      const i = r * cols + c;
      const v = bits === 8 ? q[i] : (q[i >> 1] >> (c & 1 ? 4 : 0)) & 15;
      out[i] = Math.fround((v - zero) * scales[r]);
    }
  }
  return out;
}

/**
 * The one-node model bytes and its external weights blob. `tokens` is the first dim of X, R and Y: s.T, or
 * a name (a symbolic dim) for one session that runs any token count.
 */
export function buildMoeModel(s: OrtMoeShape, variant: OrtMoeVariant, fc1: Float32Array, fc2: Float32Array, tokens: number | string = s.T): { model: Uint8Array; weights: Uint8Array } {
  const { E, K, I, k } = s;
  const ext = new External();
  const tensor = ext.tensor.bind(ext);
  const inits: Uint8Array[] = [];
  let inputs: string[];
  const attrs = [attrInt('k', k), attrStr('activation_type', 'swiglu'), attrInt('normalize_routing_weights', 1), attrInt('swiglu_fusion', 1)];
  if (variant === 'moe-f32') {
    inits.push(tensor('W1', [E, 2 * I, K], f32le(fc1), FLOAT), tensor('W2', [E, K, I], f32le(fc2), FLOAT));
    inputs = ['X', 'R', 'W1', '', 'W2'];
  } else {
    const bits = variant === 'qmoe-int8' ? 8 : 4, pack = 8 / bits;
    const q1 = quantizeRows(fc1, E * 2 * I, K, bits), q2 = quantizeRows(fc2, E * K, I, bits);
    inits.push(tensor('W1', [E, 2 * I, K / pack], q1.q, UINT8), tensor('S1', [E, 2 * I], f32le(q1.scales), FLOAT),
      tensor('W2', [E, K, I / pack], q2.q, UINT8), tensor('S2', [E, K], f32le(q2.scales), FLOAT));
    attrs.push(attrInt('expert_weight_bits', bits));
    inputs = ['X', 'R', 'W1', 'S1', '', 'W2', 'S2'];
  }
  const node = msg(...inputs.map((n) => fStr(1, n)), fStr(2, 'Y'), fStr(3, 'moe'), fStr(4, variant === 'moe-f32' ? 'MoE' : 'QMoE'),
    ...attrs.map((a) => fBytes(5, a)), fStr(7, 'com.microsoft'));
  const graph = msg(fBytes(1, node), fStr(2, 'moe_layer'), ...inits.map((t) => fBytes(5, t)),
    fBytes(11, valueInfo('X', [tokens, K])), fBytes(11, valueInfo('R', [tokens, E])), fBytes(12, valueInfo('Y', [tokens, K])));
  const model = msg(fInt(1, 8), fStr(2, 'groupdnn-ort-moe-peer'), fBytes(7, graph), fBytes(8, msg(fStr(1, ''), fInt(2, 17))), fBytes(8, msg(fStr(1, 'com.microsoft'), fInt(2, 1))));
  return { model, weights: ext.blob() };
}

