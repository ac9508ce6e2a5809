#pragma once
#include "common.h"
#include "job.h"

/* What the epilogue applies at the last K block: bias (NR floats, or NULL) then element-wise ops. */
typedef struct epilogue {
  const float* bias;
  int n_elt;
  const int32_t* alg;
  const float* alpha;
  const float* beta;
} epilogue_t;

#define UKERNEL_NAME(base) base

/* C[mr x nc] (+)= A[mr x kc] * W (packed kc x NR panel); mr <= MR, nc <= NR. A is a micro-panel:
   element (r, k) at a[k * MR + r] (rows past mr are never read). */
void f32_gemm_4x8(size_t mr, size_t nc, size_t kc, const float* restrict a, const float* restrict w,
                  float* restrict c, size_t ldc, int accumulate, const epilogue_t* epi);

/* C[mr x nc] (+)= A[mr x kc] (int16 micro-panel: k-pair t of row r at a[2 (3t + r)], kc even) * W
   (int16 k-pair-interleaved kc x NR panel), exact int32 accumulation (wrapping); mr <= MR_INT, nc <= NR. */
void s16_gemm_3x8(size_t mr, size_t nc, size_t kc, const int16_t* restrict a, const int16_t* restrict w,
                  int32_t* restrict c, size_t ldc, int accumulate);
/* The same with W an x8:p8 panel of s8 / u8 codes (w at the call's first k: its codes at w + 8k) or an
   x4:p8k2 panel of s4 / u4 codes (k-pair t at w + 8t); dt: the job DT of the codes. */
void s16_gemm_3x8w8(size_t mr, size_t nc, size_t kc, const int16_t* restrict a, const uint8_t* restrict w,
                    int32_t* restrict c, size_t ldc, int accumulate, int dt);
void s16_gemm_3x8w4(size_t mr, size_t nc, size_t kc, const int16_t* restrict a, const uint8_t* restrict w,
                    int32_t* restrict c, size_t ldc, int accumulate, int dt);
/* kc k (even) of such a panel widened into out as s16_gemm_3x8's int16 k-pair panel (kc x 8 int16). */
void s16_unpack_w8(const uint8_t* restrict w, size_t kc, int dt, int16_t* restrict out);
void s16_unpack_w4(const uint8_t* restrict w, size_t kc, int dt, int16_t* restrict out);
/* 1 row x one x8 / x4 panel with dynamic int8 activations and f32 K-block scales folded per block (s16-gemm-3x8-wasmsimd.c). */
void s16_dq_1x8(size_t kc, size_t blk, const int16_t* restrict a, const uint8_t* restrict w, const float* restrict sc, float* restrict c,
                int first, int dt);
/* 1 row x two x4 panels (w, w + ps; s4 / u4) with int16 activations in the quad layout (s16_quad_row copies
   the row of a 3-row micro-panel into it, with the activation sums xs per block of blk k): int32 sums
   (sc = 0, C (+)= sums) or blk-k blocks folded with f32 scales (sc, sc + sps: 8 per block each) as
   s16_dq_1x8 does; bitwise those kernels' results (s16-gemm-1x16w4-wasmsimd.c). */
void s16_quad_row(const int16_t* a, int16_t* out, size_t kcp, size_t blk, int32_t* sums);
/* The same with x0 and x2 times mul (16: s16_quad_row, for x4 codes; 1: for f4_e2m1 codes as 2 v + 12). */
void s16_quad_row_x(const int16_t* a, int16_t* out, size_t kcp, size_t blk, int32_t* sums, int32_t mul);
void s16_dq_1x16w4(size_t nc1, size_t nc2, size_t kc, size_t blk, const int16_t* restrict a, const int32_t* restrict xs,
                   const uint8_t* restrict w, size_t ps, const float* restrict sc, size_t sps, void* restrict c, int acc, int first,
                   int dt);
/* s16_dq_1x16w4 for f4_e2m1 codes with their 1-byte K-block scales (sdt DT_E8M0 / DT_F8_E4M3: 8 bytes per block,
   blk <= 64) read in place, each panel's past its codes (the second panel's sps bytes past the first's): K blocks
   folded into the 16 f32 at c (F = p0 when first, else C + p_b), the scales times 0.5 (the sums are of 2 v). */
void s16_dq_1x16f4(size_t kc, size_t blk, const int16_t* restrict a, const int32_t* restrict xs, const uint8_t* restrict w, size_t ps,
                   const uint8_t* restrict sc, size_t sps, int sdt, float* restrict c, int first);
