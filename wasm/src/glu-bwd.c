/* GLU backward (dglu.h has the math and the dprob order):
   - KIND_GLU_BWD (45): the standalone primitive. Tiles of GLU_BWD_ROWS whole rows: each tile reads
     h13 and diff, writes d(h13) and adds its rows' totals to dprob. Grouped rows: every offsets
     buffer is checked (first 0, non-decreasing, last <= R, all equal) before anything is written, and
     only rows before the last offset are touched.
   - KIND_DGLU_REDUCE (46): after a GEMM with the PO_DGLU post-op, adds each row's chunk sums (written
     by the GEMM's tiles into a workspace, one per row and 64-column chunk) to dprob in chunk order.
   - dglu_tile: the PO_DGLU epilogue of a fused GEMM tile (called from gemm-fused.c). */
#include "common.h"
#include "job.h"
#include "op_job.h"
#include "driver.h"
#include "dglu.h"
#include "tile_io.h"

#define GLU_BWD_ROWS 8
#define DGLU_REDUCE_ROWS 256
/* 153: ARG.DIFF_DST's offsets differ from ARG.SRC's, 154: ARG.DIFF_SRC's. */
enum { ERR_GLU_OFFS_FIRST = 150, ERR_GLU_OFFS_DECREASING = 151, ERR_GLU_OFFS_TOTAL = 152, ERR_GLU_OFFS_MISMATCH = 153 };

typedef struct glu_bwd_job {
  op_head_t h;
  /* 32 */ uint32_t src, ddst, dsrc, prob;
  /* 48 */ uint32_t dprob, offs_src, offs_ddst, offs_dsrc;
  /* 64 */ int32_t R, N, G, alg;
  /* 80 */ int32_t layout; float alpha, limit; int32_t dt_src;
  /* 96 */ int32_t dt_ddst, dt_dsrc, src_ld, src_s1;
  /* 112 */ int32_t ddst_ld, ddst_s1, dsrc_ld, dsrc_s1;
  /* 128 */ int32_t prob_ld, dprob_ld, pad0, pad1;
} glu_bwd_job_t;
_Static_assert(sizeof(glu_bwd_job_t) == 144, "glu_bwd_job_t layout changed: update src/primitives/glu_backward/impls.ts");

typedef struct dglu_reduce_job {
  op_head_t h;
  /* 32 */ uint32_t ws, dprob, offs; int32_t G;
  /* 48 */ int32_t R, nchunk, dprob_ld, pad;
} dglu_reduce_job_t;
_Static_assert(sizeof(dglu_reduce_job_t) == 64, "dglu_reduce_job_t layout changed: update src/kernels/dglu_job.ts");

/* 4 diff values of a row (absent lanes 0). */
INLINE v128_t load4(const char* base, int dt, size_t row, int32_t s1, int32_t n, int32_t cnt) {
  if (dt == DT_F32 && s1 == 1 && cnt == 4) return wasm_v128_load((const float*)base + row + n);
  if (dt == DT_BF16 && s1 == 1 && cnt == 4) return wasm_i32x4_shl(wasm_u32x4_load16x4((const uint16_t*)base + row + n), 16);
  float t[4] = { 0.0f, 0.0f, 0.0f, 0.0f };
  for (int32_t l = 0; l < cnt; l++) t[l] = load_elem(base, dt, row + (size_t)(n + l) * (size_t)s1);
  return wasm_v128_load(t);
}

/* Checks the offsets buffers (every worker reaches the same verdict); returns the rows to touch or -1. */
static int32_t glu_bwd_rows(glu_bwd_job_t* j) {
  if (!j->offs_src) return j->R;
  const int32_t* o = (const int32_t*)(uintptr_t)j->offs_src;
  const int32_t G = j->G;
  if (o[0] != 0) { op_error(&j->h, ERR_GLU_OFFS_FIRST, 0, o[0], 0); return -1; }
  for (int32_t i = 1; i <= G; i++)
    if (o[i] < o[i - 1]) { op_error(&j->h, ERR_GLU_OFFS_DECREASING, i, o[i], o[i - 1]); return -1; }
  if (o[G] > j->R) { op_error(&j->h, ERR_GLU_OFFS_TOTAL, G, o[G], j->R); return -1; }
  const uint32_t others[2] = { j->offs_ddst, j->offs_dsrc };
  for (int w = 0; w < 2; w++) {
    const int32_t* p = (const int32_t*)(uintptr_t)others[w];
    if (!p || p == o) continue;
    for (int32_t i = 0; i <= G; i++)
      if (p[i] != o[i]) { op_error(&j->h, ERR_GLU_OFFS_MISMATCH + w, i, p[i], o[i]); return -1; }
  }
  return o[G];
}

