import { dtBits, dtBytes, encodeArray, fromStored, type DataType } from '../common/data_type.js';
import type { Dims } from '../common/dims.js';
import { MemoryDesc } from './desc.js';
import { DnnlError } from '../common/status.js';
import { tagToStrides } from './format_tag.js';

/** Panel width of the packed weights layout: the microkernel's NR. */
export const PANEL = 8;
/**
 * `f32:p8`: weights [G, K, N] (or [K, N]) stored per expert as ceil(N/8) panels of K x 8 f32,
 * N zero-padded to a multiple of 8: every microkernel call streams one contiguous panel.
 */
export const PACKED_P8 = 'f32:p8';

export function packedGeometry(dims: Dims): { G: number; K: number; N: number; panels: number; expertFloats: number } {
  const nd = packedRank(dims);
  const G = nd === 3 ? dims[0] : 1;
  const K = dims[nd - 2], N = dims[nd - 1];
  const panels = Math.ceil(N / PANEL);
  return { G, K, N, panels, expertFloats: panels * K * PANEL };
}

/** The packed layouts hold [K, N] or [G, K, N]: a 4D+ tensor would be sized as one expert (the pds resolve it to plain). */
function packedRank(dims: Dims): number {
  if (dims.length < 2 || dims.length > 3) throw new DnnlError('unimplemented', `packed weights layouts hold [K, N] or [G, K, N] weights, got ${dims.length} dims`);
  return dims.length;
}

/** The packed descriptor chosen for `tag.any` weights (storage is f32 whatever the logical type). */
export function packedWeightsDesc(dims: Dims): MemoryDesc {
  const { G, expertFloats } = packedGeometry(dims);
  return new MemoryDesc({ dims, dataType: 'f32', format: 'packed', packed: { name: PACKED_P8, byteSize: dtBytes('f32', G * expertFloats) } });
}

/** Plain TypeScript packing (used when the engine has no kernels). */
export function packWeightsTs(src: ArrayLike<number>, dt: DataType, dims: Dims, strides: Dims, out: Float32Array): void {
  const { G, K, N, panels, expertFloats } = packedGeometry(dims);
  const nd = dims.length;
  const sg = nd === 3 ? strides[0] : 0, sk = strides[nd - 2], sn = strides[nd - 1];
  for (let g = 0; g < G; g++)
    for (let p = 0; p < panels; p++)
      for (let k = 0; k < K; k++) {
        const o = g * expertFloats + (p * K + k) * PANEL;
        for (let q = 0; q < PANEL; q++) {
          const n = p * PANEL + q;
          out[o + q] = n < N ? fromStored(dt, src[g * sg + k * sk + n * sn]) : 0;
        }
      }
}

/**
 * `f32:p8t`: weights [G, K, N] stored as the `f32:p8` panels of their transpose [G, N, K] (per expert
 * ceil(K/8) panels of N x 8). The backward-data GEMM `diff_src = diff_dst x W^T` then streams
 * contiguous panels exactly as the forward does, instead of gathering a strided transposed read per tile.
 */
export const PACKED_P8T = 'f32:p8t';

/** Geometry of `f32:p8t` weights of logical dims [G, K, N]: the `f32:p8` geometry of [G, N, K]. */
export function packedTransposedGeometry(dims: Dims): ReturnType<typeof packedGeometry> {
  const nd = dims.length;
  return packedGeometry([...dims.slice(0, nd - 2), dims[nd - 1], dims[nd - 2]]);
}

export function packedTransposedWeightsDesc(dims: Dims): MemoryDesc {
  const { G, expertFloats } = packedTransposedGeometry(dims);
  return new MemoryDesc({ dims, dataType: 'f32', format: 'packed', packed: { name: PACKED_P8T, byteSize: dtBytes('f32', G * expertFloats) } });
}

/** Plain TypeScript `f32:p8t` packing: `f32:p8` of the transposed view (swap the last two dims and strides). */
export function packTransposedWeightsTs(src: ArrayLike<number>, dt: DataType, dims: Dims, strides: Dims, out: Float32Array): void {
  const nd = dims.length;
  const swap = (d: Dims): number[] => [...d.slice(0, nd - 2), d[nd - 1], d[nd - 2]];
  packWeightsTs(src, dt, swap(dims), swap(strides), out);
}

