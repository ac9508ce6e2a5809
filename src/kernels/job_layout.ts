import type { EltwiseAlg } from '../attr/eltwise.js';

/**
 * Byte offsets of `job_t` (wasm/src/job.h). The C side asserts the struct size; keep both in step.
 */
export const JOB = {
  kind: 0, group_mode: 4, status: 8, err_index: 12,
  err_a: 16, err_b: 20, tile_next: 24, nthreads: 28,
  G: 32, M: 36, K: 40, N: 44,
  src: 48, wei: 52, dst: 56, bias: 60,
  offs: 64, offs2: 68, sizes: 72, scratch: 76,
  scratch_stride: 80, mb: 84, nb: 88, kc: 92,
  s_g: 96, s_0: 100, s_1: 104, w_g: 108,
  w_k: 112, w_n: 116, d_g: 120, d_0: 124,
  d_1: 128, b_g: 132, b_n: 136, wei_packed: 140,
  dt_src: 144, dt_wei: 148, dt_dst: 152, total: 156,
  n_elt: 160, has_sum: 164, sum_scale: 168, groups: 172,
  elt_alg: 176, elt_alpha: 192, elt_beta: 208,
  path: 224, b_dt: 228, glu_alg: 232, glu_layout: 236,
  glu_alpha: 240, glu_limit: 244, n_po: 248, kc_packed: 252,
  /** NQ `qarg_t` records (QARG offsets), indexed by Q. */
  q: 256,
  /** MAX_PO `post_op_t` records (PO offsets). */
  po: 544,
  /** MoE row maps (job.h): token index / k-slot arrays, gather flag, scatter top-k, their bounds, batched counts. */
  tok_idx: 928, tok_ks: 932, gather: 936, scatter_k: 940,
  src_rows: 944, dst_rows: 948, counts: 952, seen_bytes: 956,
  /** Plain weights: K (at most) of the per-worker cache that holds one N-block packed K whole (0: none). */
  wcache_k: 960,
  /** grouped_m: zero-fill the dst rows in no group (offs[0] may be > 0); the group -> expert map and the experts it indexes. */
  zero_fill: 964, expert_of: 968, experts: 972,
  /** attr accumulation_mode: 0 strict, 1 relaxed (reordered decode kernels for 8-bit / 4-bit integer codes). */
  accum_mode: 976,
  SIZE: 992,
} as const;

/** Byte offsets inside a `qarg_t` (scale / zero-point location, job.h). */
export const QARG = { ptr: 0, table: 4, dt: 8, st_g: 12, st_r: 16, st_k: 20, st_n: 24, blk_k: 28, blk_n: 32, emb: 36, SIZE: 48 } as const;
/** Index of each `qarg_t` in `job.q`. */
export const Q = { src_scale: 0, wei_scale: 1, dst_scale: 2, src_zp: 3, wei_zp: 4, dst_zp: 5 } as const;
/** Byte offsets inside a `post_op_t` (fused post-op, job.h). */
export const PO = { kind: 0, alg: 4, alpha: 8, beta: 12, ptr: 16, table: 20, st_g: 24, st_r: 28, st_n: 32, SIZE: 48 } as const;
export const PO_KIND = { eltwise: 1, sum: 2, binary_add: 3, binary_mul: 4, dglu: 5 } as const;
/** PO_DGLU's use of a `post_op_t` (wasm/src/glu-bwd.c dglu_tile): h13 dt in st_g, layout / prob / workspace in the pads. */
export const PO_DGLU = { h13_dt: PO.st_g, h13_ld: PO.st_r, h13_s1: PO.st_n, layout: 36, prob: 40, ws: 44 } as const;
export const MAX_PO = 8;
export const PATH = { f32: 0, f32_fused: 1, int: 2 } as const;
/** What each path runs, for `pd.implInfo`: the microkernel, and `-fused` when the tile epilogue and decode-in-packing run around it. */
export const PATH_KERNEL: Readonly<Record<number, string>> = { [PATH.f32]: 'f32-gemm-4x8', [PATH.f32_fused]: 'f32-gemm-4x8-fused', [PATH.int]: 's16-gemm-3x8' };
export const ACC_MODE = { strict: 0, relaxed: 1 } as const;
export const WEI_PACKED = { plain: 0, f32_p8: 1, x8_p8: 3, x4_p8k2: 4, x16_p8: 5 } as const;
export const GLU_CODE = { glu_swiglu: 1, glu_geglu_erf: 2, glu_geglu_tanh: 3, glu_swiglu_oai: 4 } as const;
export const GLU_LAYOUT_CODE = { halves: 0, interleaved: 1, blocks32: 2 } as const;

