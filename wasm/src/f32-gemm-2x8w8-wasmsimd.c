/* f32 x 8-bit weights GEMM microkernel (issue 12): up to 2 rows x 8 columns (decode: the rows of an
   expert are few), A f32 (4-row micro-panel, lowp_gemm.h), W one 8-column panel of 8-bit codes, k-major: the codes of k are the 8 bytes at w + 8k
   (layout `x8:p8`, gemm-lowp.c). Each k's codes are decoded to f32 in registers right before the FMAs
   (s8 / u8: widen + convert; f8_e4m3 / f8_e5m2: byte tables, 16 codes at once, byte_tables.h; the same
   values as lowp.h's scalar decoders, NaN and subnormals included), then optionally (w - z) * s. Two k per iteration:
   one 16-byte load holds both. Also here: the same decoding into an f32 block (tall tiles). */
#include "lowp_gemm.h"

/* Integer codes of one k (8 lanes of u16 / i16) as two f32x4 (fp8 goes by byte planes, byte_tables.h). */
INLINE void dec8(v128_t h, v128_t* lo, v128_t* hi) { i16_to_f32x8(h, lo, hi); }

INLINE v128_t widen_lo(const int DT, v128_t raw) {
  return DT == DT_S8 ? wasm_i16x8_extend_low_i8x16(raw) : wasm_u16x8_extend_low_u8x16(raw);
}
INLINE v128_t widen_hi(const int DT, v128_t raw) {
  return DT == DT_S8 ? wasm_i16x8_extend_high_i8x16(raw) : wasm_u16x8_extend_high_u8x16(raw);
}

/* Codes 0-7 of raw (one k) as two f32x4. */
INLINE void dec8_lo(const int DT, v128_t raw, v128_t* lo, v128_t* hi) {
  if (DT == DT_F8_E4M3 || DT == DT_F8_E5M2) fp8_half(fp8_planes(DT, raw), 0, lo, hi);
  else dec8(widen_lo(DT, raw), lo, hi);
}

/* KB (f32_gemm_2x8w8_kb): kc / bs whole K blocks of bs (even) k from an even k, block b's scales at sq + sst b, the
   accumulators kept in registers across them; else one call is one K block (or none). */
INLINE void w8_rows(const int R, const int DT, const int AFF, const int ODD, const int KB, size_t nc, size_t kc, size_t bs, size_t sst,
                    const float* restrict a, const uint8_t* restrict w, float* restrict c, size_t ldc, int accumulate, const float* zq,
                    const float* sq) {
  const size_t zz = (size_t)((uint32_t)kc >> 31); /* 0: pointers V8 knows are zero-extended (f32 kernel) */
  a = a + zz;
  w = w + zz;
  ACC_DECL
  AFF_DECL
  if (ODD) { /* the call starts on an odd k: the second of its pair */
    v128_t w0, w1;
    dec8_lo(DT, wasm_v128_load64_zero(w), &w0, &w1);
    AFFINE(w0, w1)
    STEP(1, 0, w0, w1);
    w += 8;
    a += 4;
    kc--;
  }
  for (size_t b = KB ? kc / bs : 1; b; b--) {
    if (KB) {
      s0 = wasm_v128_load(sq);
      s1 = wasm_v128_load(sq + 4);
      sq += sst;
    }
    for (size_t n = (KB ? bs : kc) / 2; n; n--) {
      const v128_t raw = wasm_v128_load(w);
      v128_t w0, w1, w2, w3;
      if (DT == DT_F8_E4M3 || DT == DT_F8_E5M2) {
        const fp8_planes_t pl = fp8_planes(DT, raw);
        fp8_half(pl, 0, &w0, &w1);
        AFFINE(w0, w1)
        STEP(0, 0, w0, w1);
        fp8_half(pl, 1, &w2, &w3);
      } else {
        dec8(widen_lo(DT, raw), &w0, &w1);
        AFFINE(w0, w1)
        STEP(0, 0, w0, w1);
        dec8(widen_hi(DT, raw), &w2, &w3);
      }
      AFFINE(w2, w3)
      STEP(1, 16, w2, w3);
      w += 16;
      a += 8;
    }
  }
  if (!KB && (kc & 1)) {
    v128_t w0, w1;
    dec8_lo(DT, wasm_v128_load64_zero(w), &w0, &w1);
    AFFINE(w0, w1)
    STEP(0, 0, w0, w1);
  }
  ACC_STORE;
}

