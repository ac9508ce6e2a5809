/* f32 GEMM microkernel, up to 4 rows x 8 columns, on weights packed in 8-column panels (kc x 8,
   contiguous) and A packed in a 4-row micro-panel (kc x 4, contiguous: one stream instead of four,
   which lets the hardware prefetcher keep up with the weights: 4-row tiles on weights from DRAM went
   from 27 to 40 GFLOP/s). 1-, 2- and 3-row instances of the same body serve the last rows of a group.
   Baseline build: f32x4 mul + add. Relaxed build (-DRELAXED): f32x4.relaxed_madd (FMA on x86/ARM).
   C (+)= A[mr x kc] * W[kc x 8]; at the last K block the epilogue adds bias and applies element-wise
   post-ops while the tile is still in registers.

   The main loop is shaped for what V8's TurboFan (x64, 15 usable xmm registers) makes of it; each rule
   below was measured on Node 20 / Zen 5 against the disassembly (node --print-wasm-code):
   - K is unrolled by 2 and every load carries its constant offset inside the wasm instruction (inline
     asm: clang-16 never folds `p + const` into a load offset, which cost an i32.add per load).
   - The loads are volatile asm in a fixed order: the 4 weight vectors of both k first, then the two
     A values of each row (offsets 4r and 16 + 4r in the micro-panel). V8 keeps loads in wasm order and schedules the arithmetic late; this order is
     the one where it needs only 15 xmm registers (8 accumulators + 4 weights + 2 A splats + 1 product)
     and spills nothing. Other orders, k-unroll by 4, and 5 or 6 row tiles all spill an accumulator,
     whose store/reload then sits in the loop-carried chain (30-45% slower).
   - Each accumulator is updated as (v + x0*b0) + x1*b1 with the second product computed off the chain.
     In the FMA build this is fma(x0, b0, v) + x1*b1: the chain per 2 k is FMA + add instead of two
     FMAs, because 8 accumulators of back-to-back FMAs are latency-bound (~88% of peak on Zen 5).
     In the mul+add build it is exactly the sequential sum.
   - Pointers start as the result of an i32 add (of a zero V8 cannot see through), so V8 knows their
     upper 32 bits are clear and emits no zero-extending movl per pointer per iteration; the loop counts
     down to zero (add + jnz). */
#include "common.h"
#include "ukernel.h"
#include "tile_io.h"

/* LDV/LDS (tile_io.h) are volatile asm: the order of the loads is part of the register allocation
   recipe above. A and W are never written by the kernel, so no memory clobber is needed. The float row
   helpers below stay local: the generic 32-bit ones in tile_io.h measured ~10% slower here under V8. */

/* v + x0*b0 + x1*b1 (two consecutive k), the second product off the accumulator chain. */
#define MADD2(x0, b0, x1, b1, v) wasm_f32x4_add(wasm_f32x4_mul((x1), (b1)), MADD((x0), (b0), (v)))

