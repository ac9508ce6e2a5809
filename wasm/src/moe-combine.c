/* MoE combine (vLLM TopKWeightAndReduce): out[t, :] = sum over slots s = 0..k-1 with row_of[t, s] >= 0 of
   f32(w[t, s] * y[row, :]) (weighted) or y[row, :], accumulated in f32 from +0 in slot order, where row is
   row_of[t, s] (routed rows, batched g * C + i) or t * k + s (scattered: the GEMM already weighted and
   placed them). The multiply and the add are separate statements: no contraction into an FMA, so the
   fused-scatter path (GEMM epilogue multiply, then this sum) gives the same bits. Tiles of 4 tokens. */
#include "op_job.h"
#include "common.h"

typedef struct combine_job {
  op_head_t h;
  /* 32 */ uint32_t src, row_of, weights, dst;
  /* 48 */ int32_t T, k, N, src_ld;
  /* 64 */ int32_t dst_ld, dst_dt, scattered, weighted;
  /* 80 */ int32_t rows, pad0, pad1, pad2;
} combine_job_t;
_Static_assert(sizeof(combine_job_t) == 96, "combine_job_t layout changed: update src/primitives/moe/combine");

enum { ERR_COMBINE_ROW = 130 };
#define TOKENS_PER_TILE 4
#define NCHUNK 512

int run_moe_combine(op_head_t* h) {
  combine_job_t* j = (combine_job_t*)h;
  const int32_t* ro = (const int32_t*)(uintptr_t)j->row_of;
  const int32_t n = j->T * j->k;
  for (int32_t i = 0; i < n; i++) /* every worker checks all of it before anyone writes */
    if (ro[i] < -1 || (!j->scattered && ro[i] >= j->rows)) { op_error(h, ERR_COMBINE_ROW, i, ro[i], j->rows); return 0; }
  const float* y = (const float*)(uintptr_t)j->src;
  const float* w = (const float*)(uintptr_t)j->weights;
  float acc[NCHUNK];
  int done = 0;
  for (int32_t tile; (tile = op_next_tile(h)) * TOKENS_PER_TILE < j->T; done++) {
    for (int32_t t = tile * TOKENS_PER_TILE; t < MIN(j->T, tile * TOKENS_PER_TILE + TOKENS_PER_TILE); t++) {
      for (int32_t n0 = 0; n0 < j->N; n0 += NCHUNK) {
        const int32_t nc = MIN(NCHUNK, j->N - n0);
        int32_t c = 0;
        for (; c + 4 <= nc; c += 4) wasm_v128_store(acc + c, wasm_f32x4_splat(0.0f));
        for (; c < nc; c++) acc[c] = 0.0f;
        for (int32_t s = 0; s < j->k; s++) {
          const int32_t r = ro[t * j->k + s];
          if (r < 0) continue;
          const float* x = y + (size_t)(j->scattered ? t * j->k + s : r) * (size_t)j->src_ld + n0;
          if (j->weighted) {
            const v128_t ws = wasm_f32x4_splat(w[t * j->k + s]);
            for (c = 0; c + 4 <= nc; c += 4) {
              const v128_t p = wasm_f32x4_mul(ws, wasm_v128_load(x + c));
              wasm_v128_store(acc + c, wasm_f32x4_add(wasm_v128_load(acc + c), p));
            }
            for (; c < nc; c++) {
              const float p = w[t * j->k + s] * x[c];
              acc[c] = acc[c] + p;
            }
          } else {
            for (c = 0; c + 4 <= nc; c += 4) wasm_v128_store(acc + c, wasm_f32x4_add(wasm_v128_load(acc + c), wasm_v128_load(x + c)));
            for (; c < nc; c++) acc[c] = acc[c] + x[c];
          }
        }
        char* out = (char*)(uintptr_t)j->dst;
        const size_t o = (size_t)t * (size_t)j->dst_ld + (size_t)n0;
        if (j->dst_dt == 0) __builtin_memcpy((float*)out + o, acc, (size_t)nc * 4);
        else for (c = 0; c < nc; c++) store_elem(out, j->dst_dt, o + (size_t)c, acc[c]);
      }
    }
  }
  return done;
}
