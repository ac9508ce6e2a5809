/* Kernels for the benchmark driver: the machine's SIMD ceiling and the bare microkernel. */
#include "common.h"
#include "ukernel.h"
#include "job.h"


/* 12 independent accumulator chains of the microkernel's own operation (mul+add, or FMA): the
   register-only ceiling. 96 flops per iteration. */
EXPORT(peak_f32) float peak_f32(int32_t iters, float seed) {
  v128_t x0 = wasm_f32x4_splat(seed), x1 = wasm_f32x4_splat(seed * 0.5f), y = wasm_f32x4_splat(0.999f);
  v128_t a0 = x0, a1 = x1, a2 = x0, a3 = x1, a4 = x0, a5 = x1, a6 = x0, a7 = x1, a8 = x0, a9 = x1, a10 = x0, a11 = x1;
  for (int32_t i = 0; i < iters; i++) {
    __asm__ volatile("" : "+X"(y));
    a0 = MADD(x0, y, a0); a1 = MADD(x1, y, a1); a2 = MADD(x0, y, a2); a3 = MADD(x1, y, a3);
    a4 = MADD(x0, y, a4); a5 = MADD(x1, y, a5); a6 = MADD(x0, y, a6); a7 = MADD(x1, y, a7);
    a8 = MADD(x0, y, a8); a9 = MADD(x1, y, a9); a10 = MADD(x0, y, a10); a11 = MADD(x1, y, a11);
  }
  v128_t s = wasm_f32x4_add(wasm_f32x4_add(wasm_f32x4_add(a0, a1), wasm_f32x4_add(a2, a3)),
                            wasm_f32x4_add(wasm_f32x4_add(a4, a5), wasm_f32x4_add(a6, a7)));
  s = wasm_f32x4_add(s, wasm_f32x4_add(wasm_f32x4_add(a8, a9), wasm_f32x4_add(a10, a11)));
  return wasm_f32x4_extract_lane(s, 0);
}

/* The bare microkernel on L1-resident operands: reps calls of MR x NR x kc. */
EXPORT(ukernel_f32) float ukernel_f32(int32_t reps, int32_t kc, const float* a, const float* w, float* c) {
  for (int32_t r = 0; r < reps; r++) {
    __asm__ volatile("" ::: "memory");
    f32_gemm_4x8(MR, NR, (size_t)kc, a, w, c, NR, r > 0, 0);
  }
  return c[0];
}

/* The bare integer microkernel on L1-resident operands: reps calls of MR_INT x NR x kc (kc even). */
EXPORT(ukernel_s16) int32_t ukernel_s16(int32_t reps, int32_t kc, const int16_t* a, const int16_t* w, int32_t* c) {
  for (int32_t r = 0; r < reps; r++) {
    __asm__ volatile("" ::: "memory");
    s16_gemm_3x8(MR_INT, NR, (size_t)kc, a, w, c, NR, r > 0);
  }
  return c[0];
}

/* Reads n floats once with 4 independent f32x4 accumulators: the time to stream weights, for the
   decode target (touched weights must stream at most 2x slower inside the matmul). */
EXPORT(stream_f32) float stream_f32(const float* p, int32_t n) {
  v128_t s0 = wasm_f32x4_splat(0.0f), s1 = s0, s2 = s0, s3 = s0;
  int32_t i = 0;
  for (; i + 16 <= n; i += 16) {
    s0 = wasm_f32x4_add(s0, wasm_v128_load(p + i));
    s1 = wasm_f32x4_add(s1, wasm_v128_load(p + i + 4));
    s2 = wasm_f32x4_add(s2, wasm_v128_load(p + i + 8));
    s3 = wasm_f32x4_add(s3, wasm_v128_load(p + i + 12));
  }
  float r = wasm_f32x4_extract_lane(wasm_f32x4_add(wasm_f32x4_add(s0, s1), wasm_f32x4_add(s2, s3)), 0);
  for (; i < n; i++) r += p[i];
  return r;
}

/* The bare f32 x low-precision microkernels on L1-resident operands (issue 12): reps calls of
   mr x NR x kc; dt selects the 8-bit (s8 u8 f8) or 4-bit (s4 u4 f4) kernel; w: kc x 8 codes. */
