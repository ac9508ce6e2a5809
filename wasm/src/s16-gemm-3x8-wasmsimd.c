/* Integer GEMM microkernel, up to 3 rows (MR_INT, common.h: 4 rows spill an accumulator under V8) x
   8 columns, exact int32 accumulation of int16 products (1- and 2-row instances serve the last rows
   of a group: a padded row cost a whole one).
   A: a micro-panel of 3 rows x kc int16 (kc even): k-pair t of row r is the i32 at a + 2 * (3t + r)
      (one stream, as in the f32 kernel); the tile's src rows, already widened (s8/u8 minus the src
      zero point, or raw when the zero point is applied as a compensation).
   W: one 8-column panel of kc/2 k-pairs; k-pair t is 16 int16 = two vectors:
      [w(2t,0) w(2t+1,0) w(2t,1) w(2t+1,1) w(2t,2) w(2t+1,2) w(2t,3) w(2t+1,3)] and the same for
      columns 4..7. An odd K is padded with a zero k (in A and W).
   Each k-pair of a row is one i32 (two int16) splat across the vector; i32x4.dot_i16x8_s
   (x64: pmaddwd) multiplies it with a weight vector and adds adjacent products: 4 columns x 2 k in
   one instruction, added to an i32x4 accumulator. Products of int16 never overflow int32 except
   (-32768)^2 * 2, which the widened 8/4-bit data cannot produce; the sums wrap modulo 2^32 like any
   int32 accumulator (exact whenever the true result fits in int32).
   C (+)= A * W in int32: the per-tile epilogue (scales, bias, post-ops) runs later on the C tile. */
#include "common.h"
#include "ukernel.h"
#include "tile_io.h"

#define DOT(a, b, acc) wasm_i32x4_add((acc), wasm_i32x4_dot_i16x8((a), (b)))

/* The kernel for R = 1..3 rows (a constant after inlining; rows a short tile lacks are not computed). */
INLINE void s16_rows(const int R, size_t nc, size_t kc, const int16_t* restrict a, const int16_t* restrict w,
                     int32_t* restrict c, size_t ldc, int accumulate) {
  /* 0 for every valid call; makes the pointers i32.add results V8 knows are zero-extended. */
  const size_t z = (size_t)((uint32_t)kc >> 31);
  a = a + z;
  int32_t* c0 = c;
  int32_t* c1 = c0 + ldc;
  int32_t* c2 = c1 + ldc;
  w = w + z;

  const v128_t zero = wasm_i32x4_splat(0);
  v128_t v00 = zero, v01 = zero, v10 = zero, v11 = zero, v20 = zero, v21 = zero;
  if (accumulate) {
    load_row8(c0, nc, &v00, &v01);
    if (R > 1) load_row8(c1, nc, &v10, &v11);
    if (R > 2) load_row8(c2, nc, &v20, &v21);
  }

  /* Two k-pairs per iteration, shaped like the f32 kernel: the 4 weight vectors first, then per row
     the two A splats and the row's math: 6 accumulators + 4 weights + 2 splats + 2 products fit V8's
     15 xmm registers. A trailing k-pair (kc / 2 odd) takes the one-pair step. */
  size_t n = kc / 4;
  if (n) do {
    const v128_t b0 = LDV(w, 0);
    const v128_t b2 = LDV(w, 32);
    const v128_t b1 = LDV(w, 16);
    const v128_t b3 = LDV(w, 48);
    v128_t x00, x01, x10 = zero, x11 = zero, x20 = zero, x21 = zero;
    x00 = LDS(a, 0);
    x01 = LDS(a, 4 * MR_INT);
    if (R > 1) { x10 = LDS(a, 4); x11 = LDS(a, 4 * MR_INT + 4); }
    if (R > 2) { x20 = LDS(a, 8); x21 = LDS(a, 4 * MR_INT + 8); }
    v00 = DOT(x01, b2, DOT(x00, b0, v00));
    v01 = DOT(x01, b3, DOT(x00, b1, v01));
    if (R > 1) { v10 = DOT(x11, b2, DOT(x10, b0, v10)); v11 = DOT(x11, b3, DOT(x10, b1, v11)); }
    if (R > 2) { v20 = DOT(x21, b2, DOT(x20, b0, v20)); v21 = DOT(x21, b3, DOT(x20, b1, v21)); }
    w += 32;
    a += 4 * MR_INT;
  } while (--n);
  if (kc & 2) {
    const v128_t b0 = wasm_v128_load(w);
    const v128_t b1 = wasm_v128_load(w + 8);
    const v128_t x0 = wasm_v128_load32_splat(a);
    v00 = DOT(x0, b0, v00);
    v01 = DOT(x0, b1, v01);
    if (R > 1) {
      const v128_t x1 = wasm_v128_load32_splat(a + 2);
      v10 = DOT(x1, b0, v10);
      v11 = DOT(x1, b1, v11);
    }
    if (R > 2) {
      const v128_t x2 = wasm_v128_load32_splat(a + 4);
      v20 = DOT(x2, b0, v20);
      v21 = DOT(x2, b1, v21);
    }
  }
  if (R > 2) store_row8(c2, nc, v20, v21);
  if (R > 1) store_row8(c1, nc, v10, v11);
  store_row8(c0, nc, v00, v01);
}

void s16_gemm_3x8(size_t mr, size_t nc, size_t kc, const int16_t* restrict a, const int16_t* restrict w,
                  int32_t* restrict c, size_t ldc, int accumulate) {
  switch (mr) {
    case 3: s16_rows(3, nc, kc, a, w, c, ldc, accumulate); break;
    case 2: s16_rows(2, nc, kc, a, w, c, ldc, accumulate); break;
    default: s16_rows(1, nc, kc, a, w, c, ldc, accumulate); break;
  }
}