int run_glu_bwd(op_head_t* h) {
  glu_bwd_job_t* j = (glu_bwd_job_t*)h;
  const int32_t rows = glu_bwd_rows(j);
  if (rows < 0) return 0;
  const dglu_par_t k = { j->alg, j->layout, j->alpha, j->limit, j->N };
  const char* src = (const char*)(uintptr_t)j->src;
  const char* ddst = (const char*)(uintptr_t)j->ddst;
  char* dsrc = (char*)(uintptr_t)j->dsrc;
  const float* prob = (const float*)(uintptr_t)j->prob;
  float* dprob = (float*)(uintptr_t)j->dprob;
  const int32_t N = j->N;
  int done = 0;
  for (int32_t t; (t = op_next_tile(h)) * GLU_BWD_ROWS < rows; done++) {
    for (int32_t r = t * GLU_BWD_ROWS; r < MIN(rows, t * GLU_BWD_ROWS + GLU_BWD_ROWS); r++) {
      const size_t srow = (size_t)r * (size_t)j->src_ld, drow = (size_t)r * (size_t)j->ddst_ld;
      const size_t orow = (size_t)r * (size_t)j->dsrc_ld;
      const v128_t pv = prob ? wasm_v128_load32_splat(prob + (size_t)r * (size_t)j->prob_ld) : VF(1.0f);
      v128_t acc = VF(0.0f);
      float total = 0.0f;
      int first = 1;
      for (int32_t n = 0; n < N; n += 4) {
        const int32_t cnt = MIN(4, N - n);
        v128_t g, u, dg, du;
        dglu_load(&k, src, j->dt_src, srow, j->src_s1, n, cnt, &g, &u);
        const v128_t d = load4(ddst, j->dt_ddst, drow, j->ddst_s1, n, cnt);
        const v128_t term = dglu_math(&k, g, u, d, pv, &dg, &du);
        dglu_store(&k, dsrc, j->dt_dsrc, orow, j->dsrc_s1, n, cnt, dg, du);
        if (dprob) {
          acc = VADD(acc, term);
          if (dglu_chunk_end(n, N)) {
            const float cs = dglu_hsum(acc);
            total = first ? cs : total + cs;
            first = 0;
            acc = VF(0.0f);
          }
        }
      }
      if (dprob) {
        float* dp = dprob + (size_t)r * (size_t)j->dprob_ld;
        *dp = *dp + total;
      }
    }
  }
  return done;
}

int run_dglu_reduce(op_head_t* h) {
  dglu_reduce_job_t* j = (dglu_reduce_job_t*)h;
  const int32_t* o = (const int32_t*)(uintptr_t)j->offs;
  const int32_t rows = MAX(0, MIN(j->R, o ? o[j->G] : j->R));
  const float* ws = (const float*)(uintptr_t)j->ws;
  float* dprob = (float*)(uintptr_t)j->dprob;
  int done = 0;
  for (int32_t t; (t = op_next_tile(h)) * DGLU_REDUCE_ROWS < rows; done++)
    for (int32_t r = t * DGLU_REDUCE_ROWS; r < MIN(rows, t * DGLU_REDUCE_ROWS + DGLU_REDUCE_ROWS); r++) {
      const float* w = ws + (size_t)r * (size_t)j->nchunk;
      float total = w[0];
      for (int32_t c = 1; c < j->nchunk; c++) total = total + w[c];
      float* dp = dprob + (size_t)r * (size_t)j->dprob_ld;
      *dp = *dp + total;
    }
  return done;
}