#define W8_ROWS(DT, AFF)                                                                      \
  if (odd) {                                                                                  \
    if (mr >= 2) w8_rows(2, DT, AFF, 1, 0, nc, kc, 0, 0, a, w, c, ldc, accumulate, zq, sq);   \
    else w8_rows(1, DT, AFF, 1, 0, nc, kc, 0, 0, a, w, c, ldc, accumulate, zq, sq);           \
  } else {                                                                                    \
    if (mr >= 2) w8_rows(2, DT, AFF, 0, 0, nc, kc, 0, 0, a, w, c, ldc, accumulate, zq, sq);   \
    else w8_rows(1, DT, AFF, 0, 0, nc, kc, 0, 0, a, w, c, ldc, accumulate, zq, sq);           \
  }

void f32_gemm_2x8w8(size_t mr, size_t nc, size_t k0, size_t kc, const float* restrict a, const uint8_t* restrict w,
                    float* restrict c, size_t ldc, int accumulate, int dt, const float* zq, const float* sq) {
  const int aff = AFF_CODE(zq, sq), odd = (k0 & 1) && kc;
  switch (dt) {
    case DT_S8: AFF_SWITCH(aff, W8_ROWS, DT_S8) return;
    case DT_U8: AFF_SWITCH(aff, W8_ROWS, DT_U8) return;
    case DT_F8_E4M3: AFF_SWITCH(aff, W8_ROWS, DT_F8_E4M3) return;
    default: AFF_SWITCH(aff, W8_ROWS, DT_F8_E5M2) return;
  }
}

#define W8_ROWS_KB(DT, AFF)                                                                   \
  if (mr >= 2) w8_rows(2, DT, AFF, 0, 1, nc, kc, bs, sst, a, w, c, ldc, accumulate, zq, sq);  \
  else w8_rows(1, DT, AFF, 0, 1, nc, kc, bs, sst, a, w, c, ldc, accumulate, zq, sq);

/* scales always present (AFF bit 1) */
#define KB_SWITCH(MACRO)                                                                      \
  switch (dt) {                                                                               \
    case DT_S8: if (zq) { MACRO(DT_S8, 3) } else { MACRO(DT_S8, 2) } return;                  \
    case DT_U8: if (zq) { MACRO(DT_U8, 3) } else { MACRO(DT_U8, 2) } return;                  \
    case DT_F8_E4M3: if (zq) { MACRO(DT_F8_E4M3, 3) } else { MACRO(DT_F8_E4M3, 2) } return;    \
    default: if (zq) { MACRO(DT_F8_E5M2, 3) } else { MACRO(DT_F8_E5M2, 2) } return;           \
  }

void f32_gemm_2x8w8_kb(size_t mr, size_t nc, size_t kc, size_t bs, const float* restrict a, const uint8_t* restrict w, float* restrict c,
                       size_t ldc, int accumulate, int dt, const float* zq, const float* sq, size_t sst) {
  KB_SWITCH(W8_ROWS_KB)
}

/* Whether the 1-row loop converts s8 codes by the magic number (lowp_gemm.h u16_to_f32x8, the codes biased by the
   xor 0x80) rather than widen + convert (V8 emits i16x8 / i32x4.extend_high_s as an unpack and an arithmetic shift):
   on the relaxed build (bare 1 x 16 kernel, L1, same process, Node 24: s8 1.22x; u8, whose extends are one
   instruction each, 0.98x: kept), not on simd128 (Node 20: s8 0.98x). The same values. Session 20. */
#ifdef RELAXED
#define MAGIC8 1
#else
#define MAGIC8 0
#endif

