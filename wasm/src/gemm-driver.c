/* The grouped GEMM driver run by every worker: validate the runtime offsets (before touching any row),
   turn them into a tile space (group x N-block x M-block), take tiles from one atomic counter, and run
   each tile with K blocking on the f32 microkernel. Every tile is computed by exactly one worker with
   the same accumulation order whatever the thread count, so results are bitwise reproducible. */
#include "common.h"
#include "job.h"
#include "ukernel.h"

INLINE size_t esz(int dt) { return dt == DT_F32 ? 4 : 2; }
INLINE int32_t cdiv(int32_t a, int32_t b) { return (a + b - 1) / b; }

static void set_error(job_t* j, int code, int32_t idx, int32_t a, int32_t b) {
  j->err_index = idx;
  j->err_a = a;
  j->err_b = b;
  __atomic_store_n(&j->status, code, __ATOMIC_SEQ_CST);
}

/* Copies the offsets into private scratch and checks them; only worker 0 reports (all reach the same verdict). */
static int load_offsets(job_t* j, int32_t* o, int tid) {
  const int32_t* src = (const int32_t*)(uintptr_t)j->offs;
  const int G = j->G;
  for (int i = 0; i <= G; i++) o[i] = src[i];
  int code = ERR_NONE;
  int32_t idx = 0, a = 0, b = 0;
  if (o[0] != 0) { code = ERR_OFFS_FIRST; a = o[0]; }
  for (int i = 1; !code && i <= G; i++)
    if (o[i] < o[i - 1]) { code = ERR_OFFS_DECREASING; idx = i; a = o[i]; b = o[i - 1]; }
  if (!code && o[G] > j->total) { code = ERR_OFFS_TOTAL; idx = G; a = o[G]; b = j->total; }
  if (!code && j->sizes) {
    const int32_t* sz = (const int32_t*)(uintptr_t)j->sizes;
    for (int i = 0; !code && i < G; i++)
      if (o[i + 1] - o[i] != sz[i]) { code = ERR_OFFS_SIZES; idx = i; a = o[i + 1] - o[i]; b = sz[i]; }
  }
  if (!code && j->offs2 && j->offs2 != j->offs) {
    const int32_t* o2 = (const int32_t*)(uintptr_t)j->offs2;
    for (int i = 0; !code && i <= G; i++)
      if (o2[i] != o[i]) { code = ERR_OFFS_MISMATCH; idx = i; a = o2[i]; b = o[i]; }
  }
  if (code && tid == 0) set_error(j, code, idx, a, b);
  return code;
}

/* One GEMM tile: C[m0 : m0+mc, n0 : n0+nc] of a group whose operands are described below. */
typedef struct operand {
  const char* base;
  int32_t s0, s1; /* element strides: A (row, k); B (k, n); C (row, n) */
  int dt;
} operand_t;

typedef struct scratch {
  float* a;    /* MB x KC */
  float* b;    /* KC x NB (NR-column panels) */
  float* c;    /* MB x NB */
  float* bias; /* NB */
} scratch_t;

