/* f32 x 4-bit weights GEMM microkernel (issue 12): up to 2 rows x 8 columns, A f32 (4-row micro-panel,
   lowp_gemm.h), W one 8-column panel of 4-bit codes in k-pairs (layout `x4:p8k2`, gemm-lowp.c): byte q
   of pair t = code(2t, q) | code(2t + 1, q) << 4. One 8-byte load holds a k-pair; the nibbles are
   split (and, shift), put side by side (one shuffle) and mapped to int8 values by one 16-entry table
   lookup (i8x16.swizzle): s4, u4, or f4_e2m1 times 2 (0, 1, 2, 3, 4, 6, 8, 12 and negatives; halved
   after the conversion, exact), then widened and converted to f32 in registers right before the FMAs,
   optionally (w - z) * s. `k0` (the call's first k) may be odd: a K block of scales starting mid-pair
   (that k is then the second of its pair, lowp_gemm.h). Also here: the same decoding into an f32
   block (tall tiles). */
#include "lowp_gemm.h"

/* Per-call constants of the 4-bit decoders: the conversion's (lowp_gemm.h magic_t: s4 codes biased by
   the xor 0x88, code ^ 8 = value + 8) and the f4 table of 2 value + 16 (2 value: 0, 1, 2, 3, 4, 6, 8,
   12 and negatives; halved after the conversion, exact). */
typedef struct { magic_t m; v128_t lut; } dec4c_t;

INLINE dec4c_t dec4_consts(int dt) {
  dec4c_t k;
  k.m = dt == DT_S4 ? magic_consts(8.0f, 0x88) : magic_consts(dt == DT_U4 ? 0.0f : 16.0f, 0);
  k.lut = F4_LUT;
  KEEP(k.m.m4);
  if (dt == DT_F4_E2M1) KEEP(k.lut);
  return k;
}

#define U8LO(b) u8lo_u16((b), kc4.m)
#define U8HI(b) u8hi_u16((b), kc4.m)

/* One k's 8 biased values (u16 lanes, u8lo_u16 / u8hi_u16) as two f32x4; f4 values are doubled. */
INLINE void dec4(const int F4, v128_t h, dec4c_t kc4, v128_t* lo, v128_t* hi) {
  u16_to_f32x8(h, kc4.m, lo, hi);
  if (F4) {
    *lo = wasm_f32x4_mul(*lo, wasm_f32x4_splat(0.5f));
    *hi = wasm_f32x4_mul(*hi, wasm_f32x4_splat(0.5f));
  }
}

