/* f32 x 16-bit float weights GEMM microkernels: up to 2 rows x 8 columns (f32_gemm_2x8wx16) or 1 row x
   two panels (f32_gemm_1x16wx16), A f32 (4-row micro-panel, lowp_gemm.h), W panels of the layout `x16:p8`
   (bf16 / f16 codes, k-major: the 8 codes of k are the 16 bytes at w + 16k). A decode step then streams
   2 bytes per weight instead of the 4 of `f32:p8` panels. Each k's codes become f32 in registers right
   before the FMAs: bf16 by one interleave with zeros per 4 weights (the code is the f32's high half),
   f16 by the same interleave, a shift, a mask and a multiply (dec16). Both conversions are exact (the values load_elem gives), and the
   accumulation is f32_gemm_4x8's (lowp_gemm.h STEP: k in order, even k as MADD, odd k as mul then add,
   k counted from the group's first k), so the results are bitwise those of the same weights plain (which
   the driver converts into f32 panels first). Also here: the same conversion into an f32 block, for
   taller tiles that then run f32_gemm_4x8 itself. */
#include "lowp_gemm.h"

/* The 8 codes of one k (16 bytes) as two f32x4; z: a zero vector the caller keeps in a register (clang
   would otherwise see through it and rewrite the shuffles). Each code goes to the high half of its 32-bit
   lane by an interleave with zeros (punpcklwd / punpckhwd: one instruction, which V8 matches only for
   this lane order; for bf16).
   bf16: that is the f32.
   f16: the lane the code shifted right by 3 as a signed lane would give (sign at bit 31, exponent +
   mantissa at bits 13-27, the three copies of the sign at 28-30 masked off; its two halves made on the 8
   codes at once, then interleaved): an f32 of 2^-112 times the half's
   value, for normals and subnormals alike (a half subnormal becomes an f32 subnormal of the same
   mantissa), so one multiply by 2^112 gives the value, exactly (f16_to_f32's: zeros, signs and
   subnormals included; a subnormal operand may cost a slower multiply on some x64 cores, correct
   either way). Inf / NaN (exponent 31) would come out finite: their lanes are collected over the call
   (an and, a compare and an or per k), and a call that met one runs again on f16x4_to_f32 (lowp_gemm.h),
   the exact general conversion. */
/* The conversion's constants, made once per call and kept in registers (KEEP: V8 would otherwise
   materialize each v128.const again inside the loop). */
typedef struct { v128_t z, e, m, k; } x16c_t;
INLINE x16c_t x16_consts(const int DT) {
  x16c_t c = { wasm_i16x8_splat(0), wasm_i16x8_splat(0x7c00), wasm_i16x8_splat((int16_t)0x8fff), wasm_f32x4_splat(0x1p112f) };
  if (DT == DT_BF16) {
    KEEP(c.z);
  } else {
    KEEP(c.e);
    KEEP(c.m);
    KEEP(c.k);
  }
  return c;
}

/* f16 codes of h with exponent 31 (Inf / NaN) as all-ones 16-bit lanes; OR-ed over a call, then one test. */
INLINE v128_t f16_special(v128_t h, x16c_t c) { return wasm_i16x8_eq(wasm_v128_and(h, c.e), c.e); }

INLINE void dec16(const int DT, v128_t h, x16c_t c, v128_t* lo, v128_t* hi) {
  if (DT == DT_BF16) {
    *lo = wasm_i16x8_shuffle(c.z, h, 0, 8, 1, 9, 2, 10, 3, 11);
    *hi = wasm_i16x8_shuffle(c.z, h, 4, 12, 5, 13, 6, 14, 7, 15);
  } else { /* the 32-bit lane's halves made on all 8 codes at once: high (h >> 3, sign kept) & 0x8fff, low h << 13 */
    const v128_t top = wasm_v128_and(wasm_i16x8_shr(h, 3), c.m), bot = wasm_i16x8_shl(h, 13);
    *lo = wasm_f32x4_mul(wasm_i16x8_shuffle(bot, top, 0, 8, 1, 9, 2, 10, 3, 11), c.k);
    *hi = wasm_f32x4_mul(wasm_i16x8_shuffle(bot, top, 4, 12, 5, 13, 6, 14, 7, 15), c.k);
  }
}