INLINE v128_t apply_elt(v128_t x, int alg, float alpha, float beta) {
  switch (alg) {
    case ELT_RELU: {
      v128_t neg = wasm_f32x4_mul(x, wasm_f32x4_splat(alpha));
      return wasm_v128_bitselect(x, neg, wasm_f32x4_gt(x, wasm_f32x4_splat(0.0f)));
    }
    case ELT_LINEAR: return wasm_f32x4_add(wasm_f32x4_mul(x, wasm_f32x4_splat(alpha)), wasm_f32x4_splat(beta));
    case ELT_CLIP: return wasm_f32x4_pmin(wasm_f32x4_pmax(x, wasm_f32x4_splat(alpha)), wasm_f32x4_splat(beta)); /* a NaN x stays */
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

/* The kernel body for R = 1..4 rows (a constant after inlining: every `R > i` test folds away). Rows
   a short tile does not have are not computed: a 1-row tail costs about half a 4-row block (the
   accumulator chains, not the ports, bound it), where the padded 4-row kernel cost a whole one. Each
   row's arithmetic is the same in every instance, so a token's result never depends on how many other
   tokens its expert got. */
INLINE void gemm_rows(const int R, size_t nc, size_t kc, const float* restrict a, const float* restrict w,
                      float* restrict c, size_t ldc, int accumulate, const epilogue_t* epi) {
  /* 0 for every valid call (kc < 2^31: W alone holds 8 * kc floats), but V8 cannot fold it, so the
     pointers below are i32.add results it knows to be zero-extended. */
  const size_t z = (size_t)((uint32_t)kc >> 31);
  a = a + z;
  float* c0 = c;
  float* c1 = c0 + ldc;
  float* c2 = c1 + ldc;
  float* c3 = c2 + ldc;
  w = w + z;

  const v128_t zero = wasm_f32x4_splat(0.0f);
  v128_t v00 = zero, v01 = zero, v10 = zero, v11 = zero, v20 = zero, v21 = zero, v30 = zero, v31 = zero;
  if (accumulate) {
    load_row(c0, nc, &v00, &v01);
    if (R > 1) load_row(c1, nc, &v10, &v11);
    if (R > 2) load_row(c2, nc, &v20, &v21);
    if (R > 3) load_row(c3, nc, &v30, &v31);
  }

  size_t n = kc / 2;
  if (n) do {
    /* k: weights b0 (cols 0-3), b1 (cols 4-7); k+1: b2, b3. */
    const v128_t b0 = LDV(w, 0);
    const v128_t b2 = LDV(w, 32);
    const v128_t b1 = LDV(w, 16);
    const v128_t b3 = LDV(w, 48);
    /* A is a packed micro-panel: k-pair t of row r at a[8t + r] and a[8t + 4 + r]. Unused rows load
       nothing; the loads keep the order of the 4-row recipe above. */
    v128_t x00, x01, x10 = zero, x11 = zero, x20 = zero, x21 = zero, x30 = zero, x31 = zero;
    x00 = LDS(a, 0);
    x01 = LDS(a, 16);
    if (R > 1) { x10 = LDS(a, 4); x11 = LDS(a, 20); }
    if (R > 2) { x20 = LDS(a, 8); x21 = LDS(a, 24); }
    if (R > 3) { x30 = LDS(a, 12); x31 = LDS(a, 28); }
    v00 = MADD2(x00, b0, x01, b2, v00);
    v01 = MADD2(x00, b1, x01, b3, v01);
    if (R > 1) { v10 = MADD2(x10, b0, x11, b2, v10); v11 = MADD2(x10, b1, x11, b3, v11); }
    if (R > 2) { v20 = MADD2(x20, b0, x21, b2, v20); v21 = MADD2(x20, b1, x21, b3, v21); }
    if (R > 3) { v30 = MADD2(x30, b0, x31, b2, v30); v31 = MADD2(x30, b1, x31, b3, v31); }
    w += 16;
    a += 8;
  } while (--n);
  if (kc & 1) {
    const v128_t b0 = wasm_v128_load(w);
    const v128_t b1 = wasm_v128_load(w + 4);
    const v128_t x0 = wasm_v128_load32_splat(a);
    v00 = MADD(x0, b0, v00);
    v01 = MADD(x0, b1, v01);
    if (R > 1) {
      const v128_t x1 = wasm_v128_load32_splat(a + 1);
      v10 = MADD(x1, b0, v10);
      v11 = MADD(x1, b1, v11);
    }
    if (R > 2) {
      const v128_t x2 = wasm_v128_load32_splat(a + 2);
      v20 = MADD(x2, b0, v20);
      v21 = MADD(x2, b1, v21);
    }
    if (R > 3) {
      const v128_t x3 = wasm_v128_load32_splat(a + 3);
      v30 = MADD(x3, b0, v30);
      v31 = MADD(x3, b1, v31);
    }
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
  if (R > 3) store_row(c3, nc, v30, v31);
  if (R > 2) store_row(c2, nc, v20, v21);
  if (R > 1) store_row(c1, nc, v10, v11);
  store_row(c0, nc, v00, v01);
}

void UKERNEL_NAME(f32_gemm_4x8)(size_t mr, size_t nc, size_t kc, const float* restrict a, const float* restrict w,
                               float* restrict c, size_t ldc, int accumulate, const epilogue_t* epi) {
  switch (mr) {
    case 4: gemm_rows(4, nc, kc, a, w, c, ldc, accumulate, epi); break;
    case 3: gemm_rows(3, nc, kc, a, w, c, ldc, accumulate, epi); break;
    case 2: gemm_rows(2, nc, kc, a, w, c, ldc, accumulate, epi); break;
    default: gemm_rows(1, nc, kc, a, w, c, ldc, accumulate, epi); break;
  }
}
