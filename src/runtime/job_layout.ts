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
  SIZE: 224,
} as const;

export type JobField = Exclude<keyof typeof JOB, 'SIZE'>;

export const JOB_KIND = { grouped_m: 1, grouped_k: 2 } as const;
export const GROUP_MODE = { offsets: 0, uniform: 1, pointers: 2 } as const;
/** Byte offsets of `group_rec_t` (P#3 pointer table entry). */
export const GROUP_REC = { src: 0, wei: 4, dst: 8, max_rows: 12, K: 16, N: 20, s_0: 24, d_0: 28, w_k: 32, w_n: 36, wei_packed: 40, SIZE: 48 } as const;
export const JOB_DT = { f32: 0, bf16: 1, f16: 2 } as const;
export const ELT_CODE = { eltwise_relu: 1, eltwise_linear: 2, eltwise_clip: 3, eltwise_abs: 4, eltwise_square: 5 } as const;
export const MAX_ELT = 4;
/** Microkernel geometry of the built modules (wasm/src/common.h). */
export const MR = 4;
export const NR = 8;

export const JOB_ERR = { none: 0, offs_first: 1, offs_decreasing: 2, offs_total: 3, offs_mismatch: 4, offs_sizes: 5, dims_negative: 6, dims_capacity: 7 } as const;
