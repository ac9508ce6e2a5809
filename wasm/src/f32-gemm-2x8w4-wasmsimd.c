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
typedef struct { magic_t m; v128_t lut, b2, b3; } dec4c_t;

/* The 1-row quad step's byte planes (session 20): for each nibble, bytes 2 and 3 of the f32 of its value (s4
   -8..7, u4 0..15, f4_e2m1 0, 0.5, .., 6 and negatives, code 8 as +0 as F4_LUT gives; the low 16 bits of these
   f32 are 0). Two table lookups and two byte interleaves give 16 such upper halves, one interleave with zeros
   per 4 weights the f32: the values of the magic conversion (bit for bit), without its subtract (nor f4's
   multiply by 0.5). */
#define B2_S4 wasm_u8x16_const(0x00, 0x80, 0x00, 0x40, 0x80, 0xa0, 0xc0, 0xe0, 0x00, 0xe0, 0xc0, 0xa0, 0x80, 0x40, 0x00, 0x80)
#define B3_S4 wasm_u8x16_const(0x00, 0x3f, 0x40, 0x40, 0x40, 0x40, 0x40, 0x40, 0xc1, 0xc0, 0xc0, 0xc0, 0xc0, 0xc0, 0xc0, 0xbf)
#define B2_U4 wasm_u8x16_const(0x00, 0x80, 0x00, 0x40, 0x80, 0xa0, 0xc0, 0xe0, 0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70)
#define B3_U4 wasm_u8x16_const(0x00, 0x3f, 0x40, 0x40, 0x40, 0x40, 0x40, 0x40, 0x41, 0x41, 0x41, 0x41, 0x41, 0x41, 0x41, 0x41)
#define B2_F4 wasm_u8x16_const(0x00, 0x00, 0x80, 0xc0, 0x00, 0x40, 0x80, 0xc0, 0x00, 0x00, 0x80, 0xc0, 0x00, 0x40, 0x80, 0xc0)
#define B3_F4 wasm_u8x16_const(0x00, 0x3f, 0x3f, 0x3f, 0x40, 0x40, 0x40, 0x40, 0x00, 0xbf, 0xbf, 0xbf, 0xc0, 0xc0, 0xc0, 0xc0)

INLINE dec4c_t dec4_consts(int dt) {
  dec4c_t k;
  k.m = dt == DT_S4 ? magic_consts(8.0f, 0x88) : magic_consts(dt == DT_U4 ? 0.0f : 16.0f, 0);
  k.lut = F4_LUT;
  k.b2 = dt == DT_S4 ? B2_S4 : dt == DT_U4 ? B2_U4 : B2_F4;
  k.b3 = dt == DT_S4 ? B3_S4 : dt == DT_U4 ? B3_U4 : B3_F4;
  KEEP(k.m.m4);
  if (dt == DT_F4_E2M1) KEEP(k.lut);
  KEEP(k.b2);
  KEEP(k.b3);
  return k;
}

/* 16 nibbles (lanes 0..7 one k, 8..15 another) as their values' upper f32 halves: *lo for lanes 0..7, *hi 8..15
   (u16 lanes). */