export type JobField = Exclude<keyof typeof JOB, 'SIZE'>;

export const JOB_KIND = { grouped_m: 1, grouped_k: 2 } as const;
export const GROUP_MODE = { offsets: 0, uniform: 1, pointers: 2 } as const;
/** Byte offsets of `group_rec_t` (P#3 pointer table entry). */
export const GROUP_REC = { src: 0, wei: 4, dst: 8, max_rows: 12, K: 16, N: 20, s_0: 24, d_0: 28, w_k: 32, w_n: 36, wei_packed: 40, SIZE: 48 } as const;
export const JOB_DT = { f32: 0, bf16: 1, f16: 2 } as const;
/** Every element type the fused paths decode (job.h DT_*). */
export const JOB_DT_ALL = { ...JOB_DT, s8: 3, u8: 4, s4: 5, u4: 6, f8_e4m3: 7, f8_e5m2: 8, f4_e2m1: 9, s32: 10, e8m0: 11 } as const;
/** Eltwise algorithms of the fast path's in-register epilogue. */
export const ELT_CODE = { eltwise_relu: 1, eltwise_linear: 2, eltwise_clip: 3, eltwise_clip_v2: 3, eltwise_abs: 4, eltwise_square: 5 } as const;
/** Every eltwise algorithm of the fused epilogue (wasm/src/vmath.h). */
export const ELT_CODE_ALL = {
  ...ELT_CODE, eltwise_gelu_erf: 6, eltwise_gelu_tanh: 7, eltwise_swish: 8, eltwise_logistic: 9, eltwise_tanh: 10, eltwise_exp: 11,
  eltwise_elu: 12, eltwise_sqrt: 13, eltwise_soft_relu: 14, eltwise_log: 15, eltwise_pow: 16, eltwise_round: 17, eltwise_mish: 18,
  eltwise_hardswish: 19, eltwise_hardsigmoid: 20,
} as const satisfies Record<EltwiseAlg, number>;
export const MAX_ELT = 4;
/** Microkernel geometry of the built modules (wasm/src/common.h). */
export const MR = 4;
export const NR = 8;

/**
 * Bytes of one worker's scratch (wasm/src/driver.h): offsets, A block ((MB + MR) x max(KC, kcPacked) f32:
 * the integer path's 3-row panels round MB up), B
 * block (KC x NBC f32), C tile (MB x NBC f32), epilogue vectors (8 NBC + 4 MB f32), NBC = NB + 16.
 * `kcF32` is KC in f32 units (the integer path's int16 blocks with twice the KC take the same room);
 * `kcPacked` the fast path's K block on packed weights (job.kc_packed); `wcacheK` the K of the plain
 * weights cache (job.wcache_k: one N-block, K x nb f32, packed once and reused across M-blocks).
 */
export function scratchBytes(G: number, mb: number, nb: number, kcF32: number, kcPacked = 0, seenBytes = 0, wcacheK = 0): number {
  const nbc = nb + 16;
  return Math.ceil(((G + 1) * 4) / 64) * 64 + 4 * ((mb + MR) * Math.max(kcF32, kcPacked) + kcF32 * nbc + mb * nbc + 8 * nbc + 4 * mb + (wcacheK ? wcacheK + 4 : 0) * nb) + seenBytes;
}

export const JOB_ERR = { none: 0, offs_first: 1, offs_decreasing: 2, offs_total: 3, offs_mismatch: 4, offs_sizes: 5, dims_negative: 6, dims_capacity: 7, row_index: 8, row_slot: 9, row_duplicate: 10, expert_map: 11 } as const;