/* 1 row x 2 panels (lowp_gemm.h): w and w + ps are the two panels' codes at k0. */
/* KB (f32_gemm_1x16w8_kb): as in w8_rows, the second panel's scales sps floats after the first's. */
INLINE void w8_row16(const int DT, const int AFF, const int ODD, const int KB, size_t nc1, size_t nc2, size_t kc, size_t bs, size_t sps,
                     size_t sst, const float* restrict a, const uint8_t* restrict w, size_t ps, float* restrict c, int accumulate,
                     const float* zq, const float* sq) {
  const size_t zz = (size_t)((uint32_t)kc >> 31);
  a = a + zz;
  w = w + zz;
  const uint8_t* u = w + ps;
#if MAGIC8
  const magic_t mk = magic_consts(128.0f, 0x80);
#endif
  ACC16_DECL
  AFF16_DECL
  if (ODD) {
    v128_t w0, w1, w2, w3;
    dec8_lo(DT, wasm_v128_load64_zero(w), &w0, &w1);
    dec8_lo(DT, wasm_v128_load64_zero(u), &w2, &w3);
    AFFINE16(w0, w1, w2, w3)
    STEP16(1, 0, w0, w1, w2, w3);
    w += 8;
    u += 8;
    a += 4;
    kc--;
  }
  for (size_t b = KB ? kc / bs : 1; b; b--) {
    if (KB) {
      s0 = wasm_v128_load(sq);
      s1 = wasm_v128_load(sq + 4);
      s2 = wasm_v128_load(sq + sps);
      s3 = wasm_v128_load(sq + sps + 4);
      sq += sst;
    }
    for (size_t n = (KB ? bs : kc) / 2; n; n--) {
      const v128_t r0 = wasm_v128_load(w), r1 = wasm_v128_load(u);
      v128_t w0, w1, w2, w3;
      if (DT == DT_F8_E4M3 || DT == DT_F8_E5M2) {
        const fp8_planes_t p0 = fp8_planes(DT, r0), p1 = fp8_planes(DT, r1);
        fp8_half(p0, 0, &w0, &w1);
        fp8_half(p1, 0, &w2, &w3);
        AFFINE16(w0, w1, w2, w3)
        STEP16(0, 0, w0, w1, w2, w3);
        fp8_half(p0, 1, &w0, &w1);
        fp8_half(p1, 1, &w2, &w3);
      }
#if MAGIC8
      else if (DT == DT_S8) {
        const v128_t b0 = wasm_v128_xor(r0, mk.xb), b1 = wasm_v128_xor(r1, mk.xb);
        u16_to_f32x8(u8lo_u16(b0, mk), mk, &w0, &w1);
        u16_to_f32x8(u8lo_u16(b1, mk), mk, &w2, &w3);
        AFFINE16(w0, w1, w2, w3)
        STEP16(0, 0, w0, w1, w2, w3);
        u16_to_f32x8(u8hi_u16(b0, mk), mk, &w0, &w1);
        u16_to_f32x8(u8hi_u16(b1, mk), mk, &w2, &w3);
      }
#endif
      else {
        dec8(widen_lo(DT, r0), &w0, &w1);
        dec8(widen_lo(DT, r1), &w2, &w3);
        AFFINE16(w0, w1, w2, w3)
        STEP16(0, 0, w0, w1, w2, w3);
        dec8(widen_hi(DT, r0), &w0, &w1);
        dec8(widen_hi(DT, r1), &w2, &w3);
      }
      AFFINE16(w0, w1, w2, w3)
      STEP16(1, 16, w0, w1, w2, w3);
      w += 16;
      u += 16;
      a += 8;
    }
  }
  if (!KB && (kc & 1)) {
    v128_t w0, w1, w2, w3;
    dec8_lo(DT, wasm_v128_load64_zero(w), &w0, &w1);
    dec8_lo(DT, wasm_v128_load64_zero(u), &w2, &w3);
    AFFINE16(w0, w1, w2, w3)
    STEP16(0, 0, w0, w1, w2, w3);
  }
  ACC16_STORE;
}

#define W8_ROW16(DT, AFF)                                                                          \
  if (odd) w8_row16(DT, AFF, 1, 0, nc1, nc2, kc, 0, 0, 0, a, w, ps, c, accumulate, zq, sq);        \
  else w8_row16(DT, AFF, 0, 0, nc1, nc2, kc, 0, 0, 0, a, w, ps, c, accumulate, zq, sq);
#define W8_ROW16_KB(DT, AFF) w8_row16(DT, AFF, 0, 1, nc1, nc2, kc, bs, sps, sst, a, w, ps, c, accumulate, zq, sq);

