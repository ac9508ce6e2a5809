/* f32 GEMM microkernel, up to 2 rows x 8 columns, on a block of weights already decoded to f32
   ([kc][8], in L1) with the split even / odd k chains of lowp_gemm.h: the tall-tile side of the
   packed low-precision weights path (gemm-lowp.c decodes a panel piece once, then every row pair of
   the tile runs here), bitwise the same arithmetic as the in-register decoding kernels. */
#include "lowp_gemm.h"

INLINE void c2_rows(const int R, size_t nc, size_t kc, const float* restrict a, const float* restrict w,
                    float* restrict c, size_t ldc, int accumulate) {
  const size_t zz = (size_t)((uint32_t)kc >> 31); /* 0: pointers V8 knows are zero-extended (f32 kernel) */
  a = a + zz;
  w = w + zz;
  ACC_DECL
  for (size_t n = kc / 2; n; n--) {
    const v128_t w0 = wasm_v128_load(w), w1 = wasm_v128_load(w + 4);
    STEP(0, 0, w0, w1);
    const v128_t w2 = wasm_v128_load(w + 8), w3 = wasm_v128_load(w + 12);
    STEP(1, 16, w2, w3);
    w += 16;
    a += 8;
  }
  if (kc & 1) {
    const v128_t w0 = wasm_v128_load(w), w1 = wasm_v128_load(w + 4);
    STEP(0, 0, w0, w1);
  }
  ACC_STORE;
}

void f32_gemm_2x8c2(size_t mr, size_t nc, size_t kc, const float* restrict a, const float* restrict w, float* restrict c,
                    size_t ldc, int accumulate) {
  if (mr >= 2) c2_rows(2, nc, kc, a, w, c, ldc, accumulate);
  else c2_rows(1, nc, kc, a, w, c, ldc, accumulate);
}
