/* Grouped matmul backward, bias gradient (op job KIND_MATMUL_BWD_BIAS):
     diff_bias[g, n] = sum over the rows r of group g of diff_dst[r, n]
   accumulated in f32 in row order (r = offs[g], offs[g] + 1, ...), one tile per (group, 64-column
   block): each output element is summed by exactly one worker in a fixed order, so the bits do not
   depend on the thread count. An empty group writes zeros (the gradient of a bias nobody used). The
   offsets are checked (first 0, non-decreasing, within the rows) before anything is written.
   Pointer mode (groups != 0, RFC Proposal #3): group g's rows are the first offs[g] rows of its own
   diff_dst buffer (record g of the GEMM's pointer table: wei = diff_dst_g, w_k = its row stride); the
   GEMM job that runs first has checked those counts against every allocation. */
#include "op_job.h"
#include "job.h"

typedef struct bwd_bias_job {
  op_head_t h;
  /* 32 */ uint32_t ddst, offs, dbias, groups;
  /* 48 */ int32_t G, N, ld, total;
  /* 64 */ int32_t dt_ddst, dt_dbias, b_g, b_n;
} bwd_bias_job_t;
_Static_assert(sizeof(bwd_bias_job_t) == 80, "bwd_bias_job_t layout changed: update src/primitives/matmul_backward/bias_job.ts");

#define BIAS_COLS 64

static int check_offsets(bwd_bias_job_t* j) {
  const int32_t* o = (const int32_t*)(uintptr_t)j->offs;
  if (j->groups) {
    for (int32_t i = 0; i < j->G; i++)
      if (o[i] < 0) { op_error(&j->h, ERR_DIMS_NEGATIVE, i, o[i], 0); return 1; }
    return 0;
  }
  if (o[0] != 0) { op_error(&j->h, ERR_OFFS_FIRST, 0, o[0], 0); return 1; }
  for (int32_t i = 1; i <= j->G; i++)
    if (o[i] < o[i - 1]) { op_error(&j->h, ERR_OFFS_DECREASING, i, o[i], o[i - 1]); return 1; }
  if (o[j->G] > j->total) { op_error(&j->h, ERR_OFFS_TOTAL, j->G, o[j->G], j->total); return 1; }
  return 0;
}

static void bias_tile(const bwd_bias_job_t* j, int32_t g, int32_t n0) {
  const int32_t* o = (const int32_t*)(uintptr_t)j->offs;
  const int32_t nc = MIN(BIAS_COLS, j->N - n0);
  float acc[BIAS_COLS];
  __builtin_memset(acc, 0, sizeof acc);
  const char* d = (const char*)(uintptr_t)j->ddst;
  const group_rec_t* t = j->groups ? (const group_rec_t*)(uintptr_t)j->groups + g : 0;
  const int32_t r0 = t ? 0 : o[g], r1 = t ? o[g] : o[g + 1];
  const size_t ld = t ? (size_t)t->w_k : (size_t)j->ld;
  if (t) d = (const char*)(uintptr_t)t->wei;
  for (int32_t r = r0; r < r1; r++) {
    const size_t row = (size_t)r * ld + (size_t)n0;
    int32_t c = 0;
    if (j->dt_ddst == DT_F32) {
      const float* x = (const float*)d + row;
      for (; c + 4 <= nc; c += 4) wasm_v128_store(acc + c, wasm_f32x4_add(wasm_v128_load(acc + c), wasm_v128_load(x + c)));
    }
    for (; c < nc; c++) acc[c] += load_elem(d, j->dt_ddst, row + (size_t)c);
  }
  char* b = (char*)(uintptr_t)j->dbias;
  for (int32_t c = 0; c < nc; c++) store_elem(b, j->dt_dbias, (size_t)g * (size_t)j->b_g + (size_t)(n0 + c) * (size_t)j->b_n, acc[c]);
}

int run_matmul_bwd_bias(op_head_t* h) {
  bwd_bias_job_t* j = (bwd_bias_job_t*)h;
  if (check_offsets(j)) return 0;
  const int32_t nb = (j->N + BIAS_COLS - 1) / BIAS_COLS;
  int done = 0;
  for (int32_t t; (t = op_next_tile(h)) < j->G * nb; done++) bias_tile(j, t / nb, (t % nb) * BIAS_COLS);
  return done;
}