/**
 * Packed low-precision weights (issue 12), read by the f32 x low-precision microkernels, which decode
 * the codes in registers (wasm/src/gemm-lowp.c), and for s8 / u8 / s4 / u4 by the integer kernel,
 * which widens them to int16 in registers (wasm/src/s16-gemm-3x8-wasmsimd.c):
 * - `x8:p8` (s8, u8, f8_e4m3, f8_e5m2): per expert ceil(N/8) panels of Kp x 8 codes, k-major (the 8
 *   codes of k at panel byte 8k);
 * - `x4:p8k2` (s4, u4, f4_e2m1): per expert ceil(N/8) panels of Kp/2 k-pairs x 8 bytes, byte q of pair
 *   t = code(2t, q) | code(2t + 1, q) << 4;
 * Kp = K rounded up to even, N and K padded with code 0. The stored codes, unconverted. The descriptor
 * keeps the logical data type.
 *
 * With a `quant` ({@link PanelQuant}: `x8:p8+q` / `x4:p8k2+q`) the weights' scales and / or zero points
 * are stored beside the panel they belong to. Each panel is then, in bytes:
 *   [codes as above, zero padded to a multiple of 16]
 *   [scales: for each K block (of the attribute's K group; one block when the mask has no K) the
 *    panel's 8 values in their stored data type; padded to 16]
 *   [zero points: likewise]
 * Values that do not vary along N (per tensor, per expert, 2-D blocks) are repeated per column; padded
 * columns hold scale 1 and zero point 0. Without `quant`, scales and zero points stay execute-time
 * arguments (as for plain weights).
 */
export const PACKED_X8 = 'x8:p8';
export const PACKED_X4 = 'x4:p8k2';
export const X8_TYPES: readonly DataType[] = ['s8', 'u8', 'f8_e4m3', 'f8_e5m2'];
export const X4_TYPES: readonly DataType[] = ['s4', 'u4', 'f4_e2m1'];

/**
 * Scales or zero points of the weights as the attribute set them (`attr.setScales(ARG.WEIGHTS, mask,
 * groups, dt)`), over the weights' logical dims: what the `+q` layouts store and what `reorder` takes
 * at execution (`ARG.ATTR_SCALES | ARG.WEIGHTS` / `ARG.ATTR_ZERO_POINTS | ARG.WEIGHTS`).
 */
export interface PanelQuantSpec {
  readonly dataType: DataType;
  readonly mask: number;
  /** One entry per weights dim (1 = no grouping). */
  readonly groups: readonly number[];
}

/** What a `+q` layout embeds. */
export interface PanelQuant {
  readonly scales?: PanelQuantSpec;
  readonly zeroPoints?: PanelQuantSpec;
}

/** Canonical text of a quant (descriptor equality and rendering): `s:f32/m7/g1x32x1,z:u8/m5/g1x1x1`. */
export function panelQuantKey(q: PanelQuant | undefined): string {
  if (!q) return '';
  const one = (k: string, s: PanelQuantSpec | undefined): string[] => (s ? [`${k}:${s.dataType}/m${s.mask}/g${s.groups.join('x')}`] : []);
  return [...one('s', q.scales), ...one('z', q.zeroPoints)].join(',');
}

/** K block of embedded values over weights of `nd` dims: the K group, or 0 when they do not vary along K. */
export function panelQuantBlockK(s: PanelQuantSpec, nd: number): number {
  return (s.mask >> (nd - 2)) & 1 ? s.groups[nd - 2] : 0;
}

const pad16 = (x: number): number => Math.ceil(x / 16) * 16;

export function packedLowpGeometry(dims: Dims, dataType: DataType, quant?: PanelQuant): {
  name: string; G: number; K: number; Kp: number; N: number; panels: number; codeBytes: number;
  /** Byte offsets in a panel of the embedded scales / zero points (-1: none), panel stride, expert stride. */
  scaleOff: number; zpOff: number; panelBytes: number; expertBytes: number;
} {
  const nd = packedRank(dims);
  const G = nd === 3 ? dims[0] : 1;
  const K = dims[nd - 2], N = dims[nd - 1];
  const Kp = K + (K & 1);
  const panels = Math.ceil(N / PANEL);
  const four = X4_TYPES.includes(dataType);
  const codeBytes = Kp * (four ? PANEL / 2 : PANEL);
  const section = (s: PanelQuantSpec | undefined): number => {
    if (!s) return 0;
    const bk = panelQuantBlockK(s, nd);
    return pad16(((bk ? Math.ceil(K / bk) : 1) * PANEL * dtBits(s.dataType)) / 8);
  };
  if (!quant || (!quant.scales && !quant.zeroPoints)) {
    return { name: four ? PACKED_X4 : PACKED_X8, G, K, Kp, N, panels, codeBytes, scaleOff: -1, zpOff: -1, panelBytes: codeBytes, expertBytes: panels * codeBytes };
  }
  const scaleOff = pad16(codeBytes), zpOff = scaleOff + section(quant.scales);
  const panelBytes = zpOff + section(quant.zeroPoints);
  return {
    name: four ? PACKED_X4 : PACKED_X8, G, K, Kp, N, panels, codeBytes,
    scaleOff: quant.scales ? scaleOff : -1, zpOff: quant.zeroPoints ? zpOff : -1, panelBytes, expertBytes: panels * panelBytes,
  };
}

