#pragma once
/* Decoders by byte tables (i8x16.swizzle): the f4_e2m1 nibble table and f8_e4m3 in byte planes. Shared by
   the f32 x low-precision kernels and the embedded-scales decoder (gemm-lowp.c). */
#include "common.h"
#include "job.h"

/* f4_e2m1 codes (nibbles) as 2 value + 16: 0, 1, 2, 3, 4, 6, 8, 12 and negatives, biased to 4..28 (one
   16-entry table lookup; halved after the conversion, exact). */
#define F4_LUT wasm_i8x16_const(16, 17, 18, 19, 20, 22, 24, 28, 16, 15, 14, 13, 12, 10, 8, 4)
/* Table lookup of nibbles (indices 0..15, so the relaxed build's one-instruction swizzle is exact). */
INLINE v128_t lut_nibbles(v128_t lut, v128_t idx) {
#ifdef RELAXED
  return (v128_t)__builtin_wasm_relaxed_swizzle_i8x16((__i8x16)lut, (__i8x16)idx);
#else
  return wasm_i8x16_swizzle(lut, idx);
#endif
}

/* fp8 by byte planes (session 18). f8_e4m3: for 16 codes at once, the high byte (sign, exponent's top 7 bits)
   and the next byte (exponent's low bit, 3 mantissa bits) of each f32 come from byte tables, then two
   interleaves place them in the top half of each lane (the lower 16 bits of an e4m3 value are 0):
   - normal (e >= 1): hi = (e + 120) >> 1 (table on e), lo = (code & 0x0f) << 4;
   - subnormal (e = 0): hi from a table on the 7-bit magnitude (entries 0-7; an index of 16 or more gives 0
     under i8x16.swizzle, so only e = 0 picks them), and lo corrected by a second such table (xor);
   - NaN (S.1111.111): hi | 0x7f, lo 0xf0 ^ 0x30: 0x7fc00000 with the sign, lowp.h's f8e4m3_to_f32.
   About 25 operations per 16 codes instead of the former per-lane decoder's ~70 (widen to u32, exponent
   rebased per lane, subnormal and NaN selects): the same values, so the same bits; decode with fp8 weights
   2.0x faster (session 18). */
typedef struct { v128_t lo, hi; } fp8_planes_t;

INLINE fp8_planes_t e4m3_planes(v128_t c) {
  const v128_t lut_e = wasm_i8x16_const(0, 60, 61, 61, 62, 62, 63, 63, 64, 64, 65, 65, 66, 66, 67, 67);
  const v128_t lut_sh = wasm_i8x16_const(0, 59, 59, 59, 60, 60, 60, 60, 0, 0, 0, 0, 0, 0, 0, 0);
  const v128_t lut_sl = wasm_i8x16_const(0, 0x10, (int8_t)0xa0, (int8_t)0xf0, 0x40, 0x70, 0x20, 0x10, 0, 0, 0, 0, 0, 0, 0, 0);
  const v128_t m7 = wasm_v128_and(c, wasm_i8x16_splat(0x7f));
  const v128_t e = wasm_v128_and(wasm_u16x8_shr(c, 3), wasm_i8x16_splat(0x0f)); /* the u16 shift's spill lands in bits 5-7 */
  const v128_t nan = wasm_i8x16_eq(m7, wasm_i8x16_splat(0x7f));
  fp8_planes_t p;
  p.hi = wasm_v128_or(wasm_v128_or(lut_nibbles(lut_e, e), wasm_i8x16_swizzle(lut_sh, m7)),
                      wasm_v128_or(wasm_v128_and(c, wasm_i8x16_splat((int8_t)0x80)), wasm_v128_and(nan, wasm_i8x16_splat(0x7f))));
  p.lo = wasm_v128_xor(wasm_v128_and(wasm_i16x8_shl(c, 4), wasm_i8x16_splat((int8_t)0xf0)),
                       wasm_v128_xor(wasm_i8x16_swizzle(lut_sl, m7), wasm_v128_and(nan, wasm_i8x16_splat(0x30))));
  return p;
}

/* f8_e5m2 (the top byte of an f16) the same way: hi = (e + 112) >> 1 from two tables on the 5-bit exponent
   (e < 16 and e - 16; the other one's index is out of range: 0), lo = (code & 7) << 5; e = 0 (subnormals
   m 2^-16) by tables on the 7-bit magnitude as for e4m3; e = 31: hi 0x7f, and lo keeps 0x80 | m << 5, so Inf
   and NaN carry the half's payload (lowp.h f16_to_f32). */
