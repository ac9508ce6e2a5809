import { dtBytes, fromStored, type DataType } from '../common/data_type.js';
import type { Dims } from '../common/dims.js';
import { MemoryDesc } from './desc.js';

/** Panel width of the packed weights layout: the microkernel's NR. */
export const PANEL = 8;
/**
 * `f32:p8`: weights [G, K, N] (or [K, N]) stored per expert as ceil(N/8) panels of K x 8 f32,
 * N zero-padded to a multiple of 8: every microkernel call streams one contiguous panel.
 */
export const PACKED_P8 = 'f32:p8';

export function packedGeometry(dims: Dims): { G: number; K: number; N: number; panels: number; expertFloats: number } {
  const nd = dims.length;
  const G = nd === 3 ? dims[0] : 1;
  const K = dims[nd - 2], N = dims[nd - 1];
  const panels = Math.ceil(N / PANEL);
  return { G, K, N, panels, expertFloats: panels * K * PANEL };
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
 * Kp = K rounded up to even, N and K padded with code 0. The stored codes, unconverted: zero points and
 * scales stay execute-time arguments. The descriptor keeps the logical data type.
 */
export const PACKED_X8 = 'x8:p8';
export const PACKED_X4 = 'x4:p8k2';
export const X8_TYPES: readonly DataType[] = ['s8', 'u8', 'f8_e4m3', 'f8_e5m2'];
export const X4_TYPES: readonly DataType[] = ['s4', 'u4', 'f4_e2m1'];

export function packedLowpGeometry(dims: Dims, dataType: DataType): { name: string; G: number; K: number; Kp: number; N: number; panels: number; expertBytes: number } {
  const nd = dims.length;
  const G = nd === 3 ? dims[0] : 1;
  const K = dims[nd - 2], N = dims[nd - 1];
  const Kp = K + (K & 1);
  const panels = Math.ceil(N / PANEL);
  const four = X4_TYPES.includes(dataType);
  return { name: four ? PACKED_X4 : PACKED_X8, G, K, Kp, N, panels, expertBytes: panels * Kp * (four ? PANEL / 2 : PANEL) };
}

/** The packed descriptor for `tag.any` weights of an 8-bit or 4-bit type (f32 x low-precision or integer path). */
export function packedLowpWeightsDesc(dims: Dims, dataType: DataType): MemoryDesc {
  const { name, G, expertBytes } = packedLowpGeometry(dims, dataType);
  return new MemoryDesc({ dims, dataType, format: 'packed', packed: { name, byteSize: G * expertBytes } });
}

/** Plain TypeScript x8 / x4 packing (engines without kernels). `code(i)`: the stored code of source element i. */
export function packWeightsLowpTs(code: (i: number) => number, dataType: DataType, dims: Dims, strides: Dims, out: Uint8Array): void {
  const { G, K, Kp, N, panels, expertBytes } = packedLowpGeometry(dims, dataType);
  const four = X4_TYPES.includes(dataType);
  const nd = dims.length;
  const sg = nd === 3 ? strides[0] : 0, sk = strides[nd - 2], sn = strides[nd - 1];
  for (let g = 0; g < G; g++)
    for (let p = 0; p < panels; p++)
      for (let k = 0; k < Kp; k++)
        for (let q = 0; q < PANEL; q++) {
          const n = p * PANEL + q;
          const c = n < N && k < K ? code(g * sg + k * sk + n * sn) & (four ? 0xf : 0xff) : 0;
          if (!four) out[g * expertBytes + (p * Kp + k) * PANEL + q] = c;
          else out[g * expertBytes + (p * (Kp / 2) + (k >> 1)) * PANEL + q] |= c << ((k & 1) * 4);
        }
}