/** The packed descriptor for `tag.any` weights of an 8-bit or 4-bit type (f32 x low-precision or integer path; `quant`: the f32 kernels' scales / zero points stored beside the panels). */
export function packedLowpWeightsDesc(dims: Dims, dataType: DataType, quant?: PanelQuant): MemoryDesc {
  const { name, G, expertBytes } = packedLowpGeometry(dims, dataType, quant);
  const q = quant && (quant.scales || quant.zeroPoints) ? { quant } : {};
  return new MemoryDesc({ dims, dataType, format: 'packed', packed: { name, byteSize: G * expertBytes, ...q } });
}

/**
 * The values memory a spec's scales / zero points come in (the matmul pd's `scales:weights` /
 * `zero_points:weights` descriptor: the masked dims divided by their groups, row-major; `[1]` when the
 * mask is 0) and the element of it for a weights coordinate.
 */
export function panelQuantValues(dims: Dims, s: PanelQuantSpec): { md: MemoryDesc; index: (g: number, k: number, n: number) => number } {
  const nd = dims.length;
  const bit = (i: number): boolean => ((s.mask >> i) & 1) === 1;
  const groups = s.groups.length === nd ? s.groups : new Array<number>(nd).fill(1);
  const qdims: number[] = [];
  for (let i = 0; i < nd; i++) if (bit(i)) qdims.push(dims[i] / groups[i]);
  if (qdims.length === 0) qdims.push(1);
  const strides = tagToStrides('abcdefghijkl'.slice(0, qdims.length), qdims, 'scales');
  const md = new MemoryDesc({ dims: qdims, dataType: s.dataType, format: 'blocked', strides });
  const st: number[] = [];
  let j = 0;
  for (let i = 0; i < nd; i++) st.push(bit(i) ? strides[j++] : 0);
  const kd = nd - 2, nn = nd - 1;
  const index = (g: number, k: number, n: number): number =>
    (nd === 3 ? st[0] * Math.floor(g / groups[0]) : 0) + st[kd] * Math.floor(k / groups[kd]) + st[nn] * Math.floor(n / groups[nn]);
  return { md, index };
}

/** Raw element i (its stored bits) of a buffer of `bits` per element (4: nibble i of byte i / 2). */
function copyElement(src: Uint8Array, i: number, dst: Uint8Array, j: number, bits: number): void {
  if (bits === 4) {
    const c = (src[i >>> 1] >>> ((i & 1) << 2)) & 0xf, sh = (j & 1) << 2;
    dst[j >>> 1] = (dst[j >>> 1] & ~(0xf << sh)) | (c << sh);
    return;
  }
  const b = bits >>> 3;
  for (let x = 0; x < b; x++) dst[j * b + x] = src[i * b + x];
}

/**
 * Writes the embedded scales / zero points of `+q` packed weights (`out`: the whole packed buffer; the
 * codes are written separately) from the values memories' bytes, copying stored bits (no conversion).
 */
export function packPanelQuantTs(dims: Dims, dataType: DataType, quant: PanelQuant, values: { scales?: Uint8Array; zeroPoints?: Uint8Array }, out: Uint8Array): void {
  const geo = packedLowpGeometry(dims, dataType, quant);
  const nd = dims.length;
  for (const [spec, off, vals, pad] of [[quant.scales, geo.scaleOff, values.scales, 1], [quant.zeroPoints, geo.zpOff, values.zeroPoints, 0]] as const) {
    if (!spec || !vals) continue;
    const bits = dtBits(spec.dataType), bk = panelQuantBlockK(spec, nd);
    const nkb = bk ? Math.ceil(geo.K / bk) : 1;
    const padCode = encodeArray(spec.dataType, pad === 1 ? [1, 1] : [0, 0]);
    const { index } = panelQuantValues(dims, spec);
    const section = ((nkb * PANEL * bits) / 8);
    // whole-byte values of one column each (per-column spec): a full panel's 8 are one contiguous run
    const runs = bits >= 8 && geo.N > 1 && index(0, 0, 1) - index(0, 0, 0) === 1 && (spec.groups[nd - 1] ?? 1) === 1;
    const vb = bits >>> 3;
    for (let g = 0; g < geo.G; g++)
      for (let p = 0; p < geo.panels; p++) {
        const base = g * geo.expertBytes + p * geo.panelBytes + off;
        const sec = out.subarray(base, base + pad16(section));
        sec.fill(0);
        for (let b = 0; b < nkb; b++) {
          if (runs && (p + 1) * PANEL <= geo.N) {
            const i0 = index(g, b * (bk || 1), p * PANEL) * vb;
            sec.set(vals.subarray(i0, i0 + PANEL * vb), b * PANEL * vb);
            continue;
          }
          for (let q = 0; q < PANEL; q++) {
            const n = p * PANEL + q;
            if (n < geo.N) copyElement(vals, index(g, b * (bk || 1), n), sec, b * PANEL + q, bits);
            else copyElement(padCode, 0, sec, b * PANEL + q, bits);
          }
        }
      }
  }
}

