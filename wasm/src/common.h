#pragma once
#include <stdint.h>
#include <stddef.h>
#include <wasm_simd128.h>

#define EXPORT(name) __attribute__((export_name(#name)))
#define INLINE static inline __attribute__((always_inline))
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))

/* Microkernel geometry: MR rows x NR columns of C per call; weights are packed in NR-column panels. */
#define MR 4
#define NR 8
/* The integer kernel's rows: 3, because with 4 V8 spills an accumulator (8 accumulators + 4 weight
   vectors + 2 splats + 2 products > 15 xmm registers) and the reload sits in the loop-carried chain:
   the 3-row kernel does 11-32% more int ops per second (Zen 5, Node 20). */
#define MR_INT 3

INLINE float bf16_to_f32(uint16_t b) {
  union { uint32_t u; float f; } v = { (uint32_t)b << 16 };
  return v.f;
}

INLINE uint16_t f32_to_bf16(float x) {
  union { float f; uint32_t u; } v = { x };
  uint32_t u = v.u;
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

INLINE float f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  uint32_t e = (h >> 10) & 0x1f, m = h & 0x3ff;
  union { uint32_t u; float f; } v;
  if (e == 0) {
    union { uint32_t u; float f; } mag = { 0 };
    mag.f = (float)m * (1.0f / 16777216.0f); /* exact: m < 2^10, scale 2^-24 */
    v.u = sign | mag.u;
  } else if (e == 0x1f) {
    v.u = sign | 0x7f800000u | (m << 13);
  } else {
    v.u = sign | ((e + 112) << 23) | (m << 13);
  }
  return v.f;
}

INLINE uint16_t f32_to_f16(float x) {
  union { float f; uint32_t u; } v = { x };
  uint32_t u = v.u;
  uint32_t sign = (u >> 16) & 0x8000;
  int32_t exp = (int32_t)((u >> 23) & 0xff);
  uint32_t mant = u & 0x7fffff;
  if (exp == 0xff) return (uint16_t)(sign | 0x7c00 | (mant ? (0x200 | (mant >> 13)) : 0));
  int32_t e = exp - 127 + 15;
  if (e >= 0x1f) return (uint16_t)(sign | 0x7c00);
  if (e <= 0) {
    if (e < -10) return (uint16_t)sign;
    mant |= 0x800000;
    uint32_t shift = (uint32_t)(14 - e);
    uint32_t half = 1u << (shift - 1);
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t r = mant >> shift;
    if (rem > half || (rem == half && (r & 1))) r += 1;
    return (uint16_t)(sign | r);
  }
  uint32_t r = ((uint32_t)e << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (r & 1))) r += 1;
  return (uint16_t)(sign | r);
}

/* Loads element i of a buffer of type dt (DT_F32/BF16/F16) as f32. */
INLINE float load_elem(const void* p, int dt, size_t i) {
  if (dt == 0) return ((const float*)p)[i];
  uint16_t h = ((const uint16_t*)p)[i];
  return dt == 1 ? bf16_to_f32(h) : f16_to_f32(h);
}

INLINE void store_elem(void* p, int dt, size_t i, float x) {
  if (dt == 0) ((float*)p)[i] = x;
  else ((uint16_t*)p)[i] = dt == 1 ? f32_to_bf16(x) : f32_to_f16(x);
}

/* a * b + c: FMA in the relaxed-SIMD build (clang-16 has the builtin but not yet the header name),
   mul + add in the baseline build. */
#ifdef RELAXED
#define MADD(a, b, c) ((v128_t)__builtin_wasm_relaxed_madd_f32x4((__f32x4)(a), (__f32x4)(b), (__f32x4)(c)))
#else
#define MADD(a, b, c) wasm_f32x4_add((c), wasm_f32x4_mul((a), (b)))
#endif
