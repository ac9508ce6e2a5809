/* f32 GEMM microkernel, 4 rows x 8 columns, on weights packed in 8-column panels (kc x 8, contiguous).
   Baseline build: f32x4 mul + add. Relaxed build (-DRELAXED): f32x4.relaxed_madd (FMA on x86/ARM).
   C (+)= A[mr x kc] * W[kc x 8]; at the last K block the epilogue adds bias and applies element-wise
   post-ops while the tile is still in registers. */
#include "common.h"
#include "ukernel.h"


INLINE v128_t apply_elt(v128_t x, int alg, float alpha, float beta) {
  switch (alg) {
    case ELT_RELU: {
      v128_t neg = wasm_f32x4_mul(x, wasm_f32x4_splat(alpha));
      return wasm_v128_bitselect(x, neg, wasm_f32x4_gt(x, wasm_f32x4_splat(0.0f)));
    }
    case ELT_LINEAR: return wasm_f32x4_add(wasm_f32x4_mul(x, wasm_f32x4_splat(alpha)), wasm_f32x4_splat(beta));
    case ELT_CLIP: return wasm_f32x4_pmin(wasm_f32x4_splat(beta), wasm_f32x4_pmax(wasm_f32x4_splat(alpha), x));
    case ELT_ABS: return wasm_f32x4_abs(x);
    case ELT_SQUARE: return wasm_f32x4_mul(x, x);
    default: return x;
  }
}

INLINE void load_row(const float* c, size_t nc, v128_t* lo, v128_t* hi) {
  if (nc == 8) {
    *lo = wasm_v128_load(c);
    *hi = wasm_v128_load(c + 4);
    return;
  }
  float t[8] = {0};
  for (size_t j = 0; j < nc; j++) t[j] = c[j];
  *lo = wasm_v128_load(t);
  *hi = wasm_v128_load(t + 4);
}

INLINE void store_row(float* c, size_t nc, v128_t lo, v128_t hi) {
  if (nc == 8) {
    wasm_v128_store(c, lo);
    wasm_v128_store(c + 4, hi);
    return;
  }
  float t[8];
  wasm_v128_store(t, lo);
  wasm_v128_store(t + 4, hi);
  for (size_t j = 0; j < nc; j++) c[j] = t[j];
}

void UKERNEL_NAME(f32_gemm_4x8)(size_t mr, size_t nc, size_t kc, const float* restrict a, size_t lda,
                               const float* restrict w, float* restrict c, size_t ldc, int accumulate,
                               const epilogue_t* epi) {
  const float* a0 = a;
  const float* a1 = mr > 1 ? a0 + lda : a0;
  const float* a2 = mr > 2 ? a1 + lda : a1;
  const float* a3 = mr > 3 ? a2 + lda : a2;
  float* c0 = c;
  float* c1 = mr > 1 ? c0 + ldc : c0;
  float* c2 = mr > 2 ? c1 + ldc : c1;
  float* c3 = mr > 3 ? c2 + ldc : c2;

  v128_t v00, v01, v10, v11, v20, v21, v30, v31;
  if (accumulate) {
    load_row(c0, nc, &v00, &v01);
    load_row(c1, nc, &v10, &v11);
    load_row(c2, nc, &v20, &v21);
    load_row(c3, nc, &v30, &v31);
  } else {
    v00 = v01 = v10 = v11 = v20 = v21 = v30 = v31 = wasm_f32x4_splat(0.0f);
  }
  for (size_t k = 0; k < kc; k++) {
    const v128_t b0 = wasm_v128_load(w);
    const v128_t b1 = wasm_v128_load(w + 4);
    w += 8;
    const v128_t x0 = wasm_v128_load32_splat(a0 + k);
    const v128_t x1 = wasm_v128_load32_splat(a1 + k);
    const v128_t x2 = wasm_v128_load32_splat(a2 + k);
    const v128_t x3 = wasm_v128_load32_splat(a3 + k);
    v00 = MADD(x0, b0, v00);
    v01 = MADD(x0, b1, v01);
    v10 = MADD(x1, b0, v10);
    v11 = MADD(x1, b1, v11);
    v20 = MADD(x2, b0, v20);
    v21 = MADD(x2, b1, v21);
    v30 = MADD(x3, b0, v30);
    v31 = MADD(x3, b1, v31);
  }
  if (epi) {
    if (epi->bias) {
      const v128_t bb0 = wasm_v128_load(epi->bias);
      const v128_t bb1 = wasm_v128_load(epi->bias + 4);
      v00 = wasm_f32x4_add(v00, bb0); v01 = wasm_f32x4_add(v01, bb1);
      v10 = wasm_f32x4_add(v10, bb0); v11 = wasm_f32x4_add(v11, bb1);
      v20 = wasm_f32x4_add(v20, bb0); v21 = wasm_f32x4_add(v21, bb1);
      v30 = wasm_f32x4_add(v30, bb0); v31 = wasm_f32x4_add(v31, bb1);
    }
    for (int i = 0; i < epi->n_elt; i++) {
      const int alg = epi->alg[i];
      const float al = epi->alpha[i], be = epi->beta[i];
      v00 = apply_elt(v00, alg, al, be); v01 = apply_elt(v01, alg, al, be);
      v10 = apply_elt(v10, alg, al, be); v11 = apply_elt(v11, alg, al, be);
      v20 = apply_elt(v20, alg, al, be); v21 = apply_elt(v21, alg, al, be);
      v30 = apply_elt(v30, alg, al, be); v31 = apply_elt(v31, alg, al, be);
    }
  }
  store_row(c3, nc, v30, v31);
  store_row(c2, nc, v20, v21);
  store_row(c1, nc, v10, v11);
  store_row(c0, nc, v00, v01);
}