INLINE void nib_halves(dec4c_t kc4, v128_t n, v128_t* lo, v128_t* hi) {
  const v128_t p2 = lut_nibbles(kc4.b2, n), p3 = lut_nibbles(kc4.b3, n);
  *lo = wasm_i8x16_shuffle(p2, p3, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  *hi = wasm_i8x16_shuffle(p2, p3, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
}
/* One k's 8 upper halves as two f32x4 (each under 16 zero bits). */
INLINE void halves_f32x8(v128_t h, v128_t zero, v128_t* lo, v128_t* hi) {
  *lo = wasm_i16x8_shuffle(zero, h, 0, 8, 1, 9, 2, 10, 3, 11);
  *hi = wasm_i16x8_shuffle(zero, h, 4, 12, 5, 13, 6, 14, 7, 15);
}

/* Whether a 4-bit type's in-register decode goes through the byte planes: on the relaxed build always (its swizzle
   is one pshufb: 1.1x the magic conversion's s4 / u4, 1.5x f4, bare 1 x 16 kernel, Node 24), on simd128 for f4 only
   (i8x16.swizzle costs V8 a saturating add more: s4 / u4 0.97x, f4 1.36x, Node 20; session 20). */
#ifdef RELAXED
#define PLANES(F4) 1
#else
#define PLANES(F4) (F4)
#endif

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

/* One k of the plane loop: the upper halves h as f32, then the affine step and the FMAs. */
#define PLANE_K(h, ODD, OFF)                 \
  do {                                       \
    v128_t w0, w1;                           \
    halves_f32x8((h), kc4.m.zero, &w0, &w1); \
    AFFINE(w0, w1)                           \
    STEP(ODD, OFF, w0, w1);                  \
  } while (0)

/* Four k (two k-pairs, one 16-byte load) of 1-2 rows x one panel: through the byte planes, or by the magic
   conversion. */
#define ROWS_QUAD_PLANES()                                                  \
  do {                                                                      \
    const v128_t raw = wasm_v128_load(w);                                   \
    v128_t e0, e1, o0, o1;                                                  \
    nib_halves(kc4, wasm_v128_and(raw, kc4.m.m4), &e0, &e1);                \
    nib_halves(kc4, wasm_v128_and(wasm_u16x8_shr(raw, 4), kc4.m.m4), &o0, &o1); \
    PLANE_K(e0, 0, 0);                                                      \
    PLANE_K(o0, 1, 16);                                                     \
    PLANE_K(e1, 0, 32);                                                     \
    PLANE_K(o1, 1, 48);                                                     \
    w += 16;                                                                \
    a += 16;                                                                \
  } while (0)

#define ROWS_QUAD_MAGIC(F4)                          \
  do {                                               \
    v128_t ev, od, w0, w1;                           \
    quad_values(F4, kc4, wasm_v128_load(w), &ev, &od); \
    dec4(F4, U8LO(ev), kc4, &w0, &w1);               \
    AFFINE(w0, w1)                                   \
    STEP(0, 0, w0, w1);                              \
    dec4(F4, U8LO(od), kc4, &w0, &w1);               \
    AFFINE(w0, w1)                                   \
    STEP(1, 16, w0, w1);                             \
    dec4(F4, U8HI(ev), kc4, &w0, &w1);               \
    AFFINE(w0, w1)                                   \
    STEP(0, 32, w0, w1);                             \
    dec4(F4, U8HI(od), kc4, &w0, &w1);               \
    AFFINE(w0, w1)                                   \
    STEP(1, 48, w0, w1);                             \
    w += 16;                                         \
    a += 16;                                         \
  } while (0)

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
  if (PLANES(F4)) {
    for (size_t n = kc / 4; n; n--) ROWS_QUAD_PLANES();
    kc &= 3;
  }
  for (size_t n = kc / 4; n; n--) ROWS_QUAD_MAGIC(F4);
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

/* f32_gemm_2x8w4 with K-varying scales over whole K blocks (ukernel.h): the same steps per k as w4_rows, the
   accumulators kept in registers across the blocks instead of a call (C tile load + store, setup) per block. */
INLINE void w4_rows_kb(const int R, const int F4, const int AFF, size_t nc, size_t k0, size_t kc, size_t bs,
                       const float* restrict a, const uint8_t* restrict w, float* restrict c, size_t ldc, int accumulate,
                       const float* zq, const float* sq, size_t sst, dec4c_t kc4) {
  const size_t zz = (size_t)((uint32_t)kc >> 31);
  a = a + zz;
  w = w + zz + (k0 >> 1) * 8;
  ACC_DECL
  AFF_DECL
  for (size_t b = kc / bs; b; b--, sq += sst) {
    s0 = wasm_v128_load(sq);
    s1 = wasm_v128_load(sq + 4);
    for (size_t n = bs / 4; n; n--) {
      if (PLANES(F4)) ROWS_QUAD_PLANES();
      else ROWS_QUAD_MAGIC(F4);
    }
  }
  ACC_STORE;
}

#define W4_ROWS_KB(F4, AFF)                                                                              \
  if (mr >= 2) w4_rows_kb(2, F4, AFF, nc, k0, kc, bs, a, w, c, ldc, accumulate, zq, sq, sst, kc4);         \
  else w4_rows_kb(1, F4, AFF, nc, k0, kc, bs, a, w, c, ldc, accumulate, zq, sq, sst, kc4);

void f32_gemm_2x8w4_kb(size_t mr, size_t nc, size_t k0, size_t kc, size_t bs, const float* restrict a, const uint8_t* restrict w,
                       float* restrict c, size_t ldc, int accumulate, int dt, const float* zq, const float* sq, size_t sst) {
  const dec4c_t kc4 = dec4_consts(dt);
  /* scales always present (AFF bit 1) */
  if (dt == DT_F4_E2M1) { if (zq) { W4_ROWS_KB(1, 3) } else { W4_ROWS_KB(1, 2) } }
  else { if (zq) { W4_ROWS_KB(0, 3) } else { W4_ROWS_KB(0, 2) } }
}

/* The same step through the byte planes (nib_halves): the same values. */
#define ROW16_QUAD_PLANES(F4) \
  do { \
    (void)(F4); /* the planes hold each type's values */ \
    const v128_t rw_ = wasm_v128_load(w), ru_ = wasm_v128_load(u); \
    v128_t e0, e1, o0, o1, f0, f1, p0, p1, w0, w1, w2, w3; \
    nib_halves(kc4, wasm_v128_and(rw_, kc4.m.m4), &e0, &e1); \
    nib_halves(kc4, wasm_v128_and(ru_, kc4.m.m4), &f0, &f1); \
    halves_f32x8(e0, kc4.m.zero, &w0, &w1); \
    halves_f32x8(f0, kc4.m.zero, &w2, &w3); \
    AFFINE16(w0, w1, w2, w3) \
    STEP16(0, 0, w0, w1, w2, w3); \
    nib_halves(kc4, wasm_v128_and(wasm_u16x8_shr(rw_, 4), kc4.m.m4), &o0, &o1); \
    nib_halves(kc4, wasm_v128_and(wasm_u16x8_shr(ru_, 4), kc4.m.m4), &p0, &p1); \
    halves_f32x8(o0, kc4.m.zero, &w0, &w1); \
    halves_f32x8(p0, kc4.m.zero, &w2, &w3); \
    AFFINE16(w0, w1, w2, w3) \
    STEP16(1, 16, w0, w1, w2, w3); \
    halves_f32x8(e1, kc4.m.zero, &w0, &w1); \
    halves_f32x8(f1, kc4.m.zero, &w2, &w3); \
    AFFINE16(w0, w1, w2, w3) \
    STEP16(0, 32, w0, w1, w2, w3); \
    halves_f32x8(o1, kc4.m.zero, &w0, &w1); \
    halves_f32x8(p1, kc4.m.zero, &w2, &w3); \
    AFFINE16(w0, w1, w2, w3) \
    STEP16(1, 48, w0, w1, w2, w3); \
  } while (0)

/* Four k (two code pairs) of one row x two panels: the quad step of f32_gemm_1x16w4 and its
   K-block variant (the scales s0..s3 in scope are the block's), by the magic conversion. */
#define ROW16_QUAD_MAGIC(F4) \
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
  } while (0)

#define ROW16_QUAD(F4) \
  do { \
    if (PLANES(F4)) ROW16_QUAD_PLANES(F4); \
    else ROW16_QUAD_MAGIC(F4); \
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
                        const float* zq, const float* sq, size_t sps, size_t sst, dec4c_t kc4) {
  const size_t zz = (size_t)((uint32_t)kc >> 31);
  a = a + zz;
  w = w + zz + (k0 >> 1) * 8;
  const uint8_t* u = w + ps;
  ACC16_DECL
  AFF16_DECL
  for (size_t b = kc / bs; b; b--, sq += sst) {
    s0 = wasm_v128_load(sq);
    s1 = wasm_v128_load(sq + 4);
    s2 = wasm_v128_load(sq + sps);
    s3 = wasm_v128_load(sq + sps + 4);
    for (size_t n = bs / 4; n; n--) {
      ROW16_QUAD(F4);
    }
  }
  ACC16_STORE;
}

#define W4_ROW16_KB(F4, AFF) w4_row16_kb(F4, AFF, nc1, nc2, k0, kc, bs, a, w, ps, c, accumulate, zq, sq, sps, sst, kc4);

void f32_gemm_1x16w4_kb(size_t nc1, size_t nc2, size_t k0, size_t kc, size_t bs, const float* restrict a,
                        const uint8_t* restrict w, size_t ps, float* restrict c, int accumulate, int dt, const float* zq,
                        const float* sq, size_t sps, size_t sst) {
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
