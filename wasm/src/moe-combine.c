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

/* ---- Combine backward (op job KIND_MOE_COMBINE_BWD), the gradient of the weight-and-reduce above:
     d(src)[row] = w[t, s] * d(out)[t]  (or d(out)[t] unweighted), every src row written exactly once:
       routed rows through token_index / token_ks (a padding or unrouted row, token -1, gets zeros),
       scattered rows t * k + s through the row_of mask (absent slots get zeros);
     d(w)[t, s] = sum_n d(out)[t, n] * src[row, n] (weighted only; 0 for an absent slot), four lanes
       summed in a fixed order: the same bits for any thread count.
   Tiles: 4 src rows each, then 4 tokens each for d(w). Every worker validates the maps first. */
typedef struct combine_bwd_job {
  op_head_t h;
  /* 32 */ uint32_t ddst, src, weights, row_of;
  /* 48 */ uint32_t token_index, token_ks, dsrc, dweights;
  /* 64 */ int32_t T, k, N, rows;
  /* 80 */ int32_t ddst_ld, src_ld, dsrc_ld, scattered;
  /* 96 */ int32_t weighted, pad0, pad1, pad2;
} combine_bwd_job_t;
_Static_assert(sizeof(combine_bwd_job_t) == 112, "combine_bwd_job_t layout changed: update src/primitives/moe/combine/backward_impls.ts");

enum { ERR_COMBINE_TOKEN = 131, ERR_COMBINE_KS = 132 };
#define ROWS_PER_TILE 4

static int check_bwd_maps(combine_bwd_job_t* j) {
  const int32_t* ro = (const int32_t*)(uintptr_t)j->row_of;
  if (ro && (j->scattered || j->weighted))
    for (int32_t i = 0; i < j->T * j->k; i++)
      if (ro[i] < -1 || (!j->scattered && ro[i] >= j->rows)) { op_error(&j->h, ERR_COMBINE_ROW, i, ro[i], j->rows); return 1; }
  if (j->scattered) return 0;
  const int32_t* ti = (const int32_t*)(uintptr_t)j->token_index;
  const int32_t* ks = (const int32_t*)(uintptr_t)j->token_ks;
  for (int32_t r = 0; r < j->rows; r++) {
    if (ti[r] < -1 || ti[r] >= j->T) { op_error(&j->h, ERR_COMBINE_TOKEN, r, ti[r], j->T); return 1; }
    if (j->weighted && ti[r] >= 0 && (ks[r] < 0 || ks[r] >= j->k)) { op_error(&j->h, ERR_COMBINE_KS, r, ks[r], j->k); return 1; }
  }
  return 0;
}

/* d(src) row r: its token and slot, or -1 when the row receives no gradient. */
static void bwd_row(const combine_bwd_job_t* j, int32_t r) {
  int32_t t, s;
  if (j->scattered) {
    t = r / j->k;
    s = r - t * j->k;
    if (((const int32_t*)(uintptr_t)j->row_of)[r] < 0) t = -1;
  } else {
    t = ((const int32_t*)(uintptr_t)j->token_index)[r];
    s = j->weighted && t >= 0 ? ((const int32_t*)(uintptr_t)j->token_ks)[r] : 0;
  }
  float* o = (float*)(uintptr_t)j->dsrc + (size_t)r * (size_t)j->dsrc_ld;
  int32_t c = 0;
  if (t < 0) {
    for (; c + 4 <= j->N; c += 4) wasm_v128_store(o + c, wasm_f32x4_splat(0.0f));
    for (; c < j->N; c++) o[c] = 0.0f;
    return;
  }
  const float* d = (const float*)(uintptr_t)j->ddst + (size_t)t * (size_t)j->ddst_ld;
  if (!j->weighted) {
    __builtin_memcpy(o, d, (size_t)j->N * 4);
    return;
  }
  const float w = ((const float*)(uintptr_t)j->weights)[t * j->k + s];
  const v128_t ws = wasm_f32x4_splat(w);
  for (; c + 4 <= j->N; c += 4) wasm_v128_store(o + c, wasm_f32x4_mul(ws, wasm_v128_load(d + c)));
  for (; c < j->N; c++) o[c] = w * d[c];
}

/* d(w)[t, s] for the k slots of token t. */
static void bwd_weights(const combine_bwd_job_t* j, int32_t t) {
  const int32_t* ro = (const int32_t*)(uintptr_t)j->row_of;
  const float* d = (const float*)(uintptr_t)j->ddst + (size_t)t * (size_t)j->ddst_ld;
  float* dw = (float*)(uintptr_t)j->dweights + (size_t)t * (size_t)j->k;
  for (int32_t s = 0; s < j->k; s++) {
    const int32_t r0 = ro[t * j->k + s];
    if (r0 < 0) { dw[s] = 0.0f; continue; }
    const int32_t r = j->scattered ? t * j->k + s : r0;
    const float* y = (const float*)(uintptr_t)j->src + (size_t)r * (size_t)j->src_ld;
    v128_t acc = wasm_f32x4_splat(0.0f);
    int32_t c = 0;
    for (; c + 4 <= j->N; c += 4) acc = wasm_f32x4_add(acc, wasm_f32x4_mul(wasm_v128_load(d + c), wasm_v128_load(y + c)));
    float x = (wasm_f32x4_extract_lane(acc, 0) + wasm_f32x4_extract_lane(acc, 1)) + (wasm_f32x4_extract_lane(acc, 2) + wasm_f32x4_extract_lane(acc, 3));
    for (; c < j->N; c++) {
      const float p = d[c] * y[c];
      x = x + p;
    }
    dw[s] = x;
  }
}

int run_moe_combine_bwd(op_head_t* h) {
  combine_bwd_job_t* j = (combine_bwd_job_t*)h;
  if (check_bwd_maps(j)) return 0;
  const int32_t row_tiles = (j->rows + ROWS_PER_TILE - 1) / ROWS_PER_TILE;
  const int32_t tok_tiles = j->weighted ? (j->T + TOKENS_PER_TILE - 1) / TOKENS_PER_TILE : 0;
  int done = 0;
  for (int32_t q; (q = op_next_tile(h)) < row_tiles + tok_tiles; done++) {
    if (q < row_tiles) {
      for (int32_t r = q * ROWS_PER_TILE; r < MIN(j->rows, q * ROWS_PER_TILE + ROWS_PER_TILE); r++) bwd_row(j, r);
    } else {
      const int32_t t0 = (q - row_tiles) * TOKENS_PER_TILE;
      for (int32_t t = t0; t < MIN(j->T, t0 + TOKENS_PER_TILE); t++) bwd_weights(j, t);
    }
  }
  return done;
}
