/* MoE activation (op job KIND_MOE_ACTIVATION): the GLU between the two GEMMs as a stage of its own,
   for training, where GEMM1's output h = [gate | up] (R x 2I, in the GLU layout) must be kept for the
   backward: act[r, j] = act(gate) * up with the fused GEMM epilogue's vector formulas (glu.h), so a
   training forward gives the inference forward's bits. Rows in tiles of 8; with a grouped src only rows
   below offs[G] are read and written (checked first: 0 <= offs[G] <= rows). */
#include "op_job.h"
#include "common.h"
#include "job.h"
#include "glu.h"

typedef struct act_job {
  op_head_t h;
  /* 32 */ uint32_t src, dst, offs, pad0;
  /* 48 */ int32_t rows, I, src_ld, dst_ld;
  /* 64 */ int32_t alg, layout, G, pad1;
  /* 80 */ float alpha, limit, pad2, pad3;
} act_job_t;
_Static_assert(sizeof(act_job_t) == 96, "act_job_t layout changed: update src/primitives/moe/activation");

enum { ERR_ACT_OFFS = 140 };
#define ROWS_PER_TILE 8

/* Gate and up columns of output columns jj..jj+3 (jj a multiple of 4; blocks32 never splits a group). */
static void row_act(const act_job_t* j, const float* x, float* y) {
  const int32_t I = j->I;
  int32_t jj = 0;
  for (; jj + 4 <= I; jj += 4) {
    v128_t g, u;
    if (j->layout == GLU_HALVES) {
      g = wasm_v128_load(x + jj);
      u = wasm_v128_load(x + I + jj);
    } else if (j->layout == GLU_INTERLEAVED) {
      const v128_t lo = wasm_v128_load(x + 2 * jj), hi = wasm_v128_load(x + 2 * jj + 4);
      g = wasm_i32x4_shuffle(lo, hi, 0, 2, 4, 6);
      u = wasm_i32x4_shuffle(lo, hi, 1, 3, 5, 7);
    } else {
      const int32_t cb = 64 * (jj / 32) + jj % 32;
      g = wasm_v128_load(x + cb);
      u = wasm_v128_load(x + cb + 32);
    }
    wasm_v128_store(y + jj, glu4(j->alg, j->alpha, j->limit, g, u));
  }
  if (jj < I) { /* tail: the same vector formulas on a padded group */
    float gt[4] = { 0.0f, 0.0f, 0.0f, 0.0f }, ut[4] = { 0.0f, 0.0f, 0.0f, 0.0f }, out[4];
    for (int32_t l = 0; jj + l < I; l++) {
      const int32_t c = jj + l;
      const int32_t gc = j->layout == GLU_HALVES ? c : j->layout == GLU_INTERLEAVED ? 2 * c : 64 * (c / 32) + c % 32;
      const int32_t uc = j->layout == GLU_HALVES ? I + c : gc + (j->layout == GLU_INTERLEAVED ? 1 : 32);
      gt[l] = x[gc];
      ut[l] = x[uc];
    }
    wasm_v128_store(out, glu4(j->alg, j->alpha, j->limit, wasm_v128_load(gt), wasm_v128_load(ut)));
    for (int32_t l = 0; jj + l < I; l++) y[jj + l] = out[l];
  }
}

int run_moe_activation(op_head_t* h) {
  act_job_t* j = (act_job_t*)h;
  int32_t rows = j->rows;
  if (j->offs) {
    const int32_t n = ((const int32_t*)(uintptr_t)j->offs)[j->G];
    if (n < 0 || n > j->rows) { op_error(h, ERR_ACT_OFFS, j->G, n, j->rows); return 0; }
    rows = n;
  }
  int done = 0;
  for (int32_t t; (t = op_next_tile(h)) * ROWS_PER_TILE < rows; done++)
    for (int32_t r = t * ROWS_PER_TILE; r < MIN(rows, t * ROWS_PER_TILE + ROWS_PER_TILE); r++)
      row_act(j, (const float*)(uintptr_t)j->src + (size_t)r * (size_t)j->src_ld, (float*)(uintptr_t)j->dst + (size_t)r * (size_t)j->dst_ld);
  return done;
}
