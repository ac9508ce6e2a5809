/* Integer decode microkernels for 8-bit weights (issue 19): 1 row x 2 x8:p8 panels (16 columns) and 2 rows x
   1 panel, exact int32 sums, with one byte shuffle per 8 columns x 2 k instead of the widen + interleave of
   s16_gemm_3x8w8 / s16_dq_1x8 (2 shuffles instead of 4 per 16 weights: the scheme of
   s16-gemm-1x16w4-wasmsimd.c applied to x8 codes).

   Weights: 16 bytes of a panel = the 8 codes of k, then those of k + 1. One swizzle (indices with bit 7
   set give 0) puts, in the 32-bit lane of column q, the int16 pair (code(k, q), code(k + 1, q)): u8 codes
   zero-extended (the low byte), s8 codes as 256 x code (the high byte, the low one 0: the sign comes with
   the byte, no bias and no activation sum); i32x4.dot_i16x8_s with the row's int16 k-pair [x_k | x_k+1]
   (the 3-row micro-panel's row, one i32 splat) adds the column's two products (s8: 256x). s8 sums are
   taken over chunks of at most 256 k, whose 256x sums fit int32 (|x| <= 255, |code| <= 128:
   255 x 128 x 256 x 256 < 2^31), shifted back exactly and added. Integer sums do not depend on the order:
   bitwise s16_gemm_3x8w8 / s16_dq_1x8. Bounds: 8-bit src (|x| <= 255) and kc <= 32768
   (255 x 255 x 32768 < 2^31; the caller checks). */
#include "common.h"
#include "ukernel.h"
#include "tile_io.h"
#include "dq_row16.h"

#define DOT(a, b, acc) wasm_i32x4_add((acc), wasm_i32x4_dot_i16x8((a), (b)))
#define KEEP(v) __asm__("" : "+r"(v))

/* The swizzles placing 8 code bytes of k and k + 1 as int16 pairs per column (columns 0-3 / 4-7): u8 in the
   low bytes, s8 in the high ones (256 x code). */
#define DQ8_CONSTANTS(S8_)                                                                                            \
  v128_t i0 = wasm_i8x16_const(0, -128, 8, -128, 1, -128, 9, -128, 2, -128, 10, -128, 3, -128, 11, -128);               \
  v128_t i1 = wasm_i8x16_const(4, -128, 12, -128, 5, -128, 13, -128, 6, -128, 14, -128, 7, -128, 15, -128);             \
  if (S8_) {                                                                                                           \
    i0 = wasm_i8x16_const(-128, 0, -128, 8, -128, 1, -128, 9, -128, 2, -128, 10, -128, 3, -128, 11);                   \
    i1 = wasm_i8x16_const(-128, 4, -128, 12, -128, 5, -128, 13, -128, 6, -128, 14, -128, 7, -128, 15);                 \
  }                                                                                                                    \
  KEEP(i0);                                                                                                            \
  KEEP(i1)

/* s8: k per chunk of exact 256x sums; u8: no chunks. */
#define DQ8_CHUNK(S8_) ((S8_) ? (size_t)256 : (size_t)1 << 30)

/* The chunk's sums t (s8: 256x, back by an arithmetic shift) added to v; DQ8_ADD4: t0..t3 into v0..v3. */
INLINE v128_t dq8_add(const int S8, v128_t v, v128_t t) { return wasm_i32x4_add(v, S8 ? wasm_i32x4_shr(t, 8) : t); }
#define DQ8_ADD4                  \
  do {                            \
    v0 = dq8_add(S8, v0, t0);     \
    v1 = dq8_add(S8, v1, t1);     \
    v2 = dq8_add(S8, v2, t2);     \
    v3 = dq8_add(S8, v3, t3);     \
  } while (0)

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
  DQ8_CONSTANTS(S8);
  DQ16_F_INIT
  for (size_t k = 0; k < kc; k += blk) {
    const size_t len = kc - k < blk ? kc - k : blk;
    v128_t v0 = zero, v1 = zero, v2 = zero, v3 = zero;
    for (size_t y = 0; y < len; y += DQ8_CHUNK(S8)) {
      const size_t n2 = ((len - y < DQ8_CHUNK(S8) ? len - y : DQ8_CHUNK(S8))) / 2;
      v128_t t0 = zero, t1 = zero, t2 = zero, t3 = zero;
      for (size_t n = n2; n; n--) {
        const v128_t r = wasm_v128_load(w), q = wasm_v128_load(u);
        const v128_t x = LDS(a, 0);
        t0 = DOT(wasm_i8x16_swizzle(r, i0), x, t0);
        t1 = DOT(wasm_i8x16_swizzle(r, i1), x, t1);
        t2 = DOT(wasm_i8x16_swizzle(q, i0), x, t2);
        t3 = DOT(wasm_i8x16_swizzle(q, i1), x, t3);
        w += 16;
        u += 16;
        a += 2 * MR_INT;
      }
      DQ8_ADD4;
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

/* 2 rows x one x8 panel, int32 sums (C rows c, c + ldc (+)= sums; nc columns): the decode tiles of experts with
   two rows. Each 16 code bytes are placed once for both rows; a: the rows' int16 k-pairs of a 3-row micro-panel
   (row 0 at a, row 1 at a + 2). */
INLINE void dq8_rows2(const int S8, size_t nc, size_t kc, const int16_t* restrict a, const uint8_t* restrict w, int32_t* restrict c,
                      size_t ldc, int acc) {
  const size_t z = (size_t)((uint32_t)kc >> 31);
  a = a + z;
  w = w + z;
  DQ8_CONSTANTS(S8);
  const v128_t zero = wasm_i32x4_splat(0);
  v128_t v0 = zero, v1 = zero, v2 = zero, v3 = zero;
  for (size_t y = 0; y < kc; y += DQ8_CHUNK(S8)) {
    const size_t n2 = ((kc - y < DQ8_CHUNK(S8) ? kc - y : DQ8_CHUNK(S8))) / 2;
    v128_t t0 = zero, t1 = zero, t2 = zero, t3 = zero;
    for (size_t n = n2; n; n--) {
      const v128_t r = wasm_v128_load(w);
      const v128_t p0 = wasm_i8x16_swizzle(r, i0), p1 = wasm_i8x16_swizzle(r, i1);
      const v128_t x0 = LDS(a, 0), x1 = LDS(a, 4);
      t0 = DOT(p0, x0, t0);
      t1 = DOT(p1, x0, t1);
      t2 = DOT(p0, x1, t2);
      t3 = DOT(p1, x1, t3);
      w += 16;
      a += 2 * MR_INT;
    }
    DQ8_ADD4;
  }
  dq_store_rows2(c, ldc, nc, acc, v0, v1, v2, v3);
}

void s16_dq_2x8w8(size_t nc, size_t kc, const int16_t* restrict a, const uint8_t* restrict w, int32_t* restrict c, size_t ldc, int acc,
                  int dt) {
  if (dt == DT_S8) dq8_rows2(1, nc, kc, a, w, c, ldc, acc);
  else dq8_rows2(0, nc, kc, a, w, c, ldc, acc);
}