/* 1 row x two x8 panels (w, w + ps; s8 / u8) with the row's int16 k-pairs of a 3-row micro-panel (a): int32 sums
   (sc = 0) or K blocks folded with f32 scales as s16_dq_1x16w4; one swizzle per 8 columns x 2 k, bitwise
   s16_gemm_3x8w8 / s16_dq_1x8 (s16-gemm-1x16w8-wasmsimd.c). */
void s16_dq_1x16w8(size_t nc1, size_t nc2, size_t kc, size_t blk, const int16_t* restrict a, const uint8_t* restrict w, size_t ps,
                   const float* restrict sc, size_t sps, void* restrict c, int acc, int first, int dt);
/* 2 rows x one x8 panel (s8 / u8) on the rows' int16 k-pairs of a 3-row micro-panel (a): C rows c, c + ldc (+)= the
   int32 sums (nc columns); bitwise s16_gemm_3x8w8 (s16-gemm-1x16w8-wasmsimd.c). */
void s16_dq_2x8w8(size_t nc, size_t kc, const int16_t* restrict a, const uint8_t* restrict w, int32_t* restrict c, size_t ldc, int acc,
                  int dt);
/* 2 rows x one x4 panel on the rows' quad layouts (a0, a1; activation sums xs0, xs1 over kc): C rows c, c + ldc
   (+)= the int32 sums (nc columns). */
void s16_dq_2x8w4(size_t nc, size_t kc, const int16_t* restrict a0, const int16_t* restrict a1, const int32_t* restrict xs0,
                  const int32_t* restrict xs1, const uint8_t* restrict w, int32_t* restrict c, size_t ldc, int acc, int dt);
/* The same over K blocks of blk k (a multiple of 4) with the panel's scales in place (sc; sdt DT_F32 / DT_E8M0 /
   DT_F8_E4M3, 1-byte ones times `times`), xs0 / xs1 one sum per block: the f32 rows c, c + ldf = (first ? 0 : C) + the
   block folds in order (fold_block_ld's steps, one call per panel); x4 or f4_e2m1 codes (dt). */
void s16_dq_2x8w4_kb(size_t kc, size_t blk, const int16_t* restrict a0, const int16_t* restrict a1, const int32_t* restrict xs0,
                     const int32_t* restrict xs1, const uint8_t* restrict w, const void* restrict sc, int sdt, float times,
                     float* restrict c, size_t ldf, int first, int dt);
/* Relaxed SIMD: whether relaxed_dot_i8x16_i7x16_add computes exactly (probed once; 0 in the SIMD128 build), and
   1 row of s8 codes x one x4 panel on it, int32 sums (sc = 0) or K blocks folded with f32 scales (s16-gemm-3x8-wasmsimd.c). */
int32_t rdot_ok(void);
/* Relaxed SIMD's i16x8 dot for the 1-row x4 tiles: whether it sums exactly (probed once; 0 in the SIMD128 build;
   rd16_allow from set_relaxed_dot), the row's expansion for it, and s16_dq_2x8w4 / s16_dq_1x16w4 / s16_dq_1x16f4 on it (u4 / s4 / f4_e2m1, bitwise the same;
   s16-gemm-1x16w4-wasmsimd.c). */
int32_t rd16_ok(void);
void rd16_allow(int32_t allowed);
void s8_rd16_row(const int16_t* a, int8_t* out, size_t kcp, size_t blk, int32_t* sums);
void s8_dq_1x16f4r(size_t kc, size_t blk, const int16_t* restrict a, const int32_t* restrict xs, const uint8_t* restrict w, size_t ps,
                   const uint8_t* restrict sc, size_t sps, int sdt, float* restrict c, int first);
void s8_dq_2x8w4r(size_t nc, size_t kc, const int16_t* restrict a0, const int16_t* restrict a1, const int32_t* restrict xs0,
                  const int32_t* restrict xs1, const uint8_t* restrict w, int32_t* restrict c, size_t ldc, int acc, int dt);
void s8_dq_2x8w4r_kb(size_t kc, size_t blk, const int16_t* restrict a0, const int16_t* restrict a1, const int32_t* restrict xs0,
                     const int32_t* restrict xs1, const uint8_t* restrict w, const void* restrict sc, int sdt, float times,
                     float* restrict c, size_t ldf, int first, int dt);
void s8_dq_1x16w4r(size_t nc1, size_t nc2, size_t kc, size_t blk, const int16_t* restrict a, const int32_t* restrict xs,
                   const uint8_t* restrict w, size_t ps, const float* restrict sc, size_t sps, void* restrict c, int acc, int first,
                   int dt);