/* f16 codes with an Inf / NaN among them: f16x4_to_f32 (lowp_gemm.h), the exact general conversion. */
INLINE void dec16_exact(v128_t h, v128_t* lo, v128_t* hi) {
  *lo = f16x4_to_f32(wasm_u32x4_extend_low_u16x8(h));
  *hi = f16x4_to_f32(wasm_u32x4_extend_high_u16x8(h));
}

/* One k's codes: the fast conversion, its Inf / NaN lanes OR-ed into *bad (f16), or (EXACT) the exact one. */
INLINE void dec16_k(const int DT, const int EXACT, v128_t h, x16c_t c, v128_t* bad, v128_t* lo, v128_t* hi) {
  if (DT == DT_F16 && EXACT) {
    dec16_exact(h, lo, hi);
    return;
  }
  if (DT == DT_F16) *bad = wasm_v128_or(*bad, f16_special(h, c));
  dec16(DT, h, c, lo, hi);
}

/* The kernels run a call once with the fast conversion and store C only if no f16 code of it was an Inf /
   NaN; otherwise (C untouched: it is read at the start and written at the end) once more with EXACT. */
INLINE int x16_rows(const int R, const int DT, const int ODD, const int EXACT, size_t nc, size_t kc, const float* restrict a,
                    const uint16_t* restrict w, float* restrict c, size_t ldc, int accumulate) {
  const size_t zz = (size_t)((uint32_t)kc >> 31); /* 0: pointers V8 knows are zero-extended (f32 kernel) */
  a = a + zz;
  w = w + zz;
  ACC_DECL
  const x16c_t cs = x16_consts(DT);
  v128_t bad = zero;
  if (ODD) { /* the call starts on an odd k: the second of its pair */
    v128_t w0, w1;
    dec16_k(DT, EXACT, wasm_v128_load(w), cs, &bad, &w0, &w1);
    STEP(1, 0, w0, w1);
    w += NR;
    a += 4;
    kc--;
  }
  for (size_t n = kc / 2; n; n--) {
    v128_t w0, w1, w2, w3;
    dec16_k(DT, EXACT, wasm_v128_load(w), cs, &bad, &w0, &w1);
    STEP(0, 0, w0, w1);
    dec16_k(DT, EXACT, wasm_v128_load(w + NR), cs, &bad, &w2, &w3);
    STEP(1, 16, w2, w3);
    w += 2 * NR;
    a += 8;
  }
  if (kc & 1) {
    v128_t w0, w1;
    dec16_k(DT, EXACT, wasm_v128_load(w), cs, &bad, &w0, &w1);
    STEP(0, 0, w0, w1);
  }
  if (DT == DT_F16 && !EXACT && wasm_v128_any_true(bad)) return 0;
  ACC_STORE;
  return 1;
}

#define X16_CALL(R, DT, ODD) \
  if (!x16_rows(R, DT, ODD, 0, nc, kc, a, w, c, ldc, accumulate)) x16_rows(R, DT, ODD, 1, nc, kc, a, w, c, ldc, accumulate);

#define X16_ROWS(DT)                            \
  if (odd) {                                    \
    if (mr >= 2) { X16_CALL(2, DT, 1) }         \
    else { X16_CALL(1, DT, 1) }                 \
  } else {                                      \
    if (mr >= 2) { X16_CALL(2, DT, 0) }         \
    else { X16_CALL(1, DT, 0) }                 \
  }

void f32_gemm_2x8wx16(size_t mr, size_t nc, size_t k0, size_t kc, const float* restrict a, const uint16_t* restrict w,
                      float* restrict c, size_t ldc, int accumulate, int dt) {
  const int odd = (k0 & 1) && kc;
  if (dt == DT_BF16) {
    X16_ROWS(DT_BF16)
  } else {
    X16_ROWS(DT_F16)
  }
}

