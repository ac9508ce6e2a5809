#pragma once
/* The ends of the 1 row x 16 column integer decode kernels (s16-gemm-1x16w4 / -1x16w8-wasmsimd.c), shared:
   both keep a K block's exact int32 sums of the two panels in v0..v3 (columns 0-3, 4-7 of the first panel,
   then of the second) and fold them the same way. sc = 0: int32 C (+)= the sums, one block. Else block b's
   sums in f32 times its 8 + 8 f32 scales (sc + 8 b and sc + sps + 8 b) added in block order into the f32
   accumulators f0..f3 (F = p0 when first, else F + p_b), stored once at the end. */
#include "common.h"
#include "tile_io.h"

/* f0..f3: zero, or (sc, not first) the f32 C the blocks add to. */
#define DQ16_F_INIT                                  \
  const v128_t zero = wasm_i32x4_splat(0);           \
  v128_t f0 = zero, f1 = zero, f2 = zero, f3 = zero; \
  if (sc && !first) {                                \
    f0 = wasm_v128_load(c);                          \
    f1 = wasm_v128_load((const float*)c + 4);        \
    f2 = wasm_v128_load((const float*)c + 8);        \
    f3 = wasm_v128_load((const float*)c + 12);       \
  }

/* One block's products p0..p3 into f0..f3: F = p (START: the first block of C), else F + p. */
#define DQ16_FOLD4(START, P0, P1, P2, P3) \
  do {                                    \
    if (START) {                          \
      f0 = (P0);                          \
      f1 = (P1);                          \
      f2 = (P2);                          \
      f3 = (P3);                          \
    } else {                              \
      f0 = wasm_f32x4_add(f0, (P0));      \
      f1 = wasm_f32x4_add(f1, (P1));      \
      f2 = wasm_f32x4_add(f2, (P2));      \
      f3 = wasm_f32x4_add(f3, (P3));      \
    }                                     \
  } while (0)

/* After block k's sums (v0..v3, bias removed): the int32 store and return (sc = 0), or the fold into f0..f3. */
#define DQ16_BLOCK_END                                                                          \
  do {                                                                                          \
    if (!sc) {                                                                                  \
      if (acc) {                                                                                \
        v0 = wasm_i32x4_add(v0, wasm_v128_load(c));                                             \
        v1 = wasm_i32x4_add(v1, wasm_v128_load((const int32_t*)c + 4));                         \
        v2 = wasm_i32x4_add(v2, wasm_v128_load((const int32_t*)c + 8));                         \
        v3 = wasm_i32x4_add(v3, wasm_v128_load((const int32_t*)c + 12));                        \
      }                                                                                         \
      store_row8(c, nc1, v0, v1);                                                               \
      store_row8((int32_t*)c + 8, nc2, v2, v3);                                                 \
      return;                                                                                   \
    }                                                                                           \
    const v128_t p0 = wasm_f32x4_mul(wasm_f32x4_convert_i32x4(v0), wasm_v128_load(sc));          \
    const v128_t p1 = wasm_f32x4_mul(wasm_f32x4_convert_i32x4(v1), wasm_v128_load(sc + 4));      \
    const v128_t p2 = wasm_f32x4_mul(wasm_f32x4_convert_i32x4(v2), wasm_v128_load(sc + sps));    \
    const v128_t p3 = wasm_f32x4_mul(wasm_f32x4_convert_i32x4(v3), wasm_v128_load(sc + sps + 4)); \
    sc += NR;                                                                                   \
    DQ16_FOLD4(first && k == 0, p0, p1, p2, p3);                                                \
  } while (0)

/* After the last block: the f32 accumulators into C. */
#define DQ16_F_STORE                              \
  if (sc) {                                       \
    wasm_v128_store(c, f0);                       \
    wasm_v128_store((float*)c + 4, f1);           \
    wasm_v128_store((float*)c + 8, f2);           \
    wasm_v128_store((float*)c + 12, f3);          \
  }

/* The 2-row decode kernels' end: C rows c, c + ldc (nc columns) = the int32 sums v0, v1 (row 0) and v2, v3 (row 1),
   plus C when acc. */
INLINE void dq_store_rows2(int32_t* c, size_t ldc, size_t nc, int acc, v128_t v0, v128_t v1, v128_t v2, v128_t v3) {
  int32_t* c1 = c + ldc;
  if (acc) {
    v128_t t0, t1;
    load_row8(c, nc, &t0, &t1);
    v0 = wasm_i32x4_add(v0, t0);
    v1 = wasm_i32x4_add(v1, t1);
    load_row8(c1, nc, &t0, &t1);
    v2 = wasm_i32x4_add(v2, t0);
    v3 = wasm_i32x4_add(v3, t1);
  }
  store_row8(c, nc, v0, v1);
  store_row8(c1, nc, v2, v3);
}