void s8_rdot_1x8w4(size_t kc, size_t blk, const int8_t* restrict a, const uint8_t* restrict w, const float* restrict sc, void* restrict c,
                   int acc, int first, int dt);

/* Packed low-precision weights (issue 12, lowp_gemm.h): C[mr x nc] (+)= A[mr x kc] * W, mr <= 2, A the
   first of the call's rows inside a 4-row f32 micro-panel (element (r, k) at a[4k + r]), f32_gemm_4x8's
   accumulation (k0: the call's first k, whose parity picks MADD or mul + add). W an 8-column panel of
   8-bit codes (x8:p8: the 8 codes of k at w + 8k, w pointing at k0; dt s8, u8, f8_e4m3, f8_e5m2)
   decoded in registers; with zq (8 zero points) and sq (8 scales) each weight is (w - zq[n]) * sq[n]
   first. */
void f32_gemm_2x8w8(size_t mr, size_t nc, size_t k0, size_t kc, const float* restrict a, const uint8_t* restrict w,
                    float* restrict c, size_t ldc, int accumulate, int dt, const float* zq, const float* sq);
/* The same for 4-bit codes (x4:p8k2: k-pair t at w + 8t, low nibble k = 2t; dt s4, u4, f4_e2m1): w is
   the panel's start. */
void f32_gemm_2x8w4(size_t mr, size_t nc, size_t k0, size_t kc, const float* restrict a, const uint8_t* restrict w,
                    float* restrict c, size_t ldc, int accumulate, int dt, const float* zq, const float* sq);
/* One row x two panels (w, w + ps: 16 columns, C contiguous; nc1, nc2 columns of each): the same per
   column as the kernels above, with four chains instead of two (1-row tiles). zq / sq: 16 values. */
void f32_gemm_1x16w8(size_t nc1, size_t nc2, size_t k0, size_t kc, const float* restrict a, const uint8_t* restrict w,
                     size_t ps, float* restrict c, int accumulate, int dt, const float* zq, const float* sq);
void f32_gemm_1x16w4(size_t nc1, size_t nc2, size_t k0, size_t kc, const float* restrict a, const uint8_t* restrict w,
                     size_t ps, float* restrict c, int accumulate, int dt, const float* zq, const float* sq);
/* accumulation_mode relaxed (f32-gemm-1x16r-wasmsimd.c): 1 row x two panels (w, w + ps; ps = 0 reads one panel
   twice, nc2 = 0 then) of s8 / u8 (x8:p8, w at k0) or s4 / u4 / f4_e2m1 (x4:p8k2, w at k-pair k0 / 2, k0 even) codes, in
   blocks of bs k (0: one block of kc; kc and bs multiples of 4; block b's 16 scales at sq + 16 b, or sq = 0):
   C (+)= per block (Σ code x) x scale, in a reordered sum (FMA, split chains, scale per block). No zero points.
   xd / xs: the row's activations as relaxed_xdup lays them out, and their block sums. */
void f32_gemm_1x16r8(size_t nc1, size_t nc2, size_t kc, size_t bs, const float* restrict xd, const float* restrict xs,
                     const uint8_t* restrict w, size_t ps, float* restrict c, int accumulate, int dt, const float* sq);
void f32_gemm_1x16r4(size_t nc1, size_t nc2, size_t kc, size_t bs, const float* restrict xd, const float* restrict xs,
                     const uint8_t* restrict w, size_t ps, float* restrict c, int accumulate, int dt, const float* sq);
/* K-block-scaled s4 / u4 / s8 / u8 (bs > 0), one panel (x4: w at k-pair 0 of the piece; x8: at k 0) of 1 or 2 rows:
   the relaxed kernels' per-block sums (4 x 4 floats per block and row: sums + 16 b, the second row's after the
   first's nblk blocks) over the panel's codes, then, once the caller has read the panel's scales (8 per block at
   sq + 8 b), folded into C (nc columns, rows c, c + ldc) in block order by f32_gemm_r_fold (dt: the codes' type):
   the bits of f32_gemm_1x16r4 / 1x16r8 / 2x16r, with the panel's codes and scales read in one run. */
void f32_gemm_r_sums(size_t rows, size_t kc, size_t bs, const float* restrict xd0, const float* restrict xd1, const uint8_t* restrict w,
                     int dt, float* restrict sums);