/** Plain TypeScript x8 / x4 packing (engines without kernels). `code(i)`: the stored code of source element i. */
export function packWeightsLowpTs(code: (i: number) => number, dataType: DataType, dims: Dims, strides: Dims, out: Uint8Array, quant?: PanelQuant): void {
  const { G, K, Kp, N, panels, panelBytes, expertBytes } = packedLowpGeometry(dims, dataType, quant);
  const four = X4_TYPES.includes(dataType);
  const nd = dims.length;
  const sg = nd === 3 ? strides[0] : 0, sk = strides[nd - 2], sn = strides[nd - 1];
  for (let g = 0; g < G; g++)
    for (let p = 0; p < panels; p++)
      for (let k = 0; k < Kp; k++)
        for (let q = 0; q < PANEL; q++) {
          const n = p * PANEL + q;
          const c = n < N && k < K ? code(g * sg + k * sk + n * sn) & (four ? 0xf : 0xff) : 0;
          if (!four) out[g * expertBytes + p * panelBytes + k * PANEL + q] = c;
          else out[g * expertBytes + p * panelBytes + (k >> 1) * PANEL + q] |= c << ((k & 1) * 4);
        }
}

/**
 * `x16:p8` (bf16, f16): weights [G, K, N] (or [K, N]) stored per expert as ceil(N/8) panels of K x 8
 * 16-bit codes, k-major (the 8 codes of k at panel byte 16k), N padded with code 0 (+0.0); K is not
 * padded (the kernels take a lone last k). The stored codes, unconverted: a decode step streams 2 bytes
 * per weight where `f32:p8` streams 4, and the kernels convert them in registers, exactly
 * (wasm/src/f32-gemm-2x8wx16-wasmsimd.c), so the results are bitwise those of the same weights plain.
 * The descriptor keeps the logical data type. No embedded scales / zero points: float weights with
 * weights scales or zero points resolve to `f32:p8`.
 */
export const PACKED_X16 = 'x16:p8';
export const X16_TYPES: readonly DataType[] = ['bf16', 'f16'];

export function packedX16Geometry(dims: Dims): { G: number; K: number; N: number; panels: number; panelBytes: number; expertBytes: number } {
  const { G, K, N, panels } = packedGeometry(dims);
  const panelBytes = K * PANEL * 2;
  return { G, K, N, panels, panelBytes, expertBytes: panels * panelBytes };
}

/** The packed descriptor for `tag.any` bf16 / f16 weights on the cpu engine's kernels. */
export function packedX16WeightsDesc(dims: Dims, dataType: DataType): MemoryDesc {
  if (!X16_TYPES.includes(dataType)) throw new DnnlError('invalid_arguments', `${PACKED_X16} holds ${X16_TYPES.join(' or ')} weights, got ${dataType}`);
  const { G, expertBytes } = packedX16Geometry(dims);
  return new MemoryDesc({ dims, dataType, format: 'packed', packed: { name: PACKED_X16, byteSize: G * expertBytes } });
}

/** Plain TypeScript x16 packing (engines without kernels): `src` the stored 16-bit codes, element strides `strides`. */
export function packWeightsX16Ts(src: ArrayLike<number>, dims: Dims, strides: Dims, out: Uint16Array): void {
  const { G, K, N, panels, panelBytes, expertBytes } = packedX16Geometry(dims);
  const nd = dims.length;
  const sg = nd === 3 ? strides[0] : 0, sk = strides[nd - 2], sn = strides[nd - 1];
  for (let g = 0; g < G; g++)
    for (let p = 0; p < panels; p++)
      for (let k = 0; k < K; k++) {
        const o = (g * expertBytes + p * panelBytes) / 2 + k * PANEL;
        for (let q = 0; q < PANEL; q++) {
          const n = p * PANEL + q;
          out[o + q] = n < N ? src[g * sg + k * sk + n * sn] : 0;
        }
      }
}
