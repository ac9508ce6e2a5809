#pragma once
/* Shared by the f32 x low-precision-weights microkernels (issue 12):
     f32-gemm-2x8w8-wasmsimd.c  8-bit codes decoded in registers (s8 u8 f8_e4m3 f8_e5m2)
     f32-gemm-2x8w4-wasmsimd.c  4-bit codes decoded in registers (s4 u4 f4_e2m1)
     f32-gemm-2x8c2-wasmsimd.c  the same arithmetic on weights already decoded into an L1 block
   The weights stay in their packed code layouts (gemm-lowp.c). Each weight is w' = decode(code), or
   (decode(code) - z[n]) * s[n] with the zero point and the K-varying scale of its K block (the fused
   path's B packing arithmetic, gemm-fused.c pack_b_f32).

   One arithmetic for every tile height: each row keeps two accumulator chains per 4 columns, one for
   the even and one for the odd k of the call (counted from its first k), and C = even + odd at the
   end of the call (the even chain starts from C when accumulating). Two rows at most per call: with
   1-2 rows (decode) a single chain per column group was latency-bound (~6 cycles per k); the split
   chains and the decode fill the ports instead. Taller tiles decode each panel piece once into L1
   and run the c2 kernel over it two rows at a time: the same chains, the same results (a row's value
   never depends on how many rows its expert got), bitwise. */
#include "common.h"
#include "ukernel.h"
#include "tile_io.h"

/* A: 4-row micro-panels (driver.h), element (r, k) at a[4k + r]: the kernels take `a` pointing at
   their first row inside the micro-panel, so row r of the call is at byte 16k + 4r. */
#define LDA(p, off) wasm_v128_load32_splat((const char*)(p) + (off))

#define ACC_DECL                                                                        \
  const v128_t zero = wasm_f32x4_splat(0.0f);                                           \
  v128_t e00 = zero, e01 = zero, o00 = zero, o01 = zero;                                \
  v128_t e10 = zero, e11 = zero, o10 = zero, o11 = zero;                                \
  float* c0 = c;                                                                        \
  float* c1 = c0 + ldc;                                                                 \
  if (accumulate) {                                                                     \
    load_row8(c0, nc, &e00, &e01);                                                      \
    if (R > 1) load_row8(c1, nc, &e10, &e11);                                           \
  }

#define ACC_STORE                                                                                   \
  if (R > 1) store_row8(c1, nc, wasm_f32x4_add(e10, o10), wasm_f32x4_add(e11, o11));               \
  store_row8(c0, nc, wasm_f32x4_add(e00, o00), wasm_f32x4_add(e01, o01))

/* Both rows += x * w for the k whose A values sit at byte OFF of `a`, into the even (ODD = 0) or odd chains. */
#define STEP(ODD, OFF, w0, w1)                                                     \
  do {                                                                             \
    const v128_t x0_ = LDA(a, OFF);                                                \
    if (!(ODD)) { e00 = MADD(x0_, w0, e00); e01 = MADD(x0_, w1, e01); }            \
    else { o00 = MADD(x0_, w0, o00); o01 = MADD(x0_, w1, o01); }                   \
    if (R > 1) {                                                                   \
      const v128_t x1_ = LDA(a, (OFF) + 4);                                        \
      if (!(ODD)) { e10 = MADD(x1_, w0, e10); e11 = MADD(x1_, w1, e11); }          \
      else { o10 = MADD(x1_, w0, o10); o11 = MADD(x1_, w1, o11); }                 \
    }                                                                              \
  } while (0)

/* Eight int16 lanes (one k's 8 columns) as two f32x4. */
INLINE void i16_to_f32x8(v128_t h, v128_t* lo, v128_t* hi) {
  *lo = wasm_f32x4_convert_i32x4(wasm_i32x4_extend_low_i16x8(h));
  *hi = wasm_f32x4_convert_i32x4(wasm_i32x4_extend_high_i16x8(h));
}

/* The affine step on one k's two vectors (z0 z1 s0 s1 in scope). */
#define AFFINE(w0, w1)                                  \
  if (AFF) {                                            \
    w0 = wasm_f32x4_mul(wasm_f32x4_sub(w0, z0), s0);    \
    w1 = wasm_f32x4_mul(wasm_f32x4_sub(w1, z1), s1);    \
  }

#define AFF_DECL                                            \
  v128_t z0 = zero, z1 = zero, s0 = zero, s1 = zero;        \
  if (AFF) {                                                \
    z0 = wasm_v128_load(zq);                                \
    z1 = wasm_v128_load(zq + 4);                            \
    s0 = wasm_v128_load(sq);                                \
    s1 = wasm_v128_load(sq + 4);                            \
  }
