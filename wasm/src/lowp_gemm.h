#pragma once
/* Shared by the f32 x low-precision-weights microkernels (f32-gemm-4x8w8-wasmsimd.c: 8-bit codes,
   f32-gemm-4x8w4-wasmsimd.c: 4-bit codes; issue 12). The weights stay in their packed code layout
   (gemm-lowp.c) and each k's 8 codes are decoded to two f32x4 in registers right before the FMAs;
   nothing is written back. Optional per-call affine step: w' = (w - z[n]) * s[n] (the weights zero
   point, and the scale when it varies along K: the caller splits K at the scale blocks), exactly the
   arithmetic of the fused path's B packing (gemm-fused.c pack_b_f32), so results do not depend on
   which path ran. Accumulation: per k-pair (v + x0*w0) + x1*w1, the f32 kernel's order. */
#include "common.h"
#include "ukernel.h"
#include "tile_io.h"

/* Accumulators of R <= 4 rows x 8 columns, and the C rows they come from / go to. */
#define ACC_DECL                                                                              \
  const v128_t zero = wasm_f32x4_splat(0.0f);                                                 \
  v128_t v00 = zero, v01 = zero, v10 = zero, v11 = zero, v20 = zero, v21 = zero, v30 = zero, v31 = zero; \
  float* c0 = c;                                                                              \
  float* c1 = c0 + ldc;                                                                       \
  float* c2 = c1 + ldc;                                                                       \
  float* c3 = c2 + ldc;                                                                       \
  if (accumulate) {                                                                           \
    load_row8(c0, nc, &v00, &v01);                                                            \
    if (R > 1) load_row8(c1, nc, &v10, &v11);                                                 \
    if (R > 2) load_row8(c2, nc, &v20, &v21);                                                 \
    if (R > 3) load_row8(c3, nc, &v30, &v31);                                                 \
  }

#define ACC_STORE                                    \
  if (R > 3) store_row8(c3, nc, v30, v31);           \
  if (R > 2) store_row8(c2, nc, v20, v21);           \
  if (R > 1) store_row8(c1, nc, v10, v11);           \
  store_row8(c0, nc, v00, v01)

/* v += x * w for every row, x the row's A value at micro-panel offset OFF (bytes) of the k; FIRST: the
   k of a pair that goes on the chain as MADD (FMA in the relaxed build), else mul then add. */
#define ROWS_STEP(FIRST, OFF, w0, w1)                                                                   \
  do {                                                                                                   \
    const v128_t x0_ = LDS(a, OFF);                                                                      \
    if (FIRST) { v00 = MADD(x0_, w0, v00); v01 = MADD(x0_, w1, v01); }                                   \
    else { v00 = wasm_f32x4_add(v00, wasm_f32x4_mul(x0_, w0)); v01 = wasm_f32x4_add(v01, wasm_f32x4_mul(x0_, w1)); } \
    if (R > 1) {                                                                                         \
      const v128_t x1_ = LDS(a, OFF + 4);                                                                \
      if (FIRST) { v10 = MADD(x1_, w0, v10); v11 = MADD(x1_, w1, v11); }                                 \
      else { v10 = wasm_f32x4_add(v10, wasm_f32x4_mul(x1_, w0)); v11 = wasm_f32x4_add(v11, wasm_f32x4_mul(x1_, w1)); } \
    }                                                                                                    \
    if (R > 2) {                                                                                         \
      const v128_t x2_ = LDS(a, OFF + 8);                                                                \
      if (FIRST) { v20 = MADD(x2_, w0, v20); v21 = MADD(x2_, w1, v21); }                                 \
      else { v20 = wasm_f32x4_add(v20, wasm_f32x4_mul(x2_, w0)); v21 = wasm_f32x4_add(v21, wasm_f32x4_mul(x2_, w1)); } \
    }                                                                                                    \
    if (R > 3) {                                                                                         \
      const v128_t x3_ = LDS(a, OFF + 12);                                                               \
      if (FIRST) { v30 = MADD(x3_, w0, v30); v31 = MADD(x3_, w1, v31); }                                 \
      else { v30 = wasm_f32x4_add(v30, wasm_f32x4_mul(x3_, w0)); v31 = wasm_f32x4_add(v31, wasm_f32x4_mul(x3_, w1)); } \
    }                                                                                                    \
  } while (0)

/* Eight int16 lanes (one k's 8 columns) as two f32x4. */
INLINE void i16_to_f32x8(v128_t h, v128_t* lo, v128_t* hi) {
  *lo = wasm_f32x4_convert_i32x4(wasm_i32x4_extend_low_i16x8(h));
  *hi = wasm_f32x4_convert_i32x4(wasm_i32x4_extend_high_i16x8(h));
}

/* The affine step on one k's two vectors. */
#define AFFINE(w0, w1)                                  \
  if (AFF) {                                            \
    w0 = wasm_f32x4_mul(wasm_f32x4_sub(w0, z0), s0);    \
    w1 = wasm_f32x4_mul(wasm_f32x4_sub(w1, z1), s1);    \
  }
