/* The job a primitive posts to the workers: one struct in the shared heap, read by every worker.
   The layout is mirrored field by field in src/runtime/job_layout.ts: change both together. */
#pragma once
#include <stdint.h>

enum { KIND_GROUPED_M = 1, KIND_GROUPED_K = 2 };
enum { DT_F32 = 0, DT_BF16 = 1, DT_F16 = 2 };
/* How a job learns where each group lives: a canonical offsets buffer (P#1 grouped memory, P#2
   offsets attribute), uniform groups (dense and batched matmul: group g starts at g * group stride),
   or a table of per-group pointers with the rows of each group in a runtime-dims buffer (P#3). */
enum { GROUPS_OFFSETS = 0, GROUPS_UNIFORM = 1, GROUPS_POINTERS = 2 };

/* One entry of the P#3 pointer table (`job.groups`): expert g's own buffers and geometry. */
typedef struct group_rec {
  uint32_t src, wei, dst, max_rows; /* max_rows: rows that fit in both src and dst allocations */
  int32_t K, N, s_0, d_0;
  int32_t w_k, w_n, wei_packed, pad;
} group_rec_t;
_Static_assert(sizeof(group_rec_t) == 48, "group_rec_t layout changed: update grouped_gemm executor");
enum { ELT_RELU = 1, ELT_LINEAR = 2, ELT_CLIP = 3, ELT_ABS = 4, ELT_SQUARE = 5 };
enum {
  ERR_NONE = 0, ERR_OFFS_FIRST = 1, ERR_OFFS_DECREASING = 2, ERR_OFFS_TOTAL = 3,
  ERR_OFFS_MISMATCH = 4, ERR_OFFS_SIZES = 5, ERR_DIMS_NEGATIVE = 6, ERR_DIMS_CAPACITY = 7,
};
#define MAX_ELT 4

typedef struct job {
  /* 0 */ int32_t kind, group_mode, status, err_index;
  /* 16 */ int32_t err_a, err_b, tile_next, nthreads;
  /* 32 */ int32_t G, M, K, N;
  /* 48 */ uint32_t src, wei, dst, bias;
  /* 64 */ uint32_t offs, offs2, sizes, scratch;
  /* 80 */ int32_t scratch_stride, mb, nb, kc;
  /* 96: element strides. src (s_g, s_0, s_1) is [g][row][col]; wei (w_g, w_k, w_n); dst (d_g, d_0, d_1). */
  int32_t s_g, s_0, s_1, w_g;
  /* 112 */ int32_t w_k, w_n, d_g, d_0;
  /* 128 */ int32_t d_1, b_g, b_n, wei_packed;
  /* 144 */ int32_t dt_src, dt_wei, dt_dst, total;
  /* 160 */ int32_t n_elt, has_sum; float sum_scale; uint32_t groups;
  /* 176 */ int32_t elt_alg[MAX_ELT];
  /* 192 */ float elt_alpha[MAX_ELT];
  /* 208 */ float elt_beta[MAX_ELT];
  /* 224 */
} job_t;

_Static_assert(sizeof(job_t) == 224, "job_t layout changed: update job_layout.ts");