INLINE fp8_planes_t e5m2_planes(v128_t c) {
  const v128_t lut_e0 = wasm_i8x16_const(0, 56, 57, 57, 58, 58, 59, 59, 60, 60, 61, 61, 62, 62, 63, 63);
  const v128_t lut_e1 = wasm_i8x16_const(64, 64, 65, 65, 66, 66, 67, 67, 68, 68, 69, 69, 70, 70, 71, 0x7f);
  const v128_t lut_sh = wasm_i8x16_const(0, 55, 56, 56, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
  const v128_t lut_sl = wasm_i8x16_const(0, (int8_t)0xa0, 0x40, 0x20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
  const v128_t m7 = wasm_v128_and(c, wasm_i8x16_splat(0x7f));
  const v128_t e = wasm_v128_and(wasm_u16x8_shr(c, 2), wasm_i8x16_splat(0x1f)); /* the u16 shift's spill lands in bits 6-7 */
  fp8_planes_t p;
  p.hi = wasm_v128_or(wasm_v128_or(wasm_i8x16_swizzle(lut_e0, e), wasm_i8x16_swizzle(lut_e1, wasm_i8x16_sub(e, wasm_i8x16_splat(16)))),
                      wasm_v128_or(wasm_i8x16_swizzle(lut_sh, m7), wasm_v128_and(c, wasm_i8x16_splat((int8_t)0x80))));
  p.lo = wasm_v128_xor(wasm_v128_and(wasm_i16x8_shl(c, 5), wasm_i8x16_splat((int8_t)0xe0)), wasm_i8x16_swizzle(lut_sl, m7));
  return p;
}

INLINE fp8_planes_t fp8_planes(const int DT, v128_t c) { return DT == DT_F8_E4M3 ? e4m3_planes(c) : e5m2_planes(c); }

/* The 8 values of codes 8 HALF .. 8 HALF + 7 of the planes as two f32x4. */
INLINE void fp8_half(fp8_planes_t p, const int HALF, v128_t* w0, v128_t* w1) {
  const v128_t v = HALF ? wasm_i8x16_shuffle(p.lo, p.hi, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31)
                        : wasm_i8x16_shuffle(p.lo, p.hi, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const v128_t z = wasm_i16x8_splat(0);
  *w0 = wasm_i16x8_shuffle(z, v, 0, 8, 1, 9, 2, 10, 3, 11);
  *w1 = wasm_i16x8_shuffle(z, v, 4, 12, 5, 13, 6, 14, 7, 15);
}

/* 16 one-byte block scales (two K blocks' 8 columns: MXFP4's e8m0, NVFP4's f8_e4m3) as f32 times t (a power of
   two: exact), w[0..1] the first block's, w[2..3] the second's: the values load_any gives (e8m0 2^(c - 127),
   0x00 = 2^-127, 0xFF = NaN), then the product. Without 0x00 / 0xFF among them an e8m0 is a shift. */
INLINE void scales16_b1(v128_t c, int dt, v128_t t, v128_t w[4]) {
  if (dt == DT_E8M0) {
    const v128_t lo = wasm_u16x8_extend_low_u8x16(c), hi = wasm_u16x8_extend_high_u8x16(c);
    v128_t e[4] = { wasm_u32x4_extend_low_u16x8(lo), wasm_u32x4_extend_high_u16x8(lo), wasm_u32x4_extend_low_u16x8(hi),
                    wasm_u32x4_extend_high_u16x8(hi) };
    const int special = wasm_v128_any_true(wasm_v128_or(wasm_i8x16_eq(c, wasm_i8x16_splat(0)), wasm_i8x16_eq(c, wasm_i8x16_splat(-1))));
    for (int q = 0; q < 4; q++) {
      w[q] = wasm_i32x4_shl(e[q], 23);
      if (special) {
        w[q] = wasm_v128_bitselect(wasm_i32x4_splat(0x00400000), w[q], wasm_i32x4_eq(e[q], wasm_i32x4_splat(0)));
        w[q] = wasm_v128_bitselect(wasm_i32x4_splat(0x7fc00000), w[q], wasm_i32x4_eq(e[q], wasm_i32x4_splat(255)));
      }
    }
  } else {
    const fp8_planes_t pl = e4m3_planes(c);
    fp8_half(pl, 0, &w[0], &w[1]);
    fp8_half(pl, 1, &w[2], &w[3]);
  }
  for (int q = 0; q < 4; q++) w[q] = wasm_f32x4_mul(w[q], t);
}
