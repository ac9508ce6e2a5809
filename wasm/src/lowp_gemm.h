#pragma once
/* Shared by the f32 x low-precision-weights microkernels (issue 12):
     f32-gemm-2x8w8-wasmsimd.c  8-bit codes decoded in registers (s8 u8 f8_e4m3 f8_e5m2)
     f32-gemm-2x8w4-wasmsimd.c  4-bit codes decoded in registers (s4 u4 f4_e2m1)
   The weights stay in their packed code layouts (gemm-lowp.c). Each weight is w' = decode(code), or
   (decode(code) - z[n]) * s[n] with the zero point and the K-varying scale of its K block: the fused
   path's B packing arithmetic (gemm-fused.c pack_b_f32). The accumulation is f32_gemm_4x8's: one chain
   per row and 4 columns, k in order, even k as MADD (FMA in the relaxed build), odd k as mul then add
   (k counted from the group's first k). So a packed low-precision matmul gives bitwise what the same
   weights give plain (decoded per tile into f32 panels), at any tile height and blocking; tiles of 3+
   rows decode each panel piece once into L1 and run f32_gemm_4x8 itself (gemm-lowp.c). */
#include "common.h"
#include "ukernel.h"
#include "tile_io.h"
#include "byte_tables.h"

/* A: 4-row micro-panels (driver.h), element (r, k) at a[4k + r]: the kernels take `a` pointing at
   their first row inside the micro-panel, so row r of the call is at byte 16k + 4r. */
#define LDA(p, off) wasm_v128_load32_splat((const char*)(p) + (off))

#define ACC_DECL                                                                        \
  const v128_t zero = wasm_f32x4_splat(0.0f);                                           \
  v128_t e00 = zero, e01 = zero, e10 = zero, e11 = zero;                                \
  float* c0 = c;                                                                        \
  float* c1 = c0 + ldc;                                                                 \
  if (accumulate) {                                                                     \
    load_row8(c0, nc, &e00, &e01);                                                      \
    if (R > 1) load_row8(c1, nc, &e10, &e11);                                           \
  }

#define ACC_STORE                          \
  if (R > 1) store_row8(c1, nc, e10, e11); \
  store_row8(c0, nc, e00, e01)

/* Both rows += x * w for the k whose A values sit at byte OFF of `a`: an even k (ODD = 0) as MADD, an
   odd one as mul then add (f32_gemm_4x8's pair (v + x0*w0) + x1*w1). */
#define STEP(ODD, OFF, w0, w1)                                                                         \
  do {                                                                                                 \
    const v128_t x0_ = LDA(a, OFF);                                                                    \
    if (!(ODD)) { e00 = MADD(x0_, w0, e00); e01 = MADD(x0_, w1, e01); }                                \
    else { e00 = wasm_f32x4_add(wasm_f32x4_mul(x0_, w0), e00); e01 = wasm_f32x4_add(wasm_f32x4_mul(x0_, w1), e01); } \
    if (R > 1) {                                                                                       \
      const v128_t x1_ = LDA(a, (OFF) + 4);                                                            \
      if (!(ODD)) { e10 = MADD(x1_, w0, e10); e11 = MADD(x1_, w1, e11); }                              \
      else { e10 = wasm_f32x4_add(wasm_f32x4_mul(x1_, w0), e10); e11 = wasm_f32x4_add(wasm_f32x4_mul(x1_, w1), e11); } \
    }                                                                                                  \
  } while (0)

/* Four f16 (u32 lanes) as f32, f16_to_f32's values: exponent rebiased by an integer add (normal),
   subnormals converted from their integer mantissa (no f32 subnormal operand: those take a slow
   microcode path on x64), Inf / NaN keep their payload. */
