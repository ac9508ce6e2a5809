/**
 * The library's dynamic quantization helpers (`quant.*`, RFC 0002 section 5), used wherever one
 * covers a recipe's operand; the tool's own quantizer runs too and the two are compared bit for bit
 * (element codes, scale bytes, zero points, NVFP4 globals).
 *
 * - src per row: `quant.perTokenInt8` (s8, symmetric or with s32 zero point), `quant.perTokenFp8`;
 * - src 1xgK blocks, MX: `quant.perBlockMx(src, [M, K], { block: gK, elem })` (blocks run along K, row-major);
 * - src NVFP4: `quant.perBlockNvfp4(src, 16)` (one f32 global for the whole tensor);
 * - weights MX / NVFP4: blocks run along K, i.e. down the columns of `[E, K, N]`: each expert is
 *   transposed to `[N, K]`, quantized, and the codes and scales transposed back (NVFP4: one global
 *   per expert).
 * Per-tensor, per-column and K-block integer / FP8-with-f32-scale weights have no library helper.
 */
import { quant } from '../../src/index.js';
import type { Workload } from './data.js';
import { imageOfCodes, type AttrTensor, type QTensor, type QuantSpec, type SrcGran, type WeiGran } from './quantize.js';

export interface LibResult {
  readonly t: QTensor;
  /** Agreement with the tool's quantizer, as a short sentence. */
  readonly agree: string;
  readonly identical: boolean;
}

export interface LibQuant {
  src(w: Workload, gran: SrcGran, spec: QuantSpec, own: QTensor): LibResult | undefined;
  wei(w: Workload, gran: WeiGran, spec: QuantSpec, own: QTensor): LibResult | undefined;
  readonly notes: string[];
}

type LowFloat = 'f8_e4m3' | 'f8_e5m2' | 'f4_e2m1';
const isLowFloat = (t: string): t is LowFloat => t === 'f8_e4m3' || t === 'f8_e5m2' || t === 'f4_e2m1';

function f32Bytes(a: Float32Array): Uint8Array {
  return new Uint8Array(Float32Array.from(a).buffer);
}

function withBytes(t: AttrTensor, bytes: Uint8Array, values: ArrayLike<number>): AttrTensor {
  return { ...t, bytes, values: Float64Array.from(values) };
}

function sameBytes(a: Uint8Array | undefined, b: Uint8Array | undefined): number {
  if (!a || !b) return a === b ? 0 : Infinity;
  if (a.length !== b.length) return Infinity;
  let d = 0;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) d++;
  return d;
}

/** Compares a library-quantized operand with the tool's. */
function compare(name: string, lib: QTensor, own: QTensor): { agree: string; identical: boolean } {
  let codeDiff = 0;
  for (let i = 0; i < own.codes.length; i++) if ((lib.codes[i] & 0xff) !== (own.codes[i] & 0xff)) codeDiff++;
  const scaleDiff = sameBytes(lib.scales?.bytes, own.scales?.bytes);
  const zpDiff = sameBytes(lib.zeroPoints?.bytes, own.zeroPoints?.bytes);
  const gDiff = own.global || lib.global ? sameBytes(lib.global && f32Bytes(lib.global), own.global && f32Bytes(own.global)) : 0;
  const identical = codeDiff === 0 && scaleDiff === 0 && zpDiff === 0 && gDiff === 0;
  if (identical) return { agree: `${name} = tool, bit for bit`, identical };
  const parts = [
    codeDiff ? `${codeDiff}/${own.codes.length} codes` : '',
    scaleDiff ? `${scaleDiff} scale bytes` : '',
    zpDiff ? `${zpDiff} zero-point bytes` : '',
    gDiff ? 'globals' : '',
  ].filter(Boolean);
  return { agree: `${name} differs from the tool: ${parts.join(', ')}`, identical };
}

/** [E, K, N] expert e -> [N, K]. */
function transposeExpert(x: Float32Array, e: number, K: number, N: number): Float32Array {
  const out = new Float32Array(K * N);
  const base = e * K * N;
  for (let k = 0; k < K; k++) for (let n = 0; n < N; n++) out[n * K + k] = x[base + k * N + n];
  return out;
}