void f32_gemm_r_fold(size_t rows, size_t nc, size_t nblk, const float* restrict sums, const float* restrict xs0,
                     const float* restrict xs1, const float* sq, float* restrict c, size_t ldc, int accumulate, int dt);
/* The same for two rows (C rows c, c + ldc; xd0 / xs0 and xd1 / xs1 their activations), any of the four types:
   each code converted once for both rows, each row's bits those of the 1-row kernels. */
void f32_gemm_2x16r(size_t nc1, size_t nc2, size_t kc, size_t bs, const float* restrict xd0, const float* restrict xs0,
                    const float* restrict xd1, const float* restrict xs1, const uint8_t* restrict w, size_t ps, float* restrict c,
                    size_t ldc, int accumulate, int dt, const float* sq);
/* One row of a 4-row f32 micro-panel (a at k, element k at a[4k]) over kc k (a multiple of 4) in the layout the
   relaxed kernels load whole: per 4 k, x4: [x0 x0 x2 x2 x1 x1 x3 x3], x8: [x0 x0 x1 x1 x2 x2 x3 x3] (8 floats at
   xd); xs[b] = Σ x over block b of blen k (blen a multiple of 4 dividing kc). */
void relaxed_xdup(const float* a, size_t kc, size_t blen, int x4, float* restrict xd, float* restrict xs);
/* The weights of kc k (from w + 8k, or from k0 of a 4-bit panel) decoded (and (w - z) * s) into out [kc][8]. */
void decode_2x8w8(const uint8_t* w, size_t kc, int dt, const float* zq, const float* sq, float* out);
void decode_2x8w4(const uint8_t* w, size_t k0, size_t kc, int dt, const float* zq, const float* sq, float* out);
/* f32_gemm_1x16w4 over kc / bs K blocks of bs k (bs a multiple of 4, k0 a multiple of bs): block b's 8
   scales of the first panel at sq + sst b, of the second at sq + sps + sst b (staged: sps 8, sst 16; in place
   beside the panels: a panel's floats apart, 8), the accumulators kept in registers across blocks (one call per
   panel piece). */
void f32_gemm_1x16w4_kb(size_t nc1, size_t nc2, size_t k0, size_t kc, size_t bs, const float* restrict a,
                        const uint8_t* restrict w, size_t ps, float* restrict c, int accumulate, int dt, const float* zq,
                        const float* sq, size_t sps, size_t sst);
/* The x8 (s8 u8 f8_e4m3 f8_e5m2) kernels over kc / bs K blocks likewise (w at the piece's first k, which is even):
   f32_gemm_1x16w8_kb block b's scales at sq + sst b and sq + sps + sst b, f32_gemm_2x8w8_kb at sq + sst b. */
void f32_gemm_1x16w8_kb(size_t nc1, size_t nc2, size_t kc, size_t bs, const float* restrict a, const uint8_t* restrict w, size_t ps,
                        float* restrict c, int accumulate, int dt, const float* zq, const float* sq, size_t sps, size_t sst);
void f32_gemm_2x8w8_kb(size_t mr, size_t nc, size_t kc, size_t bs, const float* restrict a, const uint8_t* restrict w, float* restrict c,
                       size_t ldc, int accumulate, int dt, const float* zq, const float* sq, size_t sst);
/* f32_gemm_2x8w4 over kc / bs K blocks likewise (1-2 rows x one panel): block b's 8 scales at sq + sst b. */
void f32_gemm_2x8w4_kb(size_t mr, size_t nc, size_t k0, size_t kc, size_t bs, const float* restrict a, const uint8_t* restrict w,
                       float* restrict c, size_t ldc, int accumulate, int dt, const float* zq, const float* sq, size_t sst);

/* x16:p8 panels of bf16 / f16 codes (f32-gemm-2x8wx16-wasmsimd.c): w the codes of k0 (the 8 codes of k at w + 8k),
   converted exactly in registers; accumulation and rows as f32_gemm_2x8w8 / f32_gemm_1x16w8 (ps: bytes between the
   two panels), no zero points or scales. decode_wx16: kc k of such a panel into out [kc][8] f32. */
void f32_gemm_2x8wx16(size_t mr, size_t nc, size_t k0, size_t kc, const float* restrict a, const uint16_t* restrict w,
                      float* restrict c, size_t ldc, int accumulate, int dt);
void f32_gemm_1x16wx16(size_t nc1, size_t nc2, size_t k0, size_t kc, const float* restrict a, const uint16_t* restrict w,
                       size_t ps, float* restrict c, int accumulate, int dt);
void decode_wx16(const uint16_t* w, size_t kc, int dt, float* out);