/* PO_DGLU in job.po[0]: ptr = h13, st_g = its data type, st_r / st_n = its row / column strides,
   alg / alpha / beta = GLU algorithm, alpha, limit, pad0 = layout, pad1 = prob (f32, one per row,
   contiguous; 0 = none), pad2 = workspace of chunk sums (f32 [rows][ceil(N / 64)]; 0 = no dprob).
   cuDNN's per-group scales of the dSwiGLU epilogue live in the unused po[1] (dglu is the only post-op):
   po[1].ptr = alpha (f32 per expert, 0 = none: the GEMM result times alpha^2), po[1].table = beta
   (f32 per expert, 0 = none: h13's gate and up times beta before the GLU derivative). */
void dglu_tile(const job_t* j, const group_view_t* v, int32_t m0, int32_t mc, int32_t n0, int32_t nc, const float* c,
               int32_t ldc) {
  const post_op_t* o = &j->po[0];
  const dglu_par_t k = { o->alg, o->pad0, o->alpha, o->beta, v->N };
  const char* h13 = (const char*)(uintptr_t)o->ptr;
  const float* prob = (const float*)(uintptr_t)(uint32_t)o->pad1;
  float* ws = (float*)(uintptr_t)(uint32_t)o->pad2;
  const int32_t nchunk = cdiv(v->N, DGLU_CHUNK);
  const operand_t C = v->C;
  const float* galpha = (const float*)(uintptr_t)j->po[1].ptr;
  const float* gbeta = (const float*)(uintptr_t)(uint32_t)j->po[1].table;
  const v128_t a2 = VF(galpha ? galpha[v->g] * galpha[v->g] : 1.0f), bv = VF(gbeta ? gbeta[v->g] : 1.0f);
  /* Read-ahead (tile_io.h): the tile's h13 and d(h13) pieces are 64 rows of a few hundred bytes each,
     too short for the hardware prefetcher; one pass of independent reads keeps many misses in flight. */
  if (o->st_n == 1 && C.s1 == 1 && mc > TOUCH_MIN_ROWS) {
    const size_t hes = o->st_g == DT_F32 ? 4 : 2, des = C.dt == DT_F32 ? 4 : 2;
    const int two = k.layout == GLU_HALVES;
    const size_t c0 = two ? (size_t)n0 : 2 * (size_t)n0, w = two ? (size_t)nc : 2 * (size_t)nc;
    for (int32_t i = 0; i < mc; i++) {
      const size_t hrow = (size_t)(v->r0 + m0 + i) * (size_t)o->st_r, drow = C.off + (size_t)(m0 + i) * (size_t)C.s0;
      touch_range(h13 + (hrow + c0) * hes, w * hes);
      touch_range(C.base + (drow + c0) * des, w * des);
      if (two) {
        touch_range(h13 + (hrow + c0 + (size_t)v->N) * hes, w * hes);
        touch_range(C.base + (drow + c0 + (size_t)v->N) * des, w * des);
      }
    }
  }
  for (int32_t i = 0; i < mc; i++) {
    const int32_t r = v->r0 + m0 + i;
    const size_t hrow = (size_t)r * (size_t)o->st_r;
    const size_t drow = C.off + (size_t)(m0 + i) * (size_t)C.s0;
    const float* x = c + (size_t)i * (size_t)ldc;
    const v128_t pv = prob ? wasm_v128_load32_splat(prob + r) : VF(1.0f);
    v128_t acc = VF(0.0f);
    for (int32_t jj = 0; jj < nc; jj += 4) {
      const int32_t cnt = MIN(4, nc - jj), n = n0 + jj;
      v128_t g, u, dg, du;
      dglu_load(&k, h13, o->st_g, hrow, o->st_n, n, cnt, &g, &u);
      v128_t d = wasm_v128_load(x + jj);
      if (cnt < 4) d = load4((const char*)x, DT_F32, 0, 1, jj, cnt);
      if (galpha) d = VMUL(d, a2);
      if (gbeta) {
        g = VMUL(g, bv);
        u = VMUL(u, bv);
      }
      const v128_t term = dglu_math(&k, g, u, d, pv, &dg, &du);
      dglu_store(&k, (char*)C.base, C.dt, drow, C.s1, n, cnt, dg, du);
      if (ws) {
        acc = VADD(acc, term);
        if (dglu_chunk_end(n, v->N)) {
          ws[(size_t)r * (size_t)nchunk + (size_t)(n / DGLU_CHUNK)] = dglu_hsum(acc);
          acc = VF(0.0f);
        }
      }
    }
  }
}
