/* Element codecs of every job data type (ports of src/common/low_precision.ts and data_type.ts):
   exact decoders to f32 / int32, and f32 -> dst encoders with round-to-nearest-even and saturation.
   4-bit types: element i is the low nibble (i even) or high nibble (i odd) of byte i/2. */
#pragma once
#include "common.h"
#include "job.h"

typedef union { uint32_t u; float f; } fbits_t;

INLINE float f32_from_bits(uint32_t u) { fbits_t v = { u }; return v.f; }
INLINE uint32_t f32_bits(float f) { fbits_t v; v.f = f; return v.u; }

INLINE uint32_t nibble(const void* p, size_t i) {
  return (uint32_t)(((const uint8_t*)p)[i >> 1] >> ((i & 1) << 2)) & 0xfu;
}

/* OFP8 E4M3 (bias 7, no Inf, NaN = S.1111.111, max 448). */
INLINE float f8e4m3_to_f32(uint32_t c) {
  const uint32_t s = (c & 0x80u) << 24, e = (c >> 3) & 0xfu, m = c & 7u;
  if (e == 0) return f32_from_bits(f32_bits((float)m * 0x1p-9f) | s);
  if (e == 15 && m == 7) return f32_from_bits(s | 0x7fc00000u);
  return f32_from_bits(s | ((e + 120u) << 23) | (m << 20));
}

/* OFP8 E5M2: the upper byte of an IEEE half. */
INLINE float f8e5m2_to_f32(uint32_t c) { return f16_to_f32((uint16_t)((c & 0xffu) << 8)); }

/* OCP MX FP4 E2M1: 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives (0x8 is -0). */
INLINE float f4e2m1_to_f32(uint32_t c) {
  static const float t[16] = { 0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
                               -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f };
  return t[c & 0xfu];
}

/* OCP MX E8M0 scale: 2^(c - 127), 0xFF = NaN; 0x00 = 2^-127 (an f32 subnormal). */
INLINE float e8m0_to_f32(uint32_t c) {
  c &= 0xffu;
  if (c == 0xffu) return f32_from_bits(0x7fc00000u);
  if (c == 0) return f32_from_bits(0x00400000u);
  return f32_from_bits(c << 23);
}

/* Element i of a buffer of type dt, as f32 (exact for every type but s32 beyond 2^24). */
INLINE float load_any(const void* p, int dt, size_t i) {
  switch (dt) {
    case DT_F32: return ((const float*)p)[i];
    case DT_BF16: return bf16_to_f32(((const uint16_t*)p)[i]);
    case DT_F16: return f16_to_f32(((const uint16_t*)p)[i]);
    case DT_S8: return (float)((const int8_t*)p)[i];
    case DT_U8: return (float)((const uint8_t*)p)[i];
    case DT_S4: return (float)((int32_t)(nibble(p, i) ^ 8u) - 8);
    case DT_U4: return (float)nibble(p, i);
    case DT_F8_E4M3: return f8e4m3_to_f32(((const uint8_t*)p)[i]);
    case DT_F8_E5M2: return f8e5m2_to_f32(((const uint8_t*)p)[i]);
    case DT_F4_E2M1: return f4e2m1_to_f32(nibble(p, i));
    case DT_S32: return (float)((const int32_t*)p)[i];
    case DT_E8M0: return e8m0_to_f32(((const uint8_t*)p)[i]);
    default: return 0.0f;
  }
}

/* f4_e2m1 code as 2 v: an exact integer in [-12, 12] (the integer path's fp4 weights; their scales carry the 0.5). */
INLINE int32_t f4e2m1_x2(uint32_t c) {
  static const int8_t t[16] = { 0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12 };
  return t[c & 0xfu];
}

/* Element i of an integer buffer (s8 u8 s4 u4 s32), as int32; f4_e2m1 weights as 2 v (f4e2m1_x2). */
INLINE int32_t load_int(const void* p, int dt, size_t i) {
  switch (dt) {
    case DT_S8: return ((const int8_t*)p)[i];
    case DT_U8: return ((const uint8_t*)p)[i];
    case DT_S4: return (int32_t)(nibble(p, i) ^ 8u) - 8;
    case DT_U4: return (int32_t)nibble(p, i);
    case DT_S32: return ((const int32_t*)p)[i];
    case DT_F4_E2M1: return f4e2m1_x2(nibble(p, i));
    default: return 0;
  }
}