INLINE v128_t f16x4_to_f32(v128_t h) {
  const v128_t em = wasm_v128_and(h, wasm_i32x4_splat(0x7fff));
  const v128_t x = wasm_i32x4_shl(em, 13);
  v128_t r = wasm_i32x4_add(x, wasm_i32x4_splat(112 << 23));
  r = wasm_v128_bitselect(wasm_f32x4_mul(wasm_f32x4_convert_i32x4(em), wasm_f32x4_splat(0x1p-24f)), r, wasm_i32x4_lt(em, wasm_i32x4_splat(0x400)));
  r = wasm_v128_bitselect(wasm_v128_or(x, wasm_i32x4_splat(0x7f800000)), r, wasm_i32x4_gt(em, wasm_i32x4_splat(0x7bff)));
  return wasm_v128_or(r, wasm_i32x4_shl(wasm_v128_and(h, wasm_i32x4_splat(0x8000)), 16));
}

/* Eight int16 lanes (one k's 8 columns) as two f32x4. */
INLINE void i16_to_f32x8(v128_t h, v128_t* lo, v128_t* hi) {
  *lo = wasm_f32x4_convert_i32x4(wasm_i32x4_extend_low_i16x8(h));
  *hi = wasm_f32x4_convert_i32x4(wasm_i32x4_extend_high_i16x8(h));
}

/* Integer codes to f32 by the magic number (XNNPACK's "fmagic"): a u16 value c under the high half
   0x4B00 of a 32-bit lane reads as the f32 2^23 + c, so one interleave and one subtract of 2^23 + off
   give c - off exactly (|c - off| < 2^16, every step exact): the values widen + convert gave. The
   4-bit kernels use it on biased nibbles (s4 as code ^ 8 = value + 8, f4 through a table), which
   spares them the table lookup (s4 / u4) and the sign extensions: 1.1-1.3x bare-kernel CPU time.
   The 8-bit kernels keep widen + convert: the same scheme measured no faster there (within 5%). */
#define MAGIC_F32 0x1p23f
/* Keeps a loop-invariant vector in a local: clang otherwise re-emits v128.const inside the loop, which
   V8 materializes there again on every use. */
#define KEEP(v) __asm__("" : "+X"(v))
/* The conversion's constants, made once per call: zero bytes, the u16 magic 0x4B00, the bias
   2^23 + off (a splat) that the subtract removes, the byte xb that biases signed codes (xor) and the
   nibble mask. */