void f32_gemm_1x16w8(size_t nc1, size_t nc2, size_t k0, size_t kc, const float* restrict a, const uint8_t* restrict w,
                     size_t ps, float* restrict c, int accumulate, int dt, const float* zq, const float* sq) {
  const int aff = AFF_CODE(zq, sq), odd = (k0 & 1) && kc;
  switch (dt) {
    case DT_S8: AFF_SWITCH(aff, W8_ROW16, DT_S8) return;
    case DT_U8: AFF_SWITCH(aff, W8_ROW16, DT_U8) return;
    case DT_F8_E4M3: AFF_SWITCH(aff, W8_ROW16, DT_F8_E4M3) return;
    default: AFF_SWITCH(aff, W8_ROW16, DT_F8_E5M2) return;
  }
}

void f32_gemm_1x16w8_kb(size_t nc1, size_t nc2, size_t kc, size_t bs, const float* restrict a, const uint8_t* restrict w, size_t ps,
                        float* restrict c, int accumulate, int dt, const float* zq, const float* sq, size_t sps, size_t sst) {
  KB_SWITCH(W8_ROW16_KB)
}

INLINE void w8_decode(const int DT, const int AFF, const uint8_t* w, size_t kc, const float* zq, const float* sq, float* out) {
  const v128_t zero = wasm_f32x4_splat(0.0f);
  AFF_DECL
  size_t k = 0;
  if (DT == DT_F8_E4M3 || DT == DT_F8_E5M2) /* two k per byte-plane decode (one call is one K block of zero points / scales) */
    for (; k + 2 <= kc; k += 2) {
      const fp8_planes_t pl = fp8_planes(DT, wasm_v128_load(w + 8 * k));
      v128_t w0, w1, w2, w3;
      fp8_half(pl, 0, &w0, &w1);
      fp8_half(pl, 1, &w2, &w3);
      AFFINE(w0, w1)
      wasm_v128_store(out + 8 * k, w0);
      wasm_v128_store(out + 8 * k + 4, w1);
      AFFINE(w2, w3)
      wasm_v128_store(out + 8 * k + 8, w2);
      wasm_v128_store(out + 8 * k + 12, w3);
    }
  for (; k < kc; k++) {
    v128_t w0, w1;
    dec8_lo(DT, wasm_v128_load64_zero(w + 8 * k), &w0, &w1);
    AFFINE(w0, w1)
    wasm_v128_store(out + 8 * k, w0);
    wasm_v128_store(out + 8 * k + 4, w1);
  }
}

#define W8_DEC(DT, AFF) w8_decode(DT, AFF, w, kc, zq, sq, out);

void decode_2x8w8(const uint8_t* w, size_t kc, int dt, const float* zq, const float* sq, float* out) {
  const int aff = AFF_CODE(zq, sq);
  switch (dt) {
    case DT_S8: AFF_SWITCH(aff, W8_DEC, DT_S8) return;
    case DT_U8: AFF_SWITCH(aff, W8_DEC, DT_U8) return;
    case DT_F8_E4M3: AFF_SWITCH(aff, W8_DEC, DT_F8_E4M3) return;
    default: AFF_SWITCH(aff, W8_DEC, DT_F8_E5M2) return;
  }
}

/* Tests: n (a multiple of 8) codes of an 8-bit type through the in-register decoder (exhaustive checks
   against lowp.h's scalar decoders, NaN and Inf included, which a GEMM cannot isolate). */
EXPORT(check_decode_w8) void check_decode_w8(int32_t dt, const uint8_t* in, float* out, int32_t n) {
  for (int32_t i = 0; i < n; i += 8) {
    const v128_t raw = wasm_v128_load64_zero(in + i);
    v128_t lo, hi;
    if (dt == DT_S8) dec8(widen_lo(DT_S8, raw), &lo, &hi);
    else if (dt == DT_U8) dec8(widen_lo(DT_U8, raw), &lo, &hi);
    else if (dt == DT_F8_E4M3) dec8_lo(DT_F8_E4M3, raw, &lo, &hi);
    else dec8_lo(DT_F8_E5M2, raw, &lo, &hi);
    wasm_v128_store(out + i, lo);
    wasm_v128_store(out + i + 4, hi);
  }
}