/* Biased u8 values of a k-pair's 8 bytes: lanes 0..7 the low nibbles (even k), 8..15 the high ones. */
INLINE v128_t pair_values(const int F4, dec4c_t kc4, v128_t raw) {
  raw = wasm_v128_xor(raw, kc4.m.xb);
  const v128_t lo = wasm_v128_and(raw, kc4.m.m4), hi = wasm_u8x16_shr(raw, 4);
  const v128_t v = wasm_i8x16_shuffle(lo, hi, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
  return F4 ? lut_nibbles(kc4.lut, v) : v;
}

/* Two k-pairs (16 bytes): *ev = values of k, k + 2 (lanes 0..7, 8..15), *od = k + 1, k + 3. The
   nibble shift done on 16-bit lanes (V8 has no byte shift on x64). */
INLINE void quad_values(const int F4, dec4c_t kc4, v128_t raw, v128_t* ev, v128_t* od) {
  raw = wasm_v128_xor(raw, kc4.m.xb);
  *ev = wasm_v128_and(raw, kc4.m.m4);
  *od = wasm_v128_and(wasm_u16x8_shr(raw, 4), kc4.m.m4);
  if (F4) {
    *ev = lut_nibbles(kc4.lut, *ev);
    *od = lut_nibbles(kc4.lut, *od);
  }
}

INLINE void w4_rows(const int R, const int F4, const int AFF, const int ODD, size_t nc, size_t k0, size_t kc,
                    const float* restrict a, const uint8_t* restrict w, float* restrict c, size_t ldc, int accumulate,
                    const float* zq, const float* sq, dec4c_t kc4) {
  const size_t zz = (size_t)((uint32_t)kc >> 31);
  a = a + zz;
  w = w + zz + (k0 >> 1) * 8;
  ACC_DECL
  AFF_DECL
  if (ODD) { /* k0 is the high nibble of its pair: the second k of that pair */
    v128_t w0, w1;
    dec4(F4, U8HI(pair_values(F4, kc4, wasm_v128_load64_zero(w))), kc4, &w0, &w1);
    AFFINE(w0, w1)
    STEP(1, 0, w0, w1);
    w += 8;
    a += 4;
    kc--;
  }
  for (size_t n = kc / 4; n; n--) { /* two k-pairs per load */
    v128_t ev, od, w0, w1;
    quad_values(F4, kc4, wasm_v128_load(w), &ev, &od);
    dec4(F4, U8LO(ev), kc4, &w0, &w1);
    AFFINE(w0, w1)
    STEP(0, 0, w0, w1);
    dec4(F4, U8LO(od), kc4, &w0, &w1);
    AFFINE(w0, w1)
    STEP(1, 16, w0, w1);
    dec4(F4, U8HI(ev), kc4, &w0, &w1);
    AFFINE(w0, w1)
    STEP(0, 32, w0, w1);
    dec4(F4, U8HI(od), kc4, &w0, &w1);
    AFFINE(w0, w1)
    STEP(1, 48, w0, w1);
    w += 16;
    a += 16;
  }
  if (kc & 2) {
    const v128_t x = pair_values(F4, kc4, wasm_v128_load64_zero(w));
    v128_t w0, w1, w2, w3;
    dec4(F4, U8LO(x), kc4, &w0, &w1);
    AFFINE(w0, w1)
    STEP(0, 0, w0, w1);
    dec4(F4, U8HI(x), kc4, &w2, &w3);
    AFFINE(w2, w3)
    STEP(1, 16, w2, w3);
    w += 8;
    a += 8;
  }
  if (kc & 1) {
    v128_t w0, w1;
    dec4(F4, U8LO(pair_values(F4, kc4, wasm_v128_load64_zero(w))), kc4, &w0, &w1);
    AFFINE(w0, w1)
    STEP(0, 0, w0, w1);
  }
  ACC_STORE;
}

#define W4_ROWS(F4, AFF)                                                                            \
  if (odd) {                                                                                        \
    if (mr >= 2) w4_rows(2, F4, AFF, 1, nc, k0, kc, a, w, c, ldc, accumulate, zq, sq, kc4);         \
    else w4_rows(1, F4, AFF, 1, nc, k0, kc, a, w, c, ldc, accumulate, zq, sq, kc4);                 \
  } else {                                                                                          \
    if (mr >= 2) w4_rows(2, F4, AFF, 0, nc, k0, kc, a, w, c, ldc, accumulate, zq, sq, kc4);         \
    else w4_rows(1, F4, AFF, 0, nc, k0, kc, a, w, c, ldc, accumulate, zq, sq, kc4);                 \
  }

void f32_gemm_2x8w4(size_t mr, size_t nc, size_t k0, size_t kc, const float* restrict a, const uint8_t* restrict w,
                    float* restrict c, size_t ldc, int accumulate, int dt, const float* zq, const float* sq) {
  const dec4c_t kc4 = dec4_consts(dt);
  const int aff = AFF_CODE(zq, sq), odd = (k0 & 1) && kc;
  if (dt == DT_F4_E2M1) { AFF_SWITCH(aff, W4_ROWS, 1) }
  else { AFF_SWITCH(aff, W4_ROWS, 0) }
}

/* Four k (two code pairs) of one row x two panels: the quad step of f32_gemm_1x16w4 and its
   K-block variant (the scales s0..s3 in scope are the block's). */
#define ROW16_QUAD(F4) \
  do { \
    v128_t ev, od, eu, ou, w0, w1, w2, w3; \
    quad_values(F4, kc4, wasm_v128_load(w), &ev, &od); \
    quad_values(F4, kc4, wasm_v128_load(u), &eu, &ou); \
    dec4(F4, U8LO(ev), kc4, &w0, &w1); \
    dec4(F4, U8LO(eu), kc4, &w2, &w3); \
    AFFINE16(w0, w1, w2, w3) \
    STEP16(0, 0, w0, w1, w2, w3); \
    dec4(F4, U8LO(od), kc4, &w0, &w1); \
    dec4(F4, U8LO(ou), kc4, &w2, &w3); \
    AFFINE16(w0, w1, w2, w3) \
    STEP16(1, 16, w0, w1, w2, w3); \
    dec4(F4, U8HI(ev), kc4, &w0, &w1); \
    dec4(F4, U8HI(eu), kc4, &w2, &w3); \
    AFFINE16(w0, w1, w2, w3) \
    STEP16(0, 32, w0, w1, w2, w3); \
    dec4(F4, U8HI(od), kc4, &w0, &w1); \
    dec4(F4, U8HI(ou), kc4, &w2, &w3); \
    AFFINE16(w0, w1, w2, w3) \
    STEP16(1, 48, w0, w1, w2, w3); \
    w += 16; \
    u += 16; \
    a += 16; \
  } while (0)

/* 1 row x 2 panels (lowp_gemm.h): w and w + ps are the two panels' starts. */
INLINE void w4_row16(const int F4, const int AFF, const int ODD, size_t nc1, size_t nc2, size_t k0, size_t kc,
                     const float* restrict a, const uint8_t* restrict w, size_t ps, float* restrict c, int accumulate,
                     const float* zq, const float* sq, dec4c_t kc4) {
  const size_t zz = (size_t)((uint32_t)kc >> 31);
  a = a + zz;
  w = w + zz + (k0 >> 1) * 8;
  const uint8_t* u = w + ps;
  ACC16_DECL
  AFF16_DECL
  if (ODD) {
    v128_t w0, w1, w2, w3;
    dec4(F4, U8HI(pair_values(F4, kc4, wasm_v128_load64_zero(w))), kc4, &w0, &w1);
    dec4(F4, U8HI(pair_values(F4, kc4, wasm_v128_load64_zero(u))), kc4, &w2, &w3);
    AFFINE16(w0, w1, w2, w3)
    STEP16(1, 0, w0, w1, w2, w3);
    w += 8;
    u += 8;
    a += 4;
    kc--;
  }
  for (size_t n = kc / 4; n; n--) {
    ROW16_QUAD(F4);
  }
  for (size_t n = (kc & 3) / 2; n; n--) {
    const v128_t x = pair_values(F4, kc4, wasm_v128_load64_zero(w)), y = pair_values(F4, kc4, wasm_v128_load64_zero(u));
    v128_t w0, w1, w2, w3;
    dec4(F4, U8LO(x), kc4, &w0, &w1);
    dec4(F4, U8LO(y), kc4, &w2, &w3);
    AFFINE16(w0, w1, w2, w3)
    STEP16(0, 0, w0, w1, w2, w3);
    dec4(F4, U8HI(x), kc4, &w0, &w1);
    dec4(F4, U8HI(y), kc4, &w2, &w3);
    AFFINE16(w0, w1, w2, w3)
    STEP16(1, 16, w0, w1, w2, w3);
    w += 8;
    u += 8;
    a += 8;
  }
  if (kc & 1) {
    v128_t w0, w1, w2, w3;
    dec4(F4, U8LO(pair_values(F4, kc4, wasm_v128_load64_zero(w))), kc4, &w0, &w1);
    dec4(F4, U8LO(pair_values(F4, kc4, wasm_v128_load64_zero(u))), kc4, &w2, &w3);
    AFFINE16(w0, w1, w2, w3)
    STEP16(0, 0, w0, w1, w2, w3);
  }
  ACC16_STORE;
}

#define W4_ROW16(F4, AFF)                                                                                  \
  if (odd) w4_row16(F4, AFF, 1, nc1, nc2, k0, kc, a, w, ps, c, accumulate, zq, sq, kc4);                    \
  else w4_row16(F4, AFF, 0, nc1, nc2, k0, kc, a, w, ps, c, accumulate, zq, sq, kc4);

void f32_gemm_1x16w4(size_t nc1, size_t nc2, size_t k0, size_t kc, const float* restrict a, const uint8_t* restrict w,
                     size_t ps, float* restrict c, int accumulate, int dt, const float* zq, const float* sq) {
  const dec4c_t kc4 = dec4_consts(dt);
  const int aff = AFF_CODE(zq, sq), odd = (k0 & 1) && kc;
  if (dt == DT_F4_E2M1) { AFF_SWITCH(aff, W4_ROW16, 1) }
  else { AFF_SWITCH(aff, W4_ROW16, 0) }
}

/* f32_gemm_1x16w4 with K-varying scales over whole K blocks (ukernel.h): the same steps per k as w4_row16,
   without a call (C tile load + store, setup) per block of 16-32 k. */
INLINE void w4_row16_kb(const int F4, const int AFF, size_t nc1, size_t nc2, size_t k0, size_t kc, size_t bs,
                        const float* restrict a, const uint8_t* restrict w, size_t ps, float* restrict c, int accumulate,
                        const float* zq, const float* sq, dec4c_t kc4) {
  const size_t zz = (size_t)((uint32_t)kc >> 31);
  a = a + zz;
  w = w + zz + (k0 >> 1) * 8;
  const uint8_t* u = w + ps;
  ACC16_DECL
  AFF16_DECL
  for (size_t b = kc / bs; b; b--, sq += 16) {
    s0 = wasm_v128_load(sq);
    s1 = wasm_v128_load(sq + 4);
    s2 = wasm_v128_load(sq + 8);
    s3 = wasm_v128_load(sq + 12);
    for (size_t n = bs / 4; n; n--) {
      ROW16_QUAD(F4);
    }
  }
  ACC16_STORE;
}

#define W4_ROW16_KB(F4, AFF) w4_row16_kb(F4, AFF, nc1, nc2, k0, kc, bs, a, w, ps, c, accumulate, zq, sq, kc4);

void f32_gemm_1x16w4_kb(size_t nc1, size_t nc2, size_t k0, size_t kc, size_t bs, const float* restrict a,
                        const uint8_t* restrict w, size_t ps, float* restrict c, int accumulate, int dt, const float* zq,
                        const float* sq) {
  const dec4c_t kc4 = dec4_consts(dt);
  /* scales always present (AFF bit 1) */
  if (dt == DT_F4_E2M1) { if (zq) { W4_ROW16_KB(1, 3) } else { W4_ROW16_KB(1, 2) } }
  else { if (zq) { W4_ROW16_KB(0, 3) } else { W4_ROW16_KB(0, 2) } }
}

INLINE void w4_decode(const int F4, const int AFF, const uint8_t* w, size_t k0, size_t kc, const float* zq, const float* sq,
                      float* out, dec4c_t kc4) {
  const v128_t zero = wasm_f32x4_splat(0.0f);
  AFF_DECL
  for (size_t i = 0; i < kc; i++) {
    const size_t k = k0 + i;
    const v128_t x = pair_values(F4, kc4, wasm_v128_load64_zero(w + (k >> 1) * 8));
    v128_t w0, w1;
    dec4(F4, (k & 1) ? U8HI(x) : U8LO(x), kc4, &w0, &w1);
    AFFINE(w0, w1)
    wasm_v128_store(out + 8 * i, w0);
    wasm_v128_store(out + 8 * i + 4, w1);
  }
}

#define W4_DEC(F4, AFF) w4_decode(F4, AFF, w, k0, kc, zq, sq, out, kc4);

void decode_2x8w4(const uint8_t* w, size_t k0, size_t kc, int dt, const float* zq, const float* sq, float* out) {
  const dec4c_t kc4 = dec4_consts(dt);
  const int aff = AFF_CODE(zq, sq);
  if (dt == DT_F4_E2M1) { AFF_SWITCH(aff, W4_DEC, 1) }
  else { AFF_SWITCH(aff, W4_DEC, 0) }
}
