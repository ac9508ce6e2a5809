/* Plain weights packed once per call (issue 12): the fast and fused f32 paths used to pack plain
   (`abc` / `acb`) weights per tile in K blocks of KC, with scalar loads, so every M-block of a group
   repacked its N-block and K = 2048 paid the L2 aliasing that K-whole blocking avoids on packed
   panels (driver.h k_block). Now a worker packs the tile's N-block once, K whole, into its cache
   (job.wcache_k) and keeps it while its next tiles read the same block (tiles are numbered N-block
   major, M-block minor): the kernels then read it exactly like `f32:p8` panels. */
#include "common.h"
#include "job.h"
#include "driver.h"
#include "lowp.h"
#include "tile_io.h"

#ifndef WC_AHEAD
#define WC_AHEAD 16
#endif

/* Full panels of f32 rows (n stride 1, `abc`): k outer, so each weight row is read as one
   contiguous run of 8 x full floats (rows are N floats apart: a panel-by-panel walk touched a new
   page for every 32 bytes and the prefetcher could not follow; MoE-B 436 -> see README). `ahead`:
   read rows WC_AHEAD ahead first, for N-blocks (runs of a row, each in another page); whole rows
   are one stream the hardware prefetcher follows, and the extra loads only cost (MoE-B abc 0.92 ->
   0.85 with them). */
static void pack_rows_f32(const float* w, size_t s0, int32_t K, int32_t full, size_t ps, float* o, int ahead) {
  for (int32_t k = 0; k < K; k++) {
    const float* r = w + (size_t)k * s0;
    float* d = o + (size_t)k * NR;
    if (ahead && k + WC_AHEAD < K) { /* read-ahead of a later row (wasm has no prefetch; tile_io.h touch_range) */
      const float* ra = r + (size_t)WC_AHEAD * s0;
      for (int32_t p = 0; p < full; p += 2) TOUCH(ra + p * NR, 0);
    }
    for (int32_t p = 0; p < full; p++) {
      wasm_v128_store(d + (size_t)p * ps, wasm_v128_load(r + p * NR));
      wasm_v128_store(d + (size_t)p * ps + 4, wasm_v128_load(r + p * NR + 4));
    }
  }
}

/* 8 columns of K contiguous f32 each (k stride 1, column stride s1: `acb`): 4x4 transposes. */
static void pack_cols_f32(const float* w, size_t s1, int32_t K, float* o) {
  int32_t k = 0;
  for (; k + 4 <= K; k += 4) {
    for (int h = 0; h < 2; h++) {
      const float* c = w + (size_t)(4 * h) * s1 + k;
      const v128_t r0 = wasm_v128_load(c), r1 = wasm_v128_load(c + s1);
      const v128_t r2 = wasm_v128_load(c + 2 * s1), r3 = wasm_v128_load(c + 3 * s1);
      const v128_t t0 = wasm_i32x4_shuffle(r0, r1, 0, 4, 1, 5), t1 = wasm_i32x4_shuffle(r2, r3, 0, 4, 1, 5);
      const v128_t t2 = wasm_i32x4_shuffle(r0, r1, 2, 6, 3, 7), t3 = wasm_i32x4_shuffle(r2, r3, 2, 6, 3, 7);
      float* d = o + (size_t)k * NR + 4 * h;
      wasm_v128_store(d, wasm_i64x2_shuffle(t0, t1, 0, 2));
      wasm_v128_store(d + NR, wasm_i64x2_shuffle(t0, t1, 1, 3));
      wasm_v128_store(d + 2 * NR, wasm_i64x2_shuffle(t2, t3, 0, 2));
      wasm_v128_store(d + 3 * NR, wasm_i64x2_shuffle(t2, t3, 1, 3));
    }
  }
  for (; k < K; k++)
    for (int32_t q = 0; q < NR; q++) o[(size_t)k * NR + q] = w[(size_t)q * s1 + k];
}

/* Columns [n0, n0 + nc), k in [k0, k0 + kc) of plain float weights into panels [ceil(nc/8)][kc][8],
   zero padded. */
static void pack_block(const operand_t* B, int32_t k0, int32_t kc, int32_t n0, int32_t nc, size_t ps, float* out, int ahead) {
  const int32_t npan = cdiv(nc, NR);
  int32_t p = 0;
  if (B->dt == DT_F32 && B->s1 == 1) { /* abc: every full panel in one row-major walk */
    p = nc / NR;
    pack_rows_f32((const float*)B->base + B->off + (size_t)k0 * B->s0 + (size_t)n0, (size_t)B->s0, kc, p, ps, out, ahead);
  }
  for (; p < npan; p++) {
    float* o = out + (size_t)p * ps;
    const int32_t nb = n0 + p * NR, cnt = MIN(NR, nc - p * NR);
    const size_t i0 = B->off + (size_t)k0 * B->s0 + (size_t)nb * B->s1;
    if (B->dt == DT_F32 && cnt == NR && B->s0 == 1) pack_cols_f32((const float*)B->base + i0, (size_t)B->s1, kc, o);
    else
      for (int32_t k = 0; k < kc; k++)
        for (int32_t q = 0; q < NR; q++)
          o[(size_t)k * NR + q] = q < cnt ? load_elem(B->base, B->dt, i0 + (size_t)k * B->s0 + (size_t)q * B->s1) : 0.0f;
  }
}

void pack_plain_block(const group_view_t* v, int32_t k0, int32_t kc, int32_t n0, int32_t nc, float* out) {
  pack_block(&v->B, k0, kc, n0, nc, (size_t)kc * NR, out, 1);
}

void pack_plain_panels(const group_view_t* v, int32_t k0, int32_t kc, int32_t n0, int32_t nc, size_t ps, float* out) {
  pack_block(&v->B, k0, kc, n0, nc, ps, out, 0);
}

const float* plain_wcache(const job_t* j, scratch_t* s, const group_view_t* v, int32_t n0, int32_t nc) {
  const int32_t Kg = v->Kg;
  if (v->wpacked || Kg > j->wcache_k || Kg <= 0) return 0;
  const operand_t B = v->B;
  if (s->w_base == B.base && s->w_off == B.off && s->w_g == v->g && s->w_n0 == n0 && s->w_nc == nc && s->w_kg == Kg)
    return s->wcache;
  pack_block(&B, 0, Kg, n0, nc, wcache_stride(Kg), s->wcache, 1);
  s->w_base = B.base;
  s->w_off = B.off;
  s->w_g = v->g;
  s->w_n0 = n0;
  s->w_nc = nc;
  s->w_kg = Kg;
  return s->wcache;
}