/* 1 row x 2 panels (C contiguous): w and w + ps bytes are the two panels' codes at k0. */
INLINE int x16_row16(const int DT, const int ODD, const int EXACT, size_t nc1, size_t nc2, size_t kc, const float* restrict a,
                     const uint16_t* restrict w, size_t ps, float* restrict c, int accumulate) {
  const size_t zz = (size_t)((uint32_t)kc >> 31);
  a = a + zz;
  w = w + zz;
  const uint16_t* u = (const uint16_t*)((const uint8_t*)w + ps);
  ACC16_DECL
  const x16c_t cs = x16_consts(DT);
  v128_t bad = zero;
  if (ODD) {
    v128_t w0, w1, w2, w3;
    dec16_k(DT, EXACT, wasm_v128_load(w), cs, &bad, &w0, &w1);
    dec16_k(DT, EXACT, wasm_v128_load(u), cs, &bad, &w2, &w3);
    STEP16(1, 0, w0, w1, w2, w3);
    w += NR;
    u += NR;
    a += 4;
    kc--;
  }
  for (size_t n = kc / 2; n; n--) {
    v128_t w0, w1, w2, w3;
    dec16_k(DT, EXACT, wasm_v128_load(w), cs, &bad, &w0, &w1);
    dec16_k(DT, EXACT, wasm_v128_load(u), cs, &bad, &w2, &w3);
    STEP16(0, 0, w0, w1, w2, w3);
    dec16_k(DT, EXACT, wasm_v128_load(w + NR), cs, &bad, &w0, &w1);
    dec16_k(DT, EXACT, wasm_v128_load(u + NR), cs, &bad, &w2, &w3);
    STEP16(1, 16, w0, w1, w2, w3);
    w += 2 * NR;
    u += 2 * NR;
    a += 8;
  }
  if (kc & 1) {
    v128_t w0, w1, w2, w3;
    dec16_k(DT, EXACT, wasm_v128_load(w), cs, &bad, &w0, &w1);
    dec16_k(DT, EXACT, wasm_v128_load(u), cs, &bad, &w2, &w3);
    STEP16(0, 0, w0, w1, w2, w3);
  }
  if (DT == DT_F16 && !EXACT && wasm_v128_any_true(bad)) return 0;
  ACC16_STORE;
  return 1;
}

#define X16_ROW16(DT, ODD) \
  if (!x16_row16(DT, ODD, 0, nc1, nc2, kc, a, w, ps, c, accumulate)) x16_row16(DT, ODD, 1, nc1, nc2, kc, a, w, ps, c, accumulate);

void f32_gemm_1x16wx16(size_t nc1, size_t nc2, size_t k0, size_t kc, const float* restrict a, const uint16_t* restrict w,
                       size_t ps, float* restrict c, int accumulate, int dt) {
  const int odd = (k0 & 1) && kc;
  if (dt == DT_BF16) {
    if (odd) { X16_ROW16(DT_BF16, 1) }
    else { X16_ROW16(DT_BF16, 0) }
  } else {
    if (odd) { X16_ROW16(DT_F16, 1) }
    else { X16_ROW16(DT_F16, 0) }
  }
}

INLINE void x16_decode(const int DT, const uint16_t* w, size_t kc, float* out) {
  const x16c_t cs = x16_consts(DT);
  for (size_t k = 0; k < kc; k++) {
    const v128_t h = wasm_v128_load(w + NR * k);
    v128_t w0, w1;
    if (DT == DT_F16 && wasm_v128_any_true(f16_special(h, cs))) dec16_exact(h, &w0, &w1);
    else dec16(DT, h, cs, &w0, &w1);
    wasm_v128_store(out + NR * k, w0);
    wasm_v128_store(out + NR * k + 4, w1);
  }
}

void decode_wx16(const uint16_t* w, size_t kc, int dt, float* out) {
  if (dt == DT_BF16) x16_decode(DT_BF16, w, kc, out);
  else x16_decode(DT_F16, w, kc, out);
}

/* Tests: n (a multiple of 8) bf16 / f16 codes through the in-register conversion (exhaustive checks
   against common.h's scalar bf16_to_f32 / f16_to_f32, NaN payloads and subnormals included). */
EXPORT(check_decode_wx16) void check_decode_wx16(int32_t dt, const uint16_t* in, float* out, int32_t n) {
  for (int32_t i = 0; i < n; i += NR) decode_wx16(in + i, 1, dt, out + i);
}