INLINE int is_int_dt(int dt) { return dt == DT_S8 || dt == DT_U8 || dt == DT_S4 || dt == DT_U4 || dt == DT_S32; }

/* Round to nearest even, saturate to [lo, hi]; NaN -> 0. */
INLINE int32_t f32_to_int_sat(float x, int32_t lo, int32_t hi) {
  if (!(x == x)) return 0;
  x = wasm_f32x4_extract_lane(wasm_f32x4_nearest(wasm_f32x4_splat(x)), 0); /* f32.nearest: ties to even */
  if (x <= (float)lo) return lo;
  if (x >= (float)hi) return hi; /* s32: (float)hi = 2^31, so every x below it converts without trapping */
  return (int32_t)x;
}

/* f32 -> minifloat code, round to nearest even, saturating (finite overflow and Inf -> +-max), NaN ->
   nan_code: encodeMini of low_precision.ts with saturate = true, for an f32 input. */
INLINE uint32_t f32_to_mini(float xf, int mbits, int bias, uint32_t max_code, uint32_t nan_code, double max_val) {
  if (!(xf == xf)) return nan_code;
  const uint32_t sb = (f32_bits(xf) >> 31) ? 0x80u : 0u; /* 8-bit formats only */
  double a = (double)xf;
  if (a < 0) a = -a;
  if (a == 0) return sb;
  if (a > 3.4e38) return sb | max_code; /* Inf */
  const int emin = 1 - bias;
  union { double d; uint64_t u; } db = { a };
  int e = (int)((db.u >> 52) & 0x7ff) - 1023; /* f32 values are normal doubles */
  int qexp = (e > emin ? e : emin) - mbits;
  union { double d; uint64_t u; } sc = { 0 };
  sc.u = (uint64_t)(1023 - qexp) << 52; /* 2^-qexp */
  const double r = a * sc.d;            /* exact */
  double n = __builtin_floor(r);
  const double frac = r - n;
  if (frac > 0.5 || (frac == 0.5 && ((uint32_t)n & 1u))) n += 1.0; /* n < 2^(mbits+1) */
  if (n == 0) return sb;
  sc.u = (uint64_t)(1023 + qexp) << 52;
  if (n * sc.d > max_val) return sb | max_code;
  uint32_t ni = (uint32_t)n;
  if (qexp == emin - mbits) return sb | ni;
  int ee = qexp + mbits;
  if (ni == (1u << (mbits + 1))) {
    ni >>= 1;
    ee += 1;
  }
  return sb | ((uint32_t)(ee + bias) << mbits) | (ni - (1u << mbits));
}

INLINE uint32_t f32_to_f8e4m3(float x) { return f32_to_mini(x, 3, 7, 0x7e, 0x7f, 448.0); }
INLINE uint32_t f32_to_f8e5m2(float x) { return f32_to_mini(x, 2, 15, 0x7b, 0x7e, 57344.0); }

/* Stores x as element i of a dst buffer of type dt (f32 bf16 f16 s8 u8 s32 f8_e4m3 f8_e5m2). */
INLINE void store_any(void* p, int dt, size_t i, float x) {
  switch (dt) {
    case DT_F32: ((float*)p)[i] = x; break;
    case DT_BF16: ((uint16_t*)p)[i] = f32_to_bf16(x); break;
    case DT_F16: ((uint16_t*)p)[i] = f32_to_f16(x); break;
    case DT_S8: ((int8_t*)p)[i] = (int8_t)f32_to_int_sat(x, -128, 127); break;
    case DT_U8: ((uint8_t*)p)[i] = (uint8_t)f32_to_int_sat(x, 0, 255); break;
    case DT_S32: ((int32_t*)p)[i] = f32_to_int_sat(x, (int32_t)0x80000000u, 0x7fffffff); break;
    case DT_F8_E4M3: ((uint8_t*)p)[i] = (uint8_t)f32_to_f8e4m3(x); break;
    case DT_F8_E5M2: ((uint8_t*)p)[i] = (uint8_t)f32_to_f8e5m2(x); break;
    default: break;
  }
}