typedef struct { v128_t zero, m16, mb, xb, m4; } magic_t;
INLINE magic_t magic_consts(float off, int xb) {
  magic_t k = { wasm_i8x16_splat(0), wasm_i16x8_splat(0x4B00), wasm_f32x4_splat(MAGIC_F32 + off), wasm_i8x16_splat((int8_t)xb),
                wasm_i8x16_splat(0x0f) };
  KEEP(k.zero);
  KEEP(k.m16);
  KEEP(k.mb);
  if (xb) KEEP(k.xb);
  return k;
}
/* Eight u16 lanes (one k's 8 columns) minus off as two f32x4. */
INLINE void u16_to_f32x8(v128_t h, magic_t k, v128_t* lo, v128_t* hi) {
  *lo = wasm_f32x4_sub(wasm_i16x8_shuffle(h, k.m16, 0, 8, 1, 9, 2, 10, 3, 11), k.mb);
  *hi = wasm_f32x4_sub(wasm_i16x8_shuffle(h, k.m16, 4, 12, 5, 13, 6, 14, 7, 15), k.mb);
}
/* Bytes 0..7 / 8..15 zero-extended to u16 (punpcklbw / punpckhbw). */
INLINE v128_t u8lo_u16(v128_t b, magic_t k) {
  return wasm_i8x16_shuffle(b, k.zero, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
}
INLINE v128_t u8hi_u16(v128_t b, magic_t k) {
  return wasm_i8x16_shuffle(b, k.zero, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
}

/* The affine step on one k's two vectors (z0 z1 s0 s1 in scope). AFF: bit 0 the zero point (zq),
   bit 1 the scale (sq); a missing one is skipped, which is exact: w - 0 = w and w * 1 = w. */
#define AFFINE(w0, w1)                                  \
  if (AFF & 1) {                                        \
    w0 = wasm_f32x4_sub(w0, z0);                        \
    w1 = wasm_f32x4_sub(w1, z1);                        \
  }                                                     \
  if (AFF & 2) {                                        \
    w0 = wasm_f32x4_mul(w0, s0);                        \
    w1 = wasm_f32x4_mul(w1, s1);                        \
  }

#define AFF_DECL                                            \
  v128_t z0 = zero, z1 = zero, s0 = zero, s1 = zero;        \
  if (AFF & 1) {                                            \
    z0 = wasm_v128_load(zq);                                \
    z1 = wasm_v128_load(zq + 4);                            \
  }                                                         \
  if (AFF & 2) {                                            \
    s0 = wasm_v128_load(sq);                                \
    s1 = wasm_v128_load(sq + 4);                            \
  }

/* The kernels' AFF code for these arguments. */
#define AFF_CODE(zq, sq) (((zq) != 0) | ((sq) != 0) << 1)

/* Calls MACRO(ARGS..., aff) with aff a constant 0..3. */
#define AFF_SWITCH(aff, MACRO, ...)          \
  switch (aff) {                             \
    case 0: MACRO(__VA_ARGS__, 0) break;     \
    case 1: MACRO(__VA_ARGS__, 1) break;     \
    case 2: MACRO(__VA_ARGS__, 2) break;     \
    default: MACRO(__VA_ARGS__, 3) break;    \
  }

/* One row x two panels (16 columns, C contiguous): four independent chains per k instead of two, for
   1-row tiles (decode), where one panel's two chains left the kernel latency-bound; each column's
   chain is the same as in the 1-panel kernels, so results do not change. */
#define ACC16_DECL                                                           \
  const v128_t zero = wasm_f32x4_splat(0.0f);                                \
  v128_t e00 = zero, e01 = zero, e02 = zero, e03 = zero;                     \
  if (accumulate) {                                                          \
    load_row8(c, nc1, &e00, &e01);                                           \
    load_row8(c + 8, nc2, &e02, &e03);                                       \
  }

#define ACC16_STORE                   \
  store_row8(c, nc1, e00, e01);        \
  store_row8(c + 8, nc2, e02, e03)

#define STEP16(ODD, OFF, w0, w1, w2, w3)                                                          \
  do {                                                                                            \
    const v128_t x0_ = LDA(a, OFF);                                                               \
    if (!(ODD)) {                                                                                 \
      e00 = MADD(x0_, w0, e00); e01 = MADD(x0_, w1, e01); e02 = MADD(x0_, w2, e02); e03 = MADD(x0_, w3, e03); \
    } else {                                                                                      \
      e00 = wasm_f32x4_add(wasm_f32x4_mul(x0_, w0), e00); e01 = wasm_f32x4_add(wasm_f32x4_mul(x0_, w1), e01); \
      e02 = wasm_f32x4_add(wasm_f32x4_mul(x0_, w2), e02); e03 = wasm_f32x4_add(wasm_f32x4_mul(x0_, w3), e03); \
    }                                                                                             \
  } while (0)

#define AFF16_DECL                                                                                  \
  v128_t z0 = zero, z1 = zero, s0 = zero, s1 = zero, z2 = zero, z3 = zero, s2 = zero, s3 = zero;  \
  if (AFF & 1) { z0 = wasm_v128_load(zq); z1 = wasm_v128_load(zq + 4); z2 = wasm_v128_load(zq + 8); z3 = wasm_v128_load(zq + 12); } \
  if (AFF & 2) { s0 = wasm_v128_load(sq); s1 = wasm_v128_load(sq + 4); s2 = wasm_v128_load(sq + 8); s3 = wasm_v128_load(sq + 12); }

#define AFFINE16(w0, w1, w2, w3)                                                                       \
  if (AFF & 1) { w0 = wasm_f32x4_sub(w0, z0); w1 = wasm_f32x4_sub(w1, z1); w2 = wasm_f32x4_sub(w2, z2); w3 = wasm_f32x4_sub(w3, z3); } \
  if (AFF & 2) { w0 = wasm_f32x4_mul(w0, s0); w1 = wasm_f32x4_mul(w1, s1); w2 = wasm_f32x4_mul(w2, s2); w3 = wasm_f32x4_mul(w3, s3); }