static void run_tile(const job_t* j, const scratch_t* s, operand_t A, operand_t B, const float* wpacked, operand_t C,
                     const char* bias_g, int32_t Kg, int32_t m0, int32_t mc, int32_t n0, int32_t nc) {
  const int32_t KC = j->kc, NB = j->nb;
  const int32_t npan = cdiv(nc, NR);
  const int direct_c = C.dt == DT_F32 && C.s1 == 1;
  float* c = direct_c ? (float*)C.base + (size_t)m0 * C.s0 + n0 : s->c;
  const size_t ldc = direct_c ? (size_t)C.s0 : (size_t)NB;
  int accumulate = 0;

  if (j->has_sum) { /* dst = sum_scale * dst_before + (acc + bias), then the element-wise ops */
    for (int32_t i = 0; i < mc; i++)
      for (int32_t n = 0; n < nc; n++)
        c[i * ldc + n] = j->sum_scale * load_elem(C.base, C.dt, (size_t)(m0 + i) * C.s0 + (size_t)(n0 + n) * C.s1);
    accumulate = 1;
  }
  const float* biasv = 0;
  if (bias_g) {
    for (int32_t n = 0; n < npan * NR; n++)
      s->bias[n] = n < nc ? ((const float*)bias_g)[(size_t)(n0 + n) * j->b_n] : 0.0f;
    biasv = s->bias;
  }
  epilogue_t epi = { 0, j->n_elt, j->elt_alg, j->elt_alpha, j->elt_beta };

  for (int32_t k0 = 0; k0 < Kg || k0 == 0; k0 += KC) {
    const int32_t kc = MIN(KC, Kg - k0);
    const int last = k0 + KC >= Kg;
    /* A is always copied into a contiguous MB x KC block: rows of the user's matrix sit K floats
       apart, and with K a multiple of 1024 they would all alias the same L1 sets. */
    const size_t lda = (size_t)KC;
    if (A.dt == DT_F32 && A.s1 == 1) {
      for (int32_t i = 0; i < mc; i++) {
        const float* row = (const float*)A.base + (size_t)(m0 + i) * A.s0 + k0;
        __builtin_memcpy(s->a + (size_t)i * KC, row, (size_t)kc * 4);
      }
    } else {
      for (int32_t i = 0; i < mc; i++)
        for (int32_t k = 0; k < kc; k++)
          s->a[(size_t)i * KC + k] = load_elem(A.base, A.dt, (size_t)(m0 + i) * A.s0 + (size_t)(k0 + k) * A.s1);
    }
    const float* a = s->a;
    const float* bp;
    size_t panel_stride;
    if (wpacked) {
      bp = wpacked + ((size_t)(n0 / NR) * j->K + k0) * NR;
      panel_stride = (size_t)j->K * NR;
    } else {
      for (int32_t p = 0; p < npan; p++)
        for (int32_t k = 0; k < kc; k++)
          for (int32_t q = 0; q < NR; q++) {
            const int32_t n = p * NR + q;
            s->b[((size_t)p * kc + k) * NR + q] =
                n < nc ? load_elem(B.base, B.dt, (size_t)(k0 + k) * B.s0 + (size_t)(n0 + n) * B.s1) : 0.0f;
          }
      bp = s->b;
      panel_stride = (size_t)kc * NR;
    }
    for (int32_t p = 0; p < npan; p++) {
      epi.bias = biasv ? biasv + p * NR : 0;
      const int32_t ncp = MIN(NR, nc - p * NR);
      for (int32_t i = 0; i < mc; i += MR)
        f32_gemm_4x8((size_t)MIN(MR, mc - i), (size_t)ncp, (size_t)kc, a + i * lda, lda, bp + p * panel_stride,
                     c + i * ldc + p * NR, ldc, accumulate, last ? &epi : 0);
    }
    accumulate = 1;
  }
  if (!direct_c)
    for (int32_t i = 0; i < mc; i++)
      for (int32_t n = 0; n < nc; n++)
        store_elem((char*)C.base, C.dt, (size_t)(m0 + i) * C.s0 + (size_t)(n0 + n) * C.s1, c[i * ldc + n]);
}

/* Rows (grouped_m) or contraction length (grouped_k) of group g. */
INLINE int32_t group_extent(const job_t* j, const int32_t* o, int32_t g) {
  return j->group_mode == GROUPS_OFFSETS ? o[g + 1] - o[g] : (j->kind == KIND_GROUPED_M ? j->M : j->K);
}

INLINE int32_t group_tiles(const job_t* j, const int32_t* o, int32_t g) {
  const int32_t rows = j->kind == KIND_GROUPED_M ? group_extent(j, o, g) : j->M;
  return cdiv(rows, j->mb) * cdiv(j->N, j->nb);
}