EXPORT(ukernel_lowp) float ukernel_lowp(int32_t reps, int32_t mr, int32_t kc, int32_t dt, const float* a, const uint8_t* w, float* c) {
  const int four = dt == DT_S4 || dt == DT_U4 || dt == DT_F4_E2M1;
  for (int32_t r = 0; r < reps; r++) {
    __asm__ volatile("" ::: "memory");
    if (four) f32_gemm_2x8w4((size_t)mr, NR, 0, (size_t)kc, a, w, c, NR, r > 0, dt, 0, 0);
    else f32_gemm_2x8w8((size_t)mr, NR, 0, (size_t)kc, a, w, c, NR, r > 0, dt, 0, 0);
  }
  return c[0];
}

/* The bare integer microkernel on L1-resident operands by weights layout: reps calls of mr x NR x kc
   (kc even) on int16 k-pair panels (dt DT_S32), x8 codes (DT_S8 / DT_U8) or x4 codes (DT_S4 / DT_U4). */
EXPORT(ukernel_int) int32_t ukernel_int(int32_t reps, int32_t mr, int32_t kc, int32_t dt, const int16_t* a, const uint8_t* w, int32_t* c) {
  for (int32_t r = 0; r < reps; r++) {
    __asm__ volatile("" ::: "memory");
    if (dt == DT_S8 || dt == DT_U8) s16_gemm_3x8w8((size_t)mr, NR, (size_t)kc, a, w, c, NR, r > 0, dt);
    else if (dt == DT_S4 || dt == DT_U4) s16_gemm_3x8w4((size_t)mr, NR, (size_t)kc, a, w, c, NR, r > 0, dt);
    else s16_gemm_3x8((size_t)mr, NR, (size_t)kc, a, (const int16_t*)w, c, NR, r > 0);
  }
  return c[0];
}

/* The bare 1-row x 2-panel f32 x low-precision decode kernels (f32_gemm_1x16w8 / w4) on L1-resident
   operands: reps calls of 1 x 16 x kc; w: two panels ps bytes apart; sq: 16 scales or NULL. */
EXPORT(ukernel_lowp16) float ukernel_lowp16(int32_t reps, int32_t kc, int32_t dt, const float* a, const uint8_t* w, int32_t ps,
                                            float* c, const float* sq) {
  const int four = dt == DT_S4 || dt == DT_U4 || dt == DT_F4_E2M1;
  for (int32_t r = 0; r < reps; r++) {
    __asm__ volatile("" ::: "memory");
    if (four) f32_gemm_1x16w4(NR, NR, 0, (size_t)kc, a, w, (size_t)ps, c, r > 0, dt, 0, sq);
    else f32_gemm_1x16w8(NR, NR, 0, (size_t)kc, a, w, (size_t)ps, c, r > 0, dt, 0, sq);
  }
  return c[0];
}

/* The same shape on the relaxed-order kernels (f32_gemm_1x16r8 / r4, accumulation_mode relaxed); sq: one K block of
   kc k with 16 scales, or NULL. The activations are laid out once (relaxed_xdup) into xd (2 kc floats), as the
   driver does once per row and piece. */
EXPORT(ukernel_relaxed16) float ukernel_relaxed16(int32_t reps, int32_t kc, int32_t dt, const float* a, const uint8_t* w, int32_t ps,
                                                  float* c, const float* sq, float* xd) {
  const int four = dt == DT_S4 || dt == DT_U4;
  float xs[1];
  relaxed_xdup(a, (size_t)kc, (size_t)kc, four, xd, xs);
  for (int32_t r = 0; r < reps; r++) {
    __asm__ volatile("" ::: "memory");
    if (four) f32_gemm_1x16r4(NR, NR, (size_t)kc, sq ? (size_t)kc : 0, xd, xs, w, (size_t)ps, c, r > 0, dt, sq);
    else f32_gemm_1x16r8(NR, NR, (size_t)kc, sq ? (size_t)kc : 0, xd, xs, w, (size_t)ps, c, r > 0, dt, sq);
  }
  return c[0];
}

/* The 1-row integer decode kernels on 4-bit weights, L1-resident (issue 19): reps calls of 1 x 16 x kc;
   w: two x4 panels ps bytes apart. neu = 0: s16_gemm_3x8w4 per panel (a: the 3-row int16 micro-panel);
   1: s16_dq_1x16w4 (a: the quad layout, xs its activation sum); -1: s8_dq_1x16w4r (a: rd16_row's expansion, relaxed
   build); >= 32: the same in K blocks of neu k, folded with
   f32 scales read past each panel's codes (w + 4 kc: 8 per block, the x4:p8k2+q layout when ps = 4 kc + 32 kc / neu;
   xs: one sum per block). */