export function libraryQuantizers(): LibQuant {
  const used = new Set<string>();
  const mismatches: string[] = [];
  const finish = (name: string, t: QTensor, own: QTensor): LibResult => {
    const c = compare(name, t, own);
    used.add(name);
    if (!c.identical) mismatches.push(c.agree);
    return { t, ...c };
  };
  return {
    get notes(): string[] {
      const n = [`Library quantizers used: ${used.size ? [...used].sort().join(', ') : 'none'}; every other operand is quantized by the tool (same RNE rules, the library's codecs).`];
      if (used.size) n.push(mismatches.length ? `Library vs tool quantizer mismatches: ${mismatches.join('; ')}.` : 'Every library-quantized operand is bit-identical to the tool\'s own quantization of it (codes, scales, zero points, globals).');
      return n;
    },

    src(w, gran, spec, own) {
      const { K } = w.opts;
      const M = w.totalM;
      if (!own.scales) return undefined;
      if (gran.kind === 'row' && spec.dt === 's8' && spec.scaleDt === 'f32' && (spec.method === 'absmax' || (spec.method === 'asym' && (spec.zpDt ?? 's32') === 's32'))) {
        const r = quant.perTokenInt8(w.src, [M, K], { symmetric: spec.method === 'absmax' });
        const codes = Int32Array.from(r.values);
        const deq = new Float64Array(M * K);
        for (let m = 0; m < M; m++) {
          const zp = r.zeroPoints ? r.zeroPoints[m] : 0;
          for (let k = 0; k < K; k++) deq[m * K + k] = (codes[m * K + k] - zp) * r.scales[m];
        }
        const t: QTensor = {
          dt: 's8', bytes: imageOfCodes('s8', codes), codes, deq,
          scales: withBytes(own.scales, f32Bytes(r.scales), r.scales),
          zeroPoints: r.zeroPoints && own.zeroPoints ? withBytes(own.zeroPoints, new Uint8Array(Int32Array.from(r.zeroPoints).buffer), r.zeroPoints) : undefined,
          by: 'quant.perTokenInt8',
        };
        return finish(`quant.perTokenInt8(${spec.method === 'absmax' ? 'symmetric' : 'asymmetric'})`, t, own);
      }
      if (gran.kind === 'row' && spec.method === 'absmax' && spec.scaleDt === 'f32' && (spec.dt === 'f8_e4m3' || spec.dt === 'f8_e5m2')) {
        const r = quant.perTokenFp8(w.src, [M, K], spec.dt);
        const codes = Int32Array.from(r.codes);
        const deq = Float64Array.from(r.values, (v, i) => v * r.scales[Math.floor(i / K)]);
        const t: QTensor = { dt: spec.dt, bytes: imageOfCodes(spec.dt, codes), codes, deq, scales: withBytes(own.scales, f32Bytes(r.scales), r.scales), by: 'quant.perTokenFp8' };
        return finish(`quant.perTokenFp8(${spec.dt})`, t, own);
      }
      if (gran.kind === 'rowblock' && spec.method === 'mx' && isLowFloat(spec.dt)) {
        const r = quant.perBlockMx(w.src, [M, K], { block: gran.gK, elem: spec.dt });
        const codes = Int32Array.from(r.codes);
        const deq = Float64Array.from(r.values, (v, i) => v * r.scales[Math.floor(i / gran.gK)]);
        const t: QTensor = { dt: spec.dt, bytes: imageOfCodes(spec.dt, codes), codes, deq, scales: withBytes(own.scales, Uint8Array.from(r.scaleCodes), r.scales), by: 'quant.perBlockMx' };
        return finish(`quant.perBlockMx(${gran.gK}, ${spec.dt})`, t, own);
      }
      if (gran.kind === 'rowblock' && spec.method === 'nv' && spec.dt === 'f4_e2m1') {
        const r = quant.perBlockNvfp4(w.src, gran.gK);
        const codes = Int32Array.from(r.codes);
        const deq = Float64Array.from(r.values, (v, i) => v * r.blockScales[Math.floor(i / gran.gK)] * r.globalScale);
        const t: QTensor = {
          dt: 'f4_e2m1', bytes: imageOfCodes('f4_e2m1', codes), codes, deq,
          scales: withBytes(own.scales, Uint8Array.from(r.blockScaleCodes), r.blockScales), global: Float32Array.of(r.globalScale), by: 'quant.perBlockNvfp4',
        };
        return finish(`quant.perBlockNvfp4(${gran.gK})`, t, own);
      }
      return undefined;
    },

    wei(w, gran, spec, own) {
      const { E, K, N } = w.opts;
      if (!own.scales || gran.kind !== 'kblock' || !isLowFloat(spec.dt) || (spec.method !== 'mx' && spec.method !== 'nv')) return undefined;
      if (spec.method === 'nv' && spec.dt !== 'f4_e2m1') return undefined;
      const gK = gran.gK, KB = K / gK;
      const codes = new Int32Array(E * K * N);
      const deq = new Float64Array(E * K * N);
      const scaleBytes = new Uint8Array(E * KB * N);
      const scaleVals = new Float64Array(E * KB * N);
      const global = spec.method === 'nv' ? new Float32Array(E) : undefined;
      for (let e = 0; e < E; e++) {
        const xt = transposeExpert(w.wei, e, K, N);
        let values: Float32Array, ecodes: Uint8Array, scales: Float32Array, scodes: Uint8Array, g = 1;
        if (spec.method === 'mx') {
          const r = quant.perBlockMx(xt, [N, K], { block: gK, elem: spec.dt });
          ({ values, codes: ecodes, scales, scaleCodes: scodes } = r);
        } else {
          const r = quant.perBlockNvfp4(xt, gK);
          ({ values, codes: ecodes, blockScales: scales, blockScaleCodes: scodes } = r);
          g = r.globalScale;
          global![e] = g;
        }
        for (let n = 0; n < N; n++) {
          for (let k = 0; k < K; k++) {
            const i = (e * K + k) * N + n, j = n * K + k, sj = n * KB + Math.floor(k / gK);
            codes[i] = ecodes[j];
            deq[i] = values[j] * scales[sj] * g;
          }
          for (let kb = 0; kb < KB; kb++) {
            const si = (e * KB + kb) * N + n;
            scaleBytes[si] = scodes[n * KB + kb];
            scaleVals[si] = scales[n * KB + kb];
          }
        }
      }
      const name = spec.method === 'mx' ? 'quant.perBlockMx' : 'quant.perBlockNvfp4';
      const t: QTensor = { dt: spec.dt, bytes: imageOfCodes(spec.dt, codes), codes, deq, scales: withBytes(own.scales, scaleBytes, scaleVals), global, by: `${name} (per expert, transposed)` };
      return finish(`${name}(${gK}${spec.method === 'mx' ? `, ${spec.dt}` : ''}) on weights`, t, own);
    },
  };
}
