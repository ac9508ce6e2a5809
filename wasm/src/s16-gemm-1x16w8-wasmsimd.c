/* Integer decode microkernel for 8-bit weights (issue 19): 1 row x 2 x8:p8 panels (16 columns), exact
   int32 sums, with one byte shuffle per 8 columns x 2 k instead of the widen + interleave of
   s16_gemm_3x8w8 / s16_dq_1x8 (2 shuffles instead of 4 per 16 weights: the scheme of
   s16-gemm-1x16w4-wasmsimd.c applied to x8 codes).

   Weights: 16 bytes of a panel = the 8 codes of k, then those of k + 1. One swizzle (indices with bit 7
   set give 0) puts, in the 32-bit lane of column q, the int16 pair (code(k, q), code(k + 1, q)) zero-
   extended; i32x4.dot_i16x8_s with the row's int16 k-pair [x_k | x_k+1] (the 3-row micro-panel's row 0,
   one i32 splat) adds the column's two products. s8 codes are biased by xor 0x80 (code + 128 in
   [0, 255]) and 128 x the block's activation sum (one more dot, with ones) is subtracted. Integer sums do
   not depend on the order: bitwise s16_gemm_3x8w8 / s16_dq_1x8. Bounds: 8-bit src (|x| <= 255) and
   kc <= 32768 (255 x 255 x 32768 < 2^31; the caller checks). */
#include "common.h"
#include "ukernel.h"
#include "tile_io.h"
#include "dq_row16.h"

#define DOT(a, b, acc) wasm_i32x4_add((acc), wasm_i32x4_dot_i16x8((a), (b)))
#define KEEP(v) __asm__("" : "+r"(v))

/* kc k (even) of one row x two panels (w, w + ps) in blocks of blk k (even; the last may be shorter): as
   s16_dq_1x16w4 (sc = 0: int32 C (+)= sums, one block; else blocks folded in f32 with their 8 + 8 scales at
   sc + 8 b and sc + sps + 8 b, F = p0 when first, else F + p_b). a: the row's int16 k-pairs, 3 apart. */
INLINE void dq8_row16(const int S8, size_t nc1, size_t nc2, size_t kc, size_t blk, const int16_t* restrict a,
                      const uint8_t* restrict w, size_t ps, const float* restrict sc, size_t sps, void* restrict c, int acc,
                      int first) {
  const size_t z = (size_t)((uint32_t)kc >> 31);
  a = a + z;
  w = w + z;
  const uint8_t* u = w + ps;
  v128_t i0 = wasm_i8x16_const(0, -128, 8, -128, 1, -128, 9, -128, 2, -128, 10, -128, 3, -128, 11, -128);
  v128_t i1 = wasm_i8x16_const(4, -128, 12, -128, 5, -128, 13, -128, 6, -128, 14, -128, 7, -128, 15, -128);
  v128_t xb = wasm_i8x16_splat((int8_t)0x80), ones = wasm_i16x8_splat(1);
  KEEP(i0);
  KEEP(i1);
  if (S8) {
    KEEP(xb);
    KEEP(ones);
  }
  DQ16_F_INIT
  for (size_t k = 0; k < kc; k += blk) {
    const size_t len = kc - k < blk ? kc - k : blk;
    v128_t v0 = zero, v1 = zero, v2 = zero, v3 = zero, sx = zero;
    for (size_t n = len / 2; n; n--) {
      v128_t r = wasm_v128_load(w), q = wasm_v128_load(u);
      if (S8) {
        r = wasm_v128_xor(r, xb);
        q = wasm_v128_xor(q, xb);
      }
      const v128_t x = LDS(a, 0);
      v0 = DOT(wasm_i8x16_swizzle(r, i0), x, v0);
      v1 = DOT(wasm_i8x16_swizzle(r, i1), x, v1);
      v2 = DOT(wasm_i8x16_swizzle(q, i0), x, v2);
      v3 = DOT(wasm_i8x16_swizzle(q, i1), x, v3);
      if (S8) sx = DOT(x, ones, sx);
      w += 16;
      u += 16;
      a += 2 * MR_INT;
    }
    if (S8) { /* every lane of sx: the block's activation sum */
      const v128_t bias = wasm_i32x4_shl(sx, 7);
      v0 = wasm_i32x4_sub(v0, bias);
      v1 = wasm_i32x4_sub(v1, bias);
      v2 = wasm_i32x4_sub(v2, bias);
      v3 = wasm_i32x4_sub(v3, bias);
    }
    DQ16_BLOCK_END;
  }
  DQ16_F_STORE
}

void s16_dq_1x16w8(size_t nc1, size_t nc2, size_t kc, size_t blk, const int16_t* restrict a, const uint8_t* restrict w, size_t ps,
                   const float* restrict sc, size_t sps, void* restrict c, int acc, int first, int dt) {
  if (dt == DT_S8) dq8_row16(1, nc1, nc2, kc, blk ? blk : kc, a, w, ps, sc, sps, c, acc, first);
  else dq8_row16(0, nc1, nc2, kc, blk ? blk : kc, a, w, ps, sc, sps, c, acc, first);
}