EXPORT(ukernel_dq4) int32_t ukernel_dq4(int32_t reps, int32_t kc, int32_t dt, int32_t neu, const int16_t* a, const int32_t* xs,
                                        const uint8_t* w, int32_t ps, int32_t* c) {
  for (int32_t r = 0; r < reps; r++) {
    __asm__ volatile("" ::: "memory");
    if (neu == -1) s8_dq_1x16w4r(NR, NR, (size_t)kc, 0, a, xs, w, (size_t)ps, 0, 0, c, r > 0, 1, dt);
    else if (neu >= 32) s16_dq_1x16w4(NR, NR, (size_t)kc, (size_t)neu, a, xs, w, (size_t)ps, (const float*)(w + 4 * kc), (size_t)ps / 4, c, 0, 1, dt);
    else if (neu) s16_dq_1x16w4(NR, NR, (size_t)kc, 0, a, xs, w, (size_t)ps, 0, 0, c, r > 0, 1, dt);
    else {
      s16_gemm_3x8w4(1, NR, (size_t)kc, a, w, c, NR, r > 0, dt);
      s16_gemm_3x8w4(1, NR, (size_t)kc, a, w + ps, c + NR, NR, r > 0, dt);
    }
  }
  return c[0];
}
/* The relaxed 1x16 kernels walking npan x4 (x8) panels of kc k two at a time from memory, as the decode workload
   streams one expert's weights. xd / xs: relaxed_xdup's layout. */
EXPORT(stream_relaxed16) int32_t stream_relaxed16(int32_t npan, int32_t kc, int32_t dt, const float* xd, const float* xs, const uint8_t* w,
                                                  float* c) {
  const int four = dt == DT_S4 || dt == DT_U4;
  const size_t ps = (four ? 4 : 8) * (size_t)kc;
  for (int32_t p = 0; p + 1 < npan; p += 2) {
    const uint8_t* pw = w + (size_t)p * ps;
    if (four) f32_gemm_1x16r4(NR, NR, (size_t)kc, 0, xd, xs, pw, ps, c + p * NR, 0, dt, 0);
    else f32_gemm_1x16r8(NR, NR, (size_t)kc, 0, xd, xs, pw, ps, c + p * NR, 0, dt, 0);
  }
  return (int32_t)c[0];
}
/* s16_quad_row for the kernel benchmark and the tests of the quad layout. */
/* s8_rd16_row (the relaxed i16x8 dot's expansion of a row) for the kernel benchmark. */
EXPORT(rd16_row) void rd16_row(const int16_t* a, int8_t* out, int32_t kcp, int32_t blk, int32_t* sums) { s8_rd16_row(a, out, (size_t)kcp, (size_t)blk, sums); }
EXPORT(quad_row) void quad_row(const int16_t* a, int16_t* out, int32_t kcp, int32_t blk, int32_t* sums) { s16_quad_row(a, out, (size_t)kcp, (size_t)blk, sums); }
/* The same walking npan panels of kc k (x4, ps = 4 kc bytes each, consecutive) two at a time, as the decode
   workload streams one expert's weights: weights from memory rather than L1. */
EXPORT(stream_dq4) int32_t stream_dq4(int32_t npan, int32_t kc, int32_t dt, int32_t neu, const int16_t* a, const int32_t* xs,
                                      const uint8_t* w, int32_t* c) {
  const size_t ps = 4 * (size_t)kc;
  for (int32_t p = 0; p + 1 < npan; p += 2) {
    const uint8_t* pw = w + (size_t)p * ps;
    if (neu == -1) s8_dq_1x16w4r(NR, NR, (size_t)kc, 0, a, xs, pw, ps, 0, 0, c + p * NR, 0, 1, dt);
    else if (neu) s16_dq_1x16w4(NR, NR, (size_t)kc, 0, a, xs, pw, ps, 0, 0, c + p * NR, 0, 1, dt);
    else {
      s16_gemm_3x8w4(1, NR, (size_t)kc, a, pw, c + p * NR, NR, 0, dt);
      s16_gemm_3x8w4(1, NR, (size_t)kc, a, pw + ps, c + p * NR + NR, NR, 0, dt);
    }
  }
  return c[0];
}