static void run_group_tile(const job_t* j, const scratch_t* s, const int32_t* o, int32_t g, int32_t t) {
  const int32_t mbn = j->kind == KIND_GROUPED_M ? cdiv(group_extent(j, o, g), j->mb) : cdiv(j->M, j->mb);
  const int32_t m0 = (t % mbn) * j->mb, n0 = (t / mbn) * j->nb;
  const size_t ss = esz(j->dt_src), ws = esz(j->dt_wei), ds = esz(j->dt_dst);
  const char* src = (const char*)(uintptr_t)j->src;
  const char* wei = (const char*)(uintptr_t)j->wei;
  char* dst = (char*)(uintptr_t)j->dst;
  const char* bias_g = j->bias ? (const char*)(uintptr_t)j->bias + (size_t)g * j->b_g * 4 : 0;
  operand_t A, B, C;
  int32_t rows, Kg;
  if (j->kind == KIND_GROUPED_M) {
    const int32_t r0 = j->group_mode == GROUPS_OFFSETS ? o[g] : 0;
    rows = group_extent(j, o, g);
    Kg = j->K;
    A = (operand_t){ src + ((size_t)g * j->s_g + (size_t)r0 * j->s_0) * ss, j->s_0, j->s_1, j->dt_src };
    B = (operand_t){ wei + (size_t)g * j->w_g * ws, j->w_k, j->w_n, j->dt_wei };
    C = (operand_t){ dst + ((size_t)g * j->d_g + (size_t)r0 * j->d_0) * ds, j->d_0, j->d_1, j->dt_dst };
  } else {
    const int32_t k0 = j->group_mode == GROUPS_OFFSETS ? o[g] : g * j->K;
    rows = j->M;
    Kg = group_extent(j, o, g);
    A = (operand_t){ src + (size_t)k0 * j->s_1 * ss, j->s_0, j->s_1, j->dt_src };
    B = (operand_t){ wei + (size_t)k0 * j->w_k * ws, j->w_k, j->w_n, j->dt_wei };
    C = (operand_t){ dst + (size_t)g * j->d_g * ds, j->d_0, j->d_1, j->dt_dst };
  }
  const float* wpacked = j->wei_packed ? (const float*)B.base : 0;
  run_tile(j, s, A, B, wpacked, C, bias_g, Kg, m0, MIN(j->mb, rows - m0), n0, MIN(j->nb, j->N - n0));
}

EXPORT(run_job) int run_job(job_t* j, int tid) {
  char* base = (char*)(uintptr_t)j->scratch + (size_t)tid * (size_t)j->scratch_stride;
  int32_t* o = (int32_t*)base;
  const size_t offs_bytes = ((size_t)(j->G + 1) * 4 + 63) & ~(size_t)63;
  scratch_t s;
  s.a = (float*)(base + offs_bytes);
  s.b = s.a + (size_t)j->mb * j->kc;
  s.c = s.b + (size_t)j->kc * j->nb;
  s.bias = s.c + (size_t)j->mb * j->nb;
  if (j->group_mode == GROUPS_OFFSETS && load_offsets(j, o, tid)) return 0;
  int32_t g = 0, base_tile = 0, tiles_g = j->G > 0 ? group_tiles(j, o, 0) : 0;
  int done = 0;
  for (;;) {
    const int32_t t = __atomic_fetch_add(&j->tile_next, 1, __ATOMIC_RELAXED);
    while (g < j->G && t >= base_tile + tiles_g) {
      base_tile += tiles_g;
      if (++g < j->G) tiles_g = group_tiles(j, o, g);
    }
    if (g >= j->G) break;
    run_group_tile(j, &s, o, g, t - base_tile);
    done++;
  }
  return done;
}

/* Packs weights [G, K, N] (any strides, f32/bf16/f16) into f32 panels [G][ceil(N/NR)][K][NR], zero padded. */
EXPORT(pack_weights) void pack_weights(const char* w, int dt, int32_t G, int32_t K, int32_t N, int32_t sg, int32_t sk,
                                       int32_t sn, float* out) {
  const int32_t npan = cdiv(N, NR);
  for (int32_t g = 0; g < G; g++)
    for (int32_t p = 0; p < npan; p++)
      for (int32_t k = 0; k < K; k++) {
        float* o = out + (((size_t)g * npan + p) * K + k) * NR;
        for (int32_t q = 0; q < NR; q++) {
          const int32_t n = p * NR + q;
          o[q] = n < N ? load_elem(w, dt, (size_t)g * sg + (size_t)k * sk + (size_t)n * sn) : 0.0f;
        }
      }
}
