/* Relaxed-order decode kernels (attr accumulation_mode = relaxed, rfcs/0007): 1 row x 2 panels (16
   columns) of s8 / u8 (x8:p8) or s4 / u4 (x4:p8k2) codes, f32 activations. They give up the strict
   kernels' order (one chain per column, k in order, the scale on every weight) for fewer operations:

   - no byte shuffles: the 16 bytes of a load are read as 4 i32 lanes, lane j holding 4 columns of one
     k (x8: [k c0-3][k c4-7][k+1 c0-3][k+1 c4-7]; x4: the same for k-pairs, one nibble per k). Masking
     byte (nibble) q of every lane and converting (i32 -> f32, exact: at most 8 significant bits) gives
     code(n) * 2^(8q) for the columns q and 4 + q of two k at once; the activations come pre-arranged
     (relaxed_xdup: [x_k, x_k, x_k', x_k'] per 4 lanes, one plain load), so each FMA adds 4 products to 4
     separate sums (split chains);
   - biased codes (s8 ^ 0x80, s4 ^ 0x8, u8's top byte ^ 0x80) so every mask reads an unsigned value;
     the bias times the block's activation sum (relaxed_xdup's, computed once per row) is subtracted
     once per K block;
   - FMA on every k in the relaxed-SIMD build (mul + add in SIMD128);
   - the powers 2^(8q), the bias and the K block's scales are applied once per block to the partial
     sums, which then add into C (the per-column scale, as on the strict path, waits for the epilogue);
   - the masks are never v128.const inside the loop (V8 re-materializes one with three instructions per
     use): x8 KEEPs them (reloaded from the stack at each use); x4 builds them from a volatile seed, so
     they are locals that V8 keeps in registers;
   - x4 runs one panel at a time (4 sums; session 11): both panels at once needed 8 sums + 4 masks + 2
     activation vectors + 2 code vectors, more than V8's 15 registers, and it kept two sums in memory (a
     store-to-load wait in their chains every iteration). Every loop runs on its weights pointer (V8 kept a
     separate counter in memory). Both changes keep each sum's order: the same bits, 1.1-1.2x.

   Deterministic: the order depends only on the call's arguments (tile geometry, not thread count).
   Caller (gemm-lowp.c relaxed_segment): kc and blocks of bs k multiples of 4 (bs = 0: one block of kc, no
   scales), x4 on an even k, no zero points. */
#include "lowp_gemm.h"

/* 0x0f, read through a volatile so the x4 masks are locals V8 can keep in registers (a KEEP'd constant
   lives in linear memory and is reloaded at every use; a v128.const is re-materialized at every use). */
static volatile int32_t nibble_mask = 0x0f, s4_bias = (int32_t)0x88888888;
/* The same for the x8 one-panel sums (R8_CONSTS): the byte mask and the s8 / u8 bias xors. */
static volatile int32_t byte_mask = 0xff, s8_bias = 0x00808080, u8_bias = (int32_t)0x80000000;

void relaxed_xdup(const float* a, size_t kc, size_t blen, int x4, float* restrict xd, float* restrict xs) {
  float s = 0.0f;
  for (size_t k = 0; k < kc; k += 4) {
    const float x0 = a[4 * k], x1 = a[4 * k + 4], x2 = a[4 * k + 8], x3 = a[4 * k + 12];
    /* x4: lanes pair k-pairs t, t + 1 (even k, then odd k); x8: k, k + 1 then k + 2, k + 3 */
    const float p = x4 ? x2 : x1, q = x4 ? x1 : x2;
    xd[0] = xd[1] = x0;
    xd[2] = xd[3] = p;
    xd[4] = xd[5] = q;
    xd[6] = xd[7] = x3;
    xd += 8;
    s += (x0 + x1) + (x2 + x3);
    if ((k + 4) % blen == 0) {
      *xs++ = s;
      s = 0.0f;
    }
  }
}

#define CVT(r, m) wasm_f32x4_convert_i32x4(wasm_v128_and((r), (m)))

/* The sums t0..t3 (byte q = 0..3: [c_q, c_4+q, c_q, c_4+q] of two k sets) of one panel as its 8 columns,
   code sums scaled back (p: 1, 2^-8, 2^-16, 2^-24), minus the bias sums (corr: bias x block's Σx), times
   the block's scales (sq: 8, or 0), into C (c, nc columns; acc: add to what is there). */
INLINE void fold8(v128_t t0, v128_t t1, v128_t t2, v128_t t3, v128_t p, v128_t corr, const float* sq, float* c, size_t nc,
                  int acc) {
  const v128_t s01 = wasm_f32x4_add(wasm_i32x4_shuffle(t0, t1, 0, 4, 1, 5), wasm_i32x4_shuffle(t0, t1, 2, 6, 3, 7));
  const v128_t s23 = wasm_f32x4_add(wasm_i32x4_shuffle(t2, t3, 0, 4, 1, 5), wasm_i32x4_shuffle(t2, t3, 2, 6, 3, 7));
  v128_t lo = wasm_f32x4_sub(wasm_f32x4_mul(wasm_i32x4_shuffle(s01, s23, 0, 1, 4, 5), p), corr);
  v128_t hi = wasm_f32x4_sub(wasm_f32x4_mul(wasm_i32x4_shuffle(s01, s23, 2, 3, 6, 7), p), corr);
  if (sq) {
    lo = wasm_f32x4_mul(lo, wasm_v128_load(sq));
    hi = wasm_f32x4_mul(hi, wasm_v128_load(sq + 4));
  }
  if (acc) {
    v128_t c0, c1;
    load_row8(c, nc, &c0, &c1);
    lo = wasm_f32x4_add(c0, lo);
    hi = wasm_f32x4_add(c1, hi);
  }
  store_row8(c, nc, lo, hi);
}

/* The end of one K block, shared by both kernels: the two panels' sums (t: first, v: second) folded into C,
   the bias correction off x the block's activation sum *xs. Advances sq and xs. */
#define FOLD_BLOCK16(OFF)                                                                          \
  do {                                                                                             \
    const v128_t corr = wasm_f32x4_mul((OFF), wasm_f32x4_splat(*xs++));                             \
    const int acc = accumulate || b > 0;                                                           \
    fold8(t0, t1, t2, t3, p, corr, sq, c, nc1, acc);                                               \
    fold8(v0, v1, v2, v3, p, corr, sq ? sq + 8 : 0, c + 8, nc2, acc);                              \
    if (sq) sq += 16;                                                                              \
  } while (0)

#define ZERO8                                                                                      \
  const v128_t zero = wasm_f32x4_splat(0.0f);                                                      \
  v128_t t0 = zero, t1 = zero, t2 = zero, t3 = zero, v0 = zero, v1 = zero, v2 = zero, v3 = zero

/* x8: XB the bias xor, OFF the column bias per byte q (s8: 128 for q < 3, the top byte read signed; u8: the
   top byte flipped to signed, -128). The top byte by an arithmetic shift (no mask register, no 2^-24 power;
   1.05-1.1x on the bare kernel). xd: relaxed_xdup's x8 layout, 4 floats per k-pair. */
INLINE void r8_row16(const int DT, size_t nc1, size_t nc2, size_t kc, size_t bs, const float* restrict xd, const float* restrict xs,
                     const uint8_t* restrict w, size_t ps, float* restrict c, int accumulate, const float* sq) {
  const uint8_t* u = w + ps;
  v128_t xb = wasm_i32x4_splat(DT == DT_S8 ? 0x00808080 : (int32_t)0x80000000);
  v128_t m0 = wasm_i32x4_splat(0xff), m1 = wasm_i32x4_splat(0xff00), m2 = wasm_i32x4_splat(0xff0000);
  KEEP(xb);
  KEEP(m0);
  KEEP(m1);
  KEEP(m2);
  const v128_t p = wasm_f32x4_make(1.0f, 0x1p-8f, 0x1p-16f, 1.0f);
  const v128_t off = DT == DT_S8 ? wasm_f32x4_make(128.0f, 128.0f, 128.0f, 0.0f) : wasm_f32x4_make(0.0f, 0.0f, 0.0f, -128.0f);
  const size_t blen = bs ? bs : kc;
  for (size_t b = 0; b < kc; b += blen) {
    ZERO8;
    for (const uint8_t* const we = w + 8 * blen; w != we;) { /* on the pointer: V8 kept a counter in memory */
      const v128_t x = LDV(xd, 0);
      const v128_t r = wasm_v128_xor(wasm_v128_load(w), xb), s = wasm_v128_xor(wasm_v128_load(u), xb);
      t0 = MADD(x, CVT(r, m0), t0);
      t1 = MADD(x, CVT(r, m1), t1);
      t2 = MADD(x, CVT(r, m2), t2);
      t3 = MADD(x, wasm_f32x4_convert_i32x4(wasm_i32x4_shr(r, 24)), t3);
      v0 = MADD(x, CVT(s, m0), v0);
      v1 = MADD(x, CVT(s, m1), v1);
      v2 = MADD(x, CVT(s, m2), v2);
      v3 = MADD(x, wasm_f32x4_convert_i32x4(wasm_i32x4_shr(s, 24)), v3);
      w += 16;
      u += 16;
      xd += 4;
    }
    FOLD_BLOCK16(off);
  }
}

/* One x8 panel's 4 sums over blen k (blen / 2 iterations of 16 bytes) of one row: r8_row16's first-panel chains
   (t0..t3), alone; advances P and XD. */
#define R8_PANEL(P, XD, T0, T1, T2, T3)                                                            \
  for (const uint8_t* const pe = (P) + 8 * blen; (P) != pe;) {                                     \
    const v128_t x = LDV(XD, 0), r = wasm_v128_xor(wasm_v128_load(P), xb);                         \
    T0 = MADD(x, CVT(r, m0), T0);                                                                  \
    T1 = MADD(x, CVT(r, m1), T1);                                                                  \
    T2 = MADD(x, CVT(r, m2), T2);                                                                  \
    T3 = MADD(x, wasm_f32x4_convert_i32x4(wasm_i32x4_shr(r, 24)), T3);                             \
    (P) += 16;                                                                                     \
    (XD) += 4;                                                                                     \
  }

void f32_gemm_1x16r8(size_t nc1, size_t nc2, size_t kc, size_t bs, const float* restrict xd, const float* restrict xs,
                     const uint8_t* restrict w, size_t ps, float* restrict c, int accumulate, int dt, const float* sq) {
  if (dt == DT_S8) r8_row16(DT_S8, nc1, nc2, kc, bs, xd, xs, w, ps, c, accumulate, sq);
  else r8_row16(DT_U8, nc1, nc2, kc, bs, xd, xs, w, ps, c, accumulate, sq);
}

/* One x4 panel's 4 sums over blen k (blen / 4 iterations of 16 bytes); advances P and XD. The loop runs on the
   weights pointer (V8 kept a separate counter in memory: a store-to-load wait per iteration). */
#define R4_PANEL(P, XD, T0, T1, T2, T3)                                                            \
  for (const uint8_t* const pe = (P) + 4 * blen; (P) != pe;) {                                     \
    v128_t r = wasm_v128_load(P);                                                                  \
    if (DT == DT_S4) r = wasm_v128_xor(r, xb);                                                     \
    const v128_t rh = wasm_u32x4_shr(r, 4), x0 = LDV(XD, 0), x1 = LDV(XD, 16);                     \
    T0 = MADD(x0, CVT(r, m0), T0);                                                                 \
    T1 = MADD(x0, CVT(r, m1), T1);                                                                 \
    T2 = MADD(x0, CVT(r, m2), T2);                                                                 \
    T3 = MADD(x0, CVT(r, m3), T3);                                                                 \
    T0 = MADD(x1, CVT(rh, m0), T0);                                                                \
    T1 = MADD(x1, CVT(rh, m1), T1);                                                                \
    T2 = MADD(x1, CVT(rh, m2), T2);                                                                \
    T3 = MADD(x1, CVT(rh, m3), T3);                                                                \
    (P) += 16;                                                                                     \
    (XD) += 8;                                                                                     \
  }

/* The 1-row x4 constants: the s4 bias and the nibble masks, locals from volatile seeds (see nibble_mask). */
#define R4_CONSTS                                                                                  \
  const v128_t xb = wasm_i32x4_splat(s4_bias);                                                     \
  const v128_t m0 = wasm_i32x4_splat(nibble_mask), m1 = wasm_i32x4_shl(m0, 8), m2 = wasm_i32x4_shl(m0, 16), \
               m3 = wasm_i32x4_shl(m0, 24)

/* The 2-row x4 constants, KEEP'd (reloaded from the stack at each use). */
#define R4_ROWS2_CONSTS                                                                            \
  v128_t xb = wasm_i8x16_splat(DT == DT_S4 ? (int8_t)0x88 : 0);                                    \
  v128_t m0 = wasm_i32x4_splat(0x0f), m1 = wasm_i32x4_splat(0x0f00), m2 = wasm_i32x4_splat(0x0f0000), \
         m3 = wasm_i32x4_splat(0x0f000000);                                                        \
  if (DT == DT_S4) KEEP(xb);                                                                       \
  KEEP(m0);                                                                                        \
  KEEP(m1);                                                                                        \
  KEEP(m2);                                                                                        \
  KEEP(m3)

/* x4: the low nibbles (even k of a pair) masked in place, the high ones after a 4-bit shift of the lanes;
   s4 codes biased by 8 (xor), every nibble then unsigned. xd: relaxed_xdup's x4 layout, 8 floats per 4 k. */
INLINE void r4_row16(const int DT, size_t nc1, size_t nc2, size_t kc, size_t bs, const float* restrict xd, const float* restrict xs,
                     const uint8_t* restrict w, size_t ps, float* restrict c, int accumulate, const float* sq) {
  const uint8_t* u = w + ps;
  R4_CONSTS;
  const v128_t p = wasm_f32x4_make(1.0f, 0x1p-8f, 0x1p-16f, 0x1p-24f);
  const v128_t off = wasm_f32x4_splat(DT == DT_S4 ? 8.0f : 0.0f);
  const size_t blen = bs ? bs : kc;
  for (size_t b = 0; b < kc; b += blen) {
    ZERO8;
    /* One panel at a time (4 sums): with both (8 sums, 4 masks, 2 activation vectors, 2 loads) V8 ran out of
       registers and kept two sums in memory, a store-to-load wait in their chains every iteration. */
    const float* xe = xd;
    R4_PANEL(w, xe, t0, t1, t2, t3);
    R4_PANEL(u, xd, v0, v1, v2, v3);
    FOLD_BLOCK16(off);
  }
}

/* One K block of blen k of two rows x one x4 panel into t0..t3 (row xd0) and v0..v3 (row xd1): r4_rows2's loop. */
#define R4_ROWS2_BLOCK \
  do { \
    for (const uint8_t* const we = w + 4 * blen; w != we;) { \
      v128_t r = wasm_v128_load(w); \
      if (DT == DT_S4) r = wasm_v128_xor(r, xb); \
      const v128_t rh = wasm_u32x4_shr(r, 4); \
      const v128_t x0 = LDV(xd0, 0), y0 = LDV(xd1, 0); \
      v128_t q = CVT(r, m0); \
      t0 = MADD(x0, q, t0); \
      v0 = MADD(y0, q, v0); \
      q = CVT(r, m1); \
      t1 = MADD(x0, q, t1); \
      v1 = MADD(y0, q, v1); \
      q = CVT(r, m2); \
      t2 = MADD(x0, q, t2); \
      v2 = MADD(y0, q, v2); \
      q = CVT(r, m3); \
      t3 = MADD(x0, q, t3); \
      v3 = MADD(y0, q, v3); \
      const v128_t x1 = LDV(xd0, 16), y1 = LDV(xd1, 16); \
      q = CVT(rh, m0); \
      t0 = MADD(x1, q, t0); \
      v0 = MADD(y1, q, v0); \
      q = CVT(rh, m1); \
      t1 = MADD(x1, q, t1); \
      v1 = MADD(y1, q, v1); \
      q = CVT(rh, m2); \
      t2 = MADD(x1, q, t2); \
      v2 = MADD(y1, q, v2); \
      q = CVT(rh, m3); \
      t3 = MADD(x1, q, t3); \
      v3 = MADD(y1, q, v3); \
      w += 16; \
      xd0 += 8; \
      xd1 += 8; \
    } \
  } while (0)

/* K-block-scaled s4 / u4, one panel at a time in one run (session 21): its codes over every block first, each
   block's 4 sums (the 1-row R4_PANEL sums; 2 rows: both rows', r4_rows2's) kept at sums + 16 b (+ 16 nblk for the
   second row), then the caller reads the panel's scales, which follow its codes (x4:p8k2+q), and f32_gemm_r_fold
   folds the blocks in block order: the same sums and folds as f32_gemm_1x16r4 / f32_gemm_2x16r (the same bits),
   but the panel's codes and scales are read as one contiguous run instead of two panels' codes interleaved per
   block after their scales (runs with gaps stream at half the rate here: reports/issue19-s20-dq.txt). */
/* A block's 4 sums of one row at S (16 floats). */
#define STORE_SUMS(S, T0, T1, T2, T3)    \
  do {                                   \
    wasm_v128_store((S), (T0));          \
    wasm_v128_store((S) + 4, (T1));      \
    wasm_v128_store((S) + 8, (T2));      \
    wasm_v128_store((S) + 12, (T3));     \
  } while (0)

/* The per-block sums of one panel, 1 or 2 rows, for a code family: CONSTS1 / PANEL the 1-row constants and loop,
   CONSTS2 / BLOCK2 the 2-row ones. */
#define BLOCK_SUMS(CONSTS1, PANEL, CONSTS2, BLOCK2)                                                \
  do {                                                                                             \
    const size_t nblk = kc / blen;                                                                 \
    if (rows == 1) {                                                                               \
      CONSTS1;                                                                                     \
      for (size_t b = 0; b < nblk; b++, sums += 16) {                                              \
        const v128_t zero = wasm_f32x4_splat(0.0f);                                                \
        v128_t t0 = zero, t1 = zero, t2 = zero, t3 = zero;                                         \
        PANEL(w, xd0, t0, t1, t2, t3);                                                             \
        STORE_SUMS(sums, t0, t1, t2, t3);                                                          \
      }                                                                                            \
      break;                                                                                       \
    }                                                                                              \
    CONSTS2;                                                                                       \
    for (size_t b = 0; b < nblk; b++, sums += 16) {                                                \
      ZERO8;                                                                                       \
      BLOCK2;                                                                                      \
      STORE_SUMS(sums, t0, t1, t2, t3);                                                            \
      STORE_SUMS(sums + 16 * nblk, v0, v1, v2, v3);                                                \
    }                                                                                              \
  } while (0)

INLINE void r4_sums(const int DT, size_t rows, size_t kc, size_t blen, const float* restrict xd0, const float* restrict xd1,
                    const uint8_t* restrict w, float* restrict sums) {
  BLOCK_SUMS(R4_CONSTS, R4_PANEL, R4_ROWS2_CONSTS, R4_ROWS2_BLOCK);
}

void f32_gemm_r_fold(size_t rows, size_t nc, size_t nblk, const float* restrict sums, const float* restrict xs0,
                     const float* restrict xs1, const float* sq, float* restrict c, size_t ldc, int accumulate, int dt) {
  const int x8 = dt == DT_S8 || dt == DT_U8;
  /* r4_row16's / r8_row16's powers and biases */
  const v128_t p = x8 ? wasm_f32x4_make(1.0f, 0x1p-8f, 0x1p-16f, 1.0f) : wasm_f32x4_make(1.0f, 0x1p-8f, 0x1p-16f, 0x1p-24f);
  const v128_t off = dt == DT_S8   ? wasm_f32x4_make(128.0f, 128.0f, 128.0f, 0.0f)
                     : dt == DT_U8 ? wasm_f32x4_make(0.0f, 0.0f, 0.0f, -128.0f)
                                   : wasm_f32x4_splat(dt == DT_S4 ? 8.0f : 0.0f);
  for (size_t r = 0; r < rows; r++) {
    const float* s = sums + 16 * nblk * r;
    const float* xs = r ? xs1 : xs0;
    float* cr = c + ldc * r;
    for (size_t b = 0; b < nblk; b++, s += 16) {
      const v128_t corr = wasm_f32x4_mul(off, wasm_f32x4_splat(xs[b]));
      fold8(wasm_v128_load(s), wasm_v128_load(s + 4), wasm_v128_load(s + 8), wasm_v128_load(s + 12), p, corr, sq + 8 * b, cr, nc,
            accumulate || b > 0);
    }
  }
}

/* f4_e2m1 (x4:p8k2): the nibbles of 16 bytes split (low: k, k + 2; high: k + 1, k + 3) and mapped by one table
   lookup each to 2 value + 16 (F4_LUT: 4..28, every byte unsigned), then read like x8 bytes (masks for bytes
   0-2, a shift for byte 3): the same 4 sums per panel as x4, 8 FMAs per 16 bytes. fold8's p halves the doubled
   values, and off is the table's bias, 16 / 2. The masks are KEEP'd (V8 reloads them from the stack, a load
   folded into the and), the table and the nibble mask too. */
#define RF4_PANEL(P, XD, T0, T1, T2, T3)                                                           \
  for (const uint8_t* const pe = (P) + 4 * blen; (P) != pe;) {                                     \
    const v128_t r = wasm_v128_load(P);                                                            \
    const v128_t lo = lut_nibbles(lut, wasm_v128_and(r, m4));                                      \
    const v128_t hi = lut_nibbles(lut, wasm_v128_and(wasm_u32x4_shr(r, 4), m4));                   \
    const v128_t x0 = LDV(XD, 0), x1 = LDV(XD, 16);                                                \
    T0 = MADD(x0, CVT(lo, m0), T0);                                                                \
    T1 = MADD(x0, CVT(lo, m1), T1);                                                                \
    T2 = MADD(x0, CVT(lo, m2), T2);                                                                \
    T3 = MADD(x0, wasm_f32x4_convert_i32x4(wasm_u32x4_shr(lo, 24)), T3);                           \
    T0 = MADD(x1, CVT(hi, m0), T0);                                                                \
    T1 = MADD(x1, CVT(hi, m1), T1);                                                                \
    T2 = MADD(x1, CVT(hi, m2), T2);                                                                \
    T3 = MADD(x1, wasm_f32x4_convert_i32x4(wasm_u32x4_shr(hi, 24)), T3);                           \
    (P) += 16;                                                                                     \
    (XD) += 8;                                                                                     \
  }

#define RF4_CONSTS                                                                                 \
  v128_t lut = F4_LUT, m4 = wasm_i8x16_splat(0x0f), m0 = wasm_i32x4_splat(0xff), m1 = wasm_i32x4_splat(0xff00), \
         m2 = wasm_i32x4_splat(0xff0000);                                                          \
  KEEP(lut);                                                                                       \
  KEEP(m4);                                                                                        \
  KEEP(m0);                                                                                        \
  KEEP(m1);                                                                                        \
  KEEP(m2);                                                                                        \
  const v128_t p = wasm_f32x4_make(0.5f, 0x1p-9f, 0x1p-17f, 0.5f), off = wasm_f32x4_splat(8.0f)

static void rf4_row16(size_t nc1, size_t nc2, size_t kc, size_t bs, const float* restrict xd, const float* restrict xs,
                      const uint8_t* restrict w, size_t ps, float* restrict c, int accumulate, const float* sq) {
  const uint8_t* u = w + ps;
  RF4_CONSTS;
  const size_t blen = bs ? bs : kc;
  for (size_t b = 0; b < kc; b += blen) {
    ZERO8;
    const float* xe = xd;
    RF4_PANEL(w, xe, t0, t1, t2, t3);
    RF4_PANEL(u, xd, v0, v1, v2, v3);
    FOLD_BLOCK16(off);
  }
}

void f32_gemm_1x16r4(size_t nc1, size_t nc2, size_t kc, size_t bs, const float* restrict xd, const float* restrict xs,
                     const uint8_t* restrict w, size_t ps, float* restrict c, int accumulate, int dt, const float* sq) {
  if (dt == DT_S4) r4_row16(DT_S4, nc1, nc2, kc, bs, xd, xs, w, ps, c, accumulate, sq);
  else if (dt == DT_U4) r4_row16(DT_U4, nc1, nc2, kc, bs, xd, xs, w, ps, c, accumulate, sq);
  else rf4_row16(nc1, nc2, kc, bs, xd, xs, w, ps, c, accumulate, sq);
}

/* One plane of 4 bytes per lane (x8 codes, or f4 table values) into both rows' sums: bytes 0-2 masked, byte 3 by
   SHR (arithmetic for the signed top byte of x8, logical for f4's). X, Y: the rows' activations. */
#define ROWS2_BYTES(V, SHR, X, Y)                                                                  \
  do {                                                                                             \
    v128_t q = CVT(V, m0);                                                                         \
    t0 = MADD(X, q, t0);                                                                           \
    v0 = MADD(Y, q, v0);                                                                           \
    q = CVT(V, m1);                                                                                \
    t1 = MADD(X, q, t1);                                                                           \
    v1 = MADD(Y, q, v1);                                                                           \
    q = CVT(V, m2);                                                                                \
    t2 = MADD(X, q, t2);                                                                           \
    v2 = MADD(Y, q, v2);                                                                           \
    q = wasm_f32x4_convert_i32x4(SHR(V, 24));                                                      \
    t3 = MADD(X, q, t3);                                                                           \
    v3 = MADD(Y, q, v3);                                                                           \
  } while (0)

/* One K block of blen k of two rows x one x8 panel into t0..t3 (row xd0) and v0..v3 (row xd1): r8_rows2's loop. */
#define R8_ROWS2_BLOCK                                                                             \
  do {                                                                                             \
    for (const uint8_t* const we = w + 8 * blen; w != we;) {                                       \
      const v128_t x = LDV(xd0, 0), y = LDV(xd1, 0);                                               \
      const v128_t r = wasm_v128_xor(wasm_v128_load(w), xb);                                       \
      ROWS2_BYTES(r, wasm_i32x4_shr, x, y);                                                        \
      w += 16;                                                                                     \
      xd0 += 4;                                                                                    \
      xd1 += 4;                                                                                    \
    }                                                                                              \
  } while (0)

/* The end of K block B in the two-row kernels: both rows' sums folded into C (accumulating after block 0), each
   row's block sum times the decoding offset as its correction, then the next block's staged scales. */
#define FOLD_ROWS2(B)                                                                              \
  do {                                                                                             \
    const int acc = accumulate || (B) > 0;                                                         \
    fold8(t0, t1, t2, t3, p, wasm_f32x4_mul(off, wasm_f32x4_splat(*xs0++)), sq, c, nc, acc);       \
    fold8(v0, v1, v2, v3, p, wasm_f32x4_mul(off, wasm_f32x4_splat(*xs1++)), sq, c + ldc, nc, acc); \
    if (sq) sq += 16;                                                                              \
  } while (0)

/* Two rows (C rows c, c + ldc) x one panel of nc columns: each code converted once for both rows. Per row the
   same chains in the same order as the 1-row kernels above, so a row's bits do not depend on the tile height.
   sq: block b's 8 scales at sq + 16 b (the 1-row kernels' staging), or 0; xs0 / xs1: the rows' block sums. */
/* The 2-row x8 constants, KEEP'd (reloaded from the stack at each use). */
#define R8_ROWS2_CONSTS                                                                            \
  v128_t xb = wasm_i32x4_splat(DT == DT_S8 ? 0x00808080 : (int32_t)0x80000000);                   \
  v128_t m0 = wasm_i32x4_splat(0xff), m1 = wasm_i32x4_splat(0xff00), m2 = wasm_i32x4_splat(0xff0000); \
  KEEP(xb);                                                                                        \
  KEEP(m0);                                                                                        \
  KEEP(m1);                                                                                        \
  KEEP(m2)

/* The 1-row one-panel x8 constants (r8_sums: its 4 sums leave the masks room in registers), from volatile seeds. */
#define R8_CONSTS                                                                                  \
  const v128_t xb = wasm_i32x4_splat(DT == DT_S8 ? s8_bias : u8_bias);                             \
  const v128_t m0 = wasm_i32x4_splat(byte_mask), m1 = wasm_i32x4_shl(m0, 8), m2 = wasm_i32x4_shl(m0, 16)

INLINE void r8_rows2(const int DT, size_t nc, size_t kc, size_t blen, const float* restrict xd0, const float* restrict xs0,
                     const float* restrict xd1, const float* restrict xs1, const uint8_t* restrict w, float* restrict c, size_t ldc,
                     int accumulate, const float* sq) {
  R8_ROWS2_CONSTS;
  const v128_t p = wasm_f32x4_make(1.0f, 0x1p-8f, 0x1p-16f, 1.0f);
  const v128_t off = DT == DT_S8 ? wasm_f32x4_make(128.0f, 128.0f, 128.0f, 0.0f) : wasm_f32x4_make(0.0f, 0.0f, 0.0f, -128.0f);
  for (size_t b = 0; b < kc; b += blen) {
    ZERO8;
    R8_ROWS2_BLOCK;
    FOLD_ROWS2(b);
  }
}

INLINE void r4_rows2(const int DT, size_t nc, size_t kc, size_t blen, const float* restrict xd0, const float* restrict xs0,
                     const float* restrict xd1, const float* restrict xs1, const uint8_t* restrict w, float* restrict c, size_t ldc,
                     int accumulate, const float* sq) {
  R4_ROWS2_CONSTS;
  const v128_t p = wasm_f32x4_make(1.0f, 0x1p-8f, 0x1p-16f, 0x1p-24f);
  const v128_t off = wasm_f32x4_splat(DT == DT_S4 ? 8.0f : 0.0f);
  for (size_t b = 0; b < kc; b += blen) {
    ZERO8;
    R4_ROWS2_BLOCK;
    FOLD_ROWS2(b);
  }
}

/* f4_e2m1, two rows: rf4_row16's decoding, each table value converted once for both rows. */
static void rf4_rows2(size_t nc, size_t kc, size_t blen, const float* restrict xd0, const float* restrict xs0, const float* restrict xd1,
                      const float* restrict xs1, const uint8_t* restrict w, float* restrict c, size_t ldc, int accumulate,
                      const float* sq) {
  RF4_CONSTS;
  for (size_t b = 0; b < kc; b += blen) {
    ZERO8;
    for (const uint8_t* const we = w + 4 * blen; w != we;) {
      const v128_t r = wasm_v128_load(w);
      const v128_t lo = lut_nibbles(lut, wasm_v128_and(r, m4));
      const v128_t hi = lut_nibbles(lut, wasm_v128_and(wasm_u32x4_shr(r, 4), m4));
      const v128_t x0 = LDV(xd0, 0), y0 = LDV(xd1, 0);
      ROWS2_BYTES(lo, wasm_u32x4_shr, x0, y0);
      const v128_t x1 = LDV(xd0, 16), y1 = LDV(xd1, 16);
      ROWS2_BYTES(hi, wasm_u32x4_shr, x1, y1);
      w += 16;
      xd0 += 8;
      xd1 += 8;
    }
    FOLD_ROWS2(b);
  }
}

void f32_gemm_2x16r(size_t nc1, size_t nc2, size_t kc, size_t bs, const float* restrict xd0, const float* restrict xs0,
                    const float* restrict xd1, const float* restrict xs1, const uint8_t* restrict w, size_t ps, float* restrict c,
                    size_t ldc, int accumulate, int dt, const float* sq) {
  const size_t blen = bs ? bs : kc;
  for (int panel = 0; panel < (nc2 ? 2 : 1); panel++) {
    const uint8_t* wp = w + (size_t)panel * ps;
    float* cp = c + 8 * panel;
    const float* sp = sq ? sq + 8 * panel : 0;
    const size_t nc = panel ? nc2 : nc1;
    switch (dt) {
      case DT_S8: r8_rows2(DT_S8, nc, kc, blen, xd0, xs0, xd1, xs1, wp, cp, ldc, accumulate, sp); break;
      case DT_U8: r8_rows2(DT_U8, nc, kc, blen, xd0, xs0, xd1, xs1, wp, cp, ldc, accumulate, sp); break;
      case DT_S4: r4_rows2(DT_S4, nc, kc, blen, xd0, xs0, xd1, xs1, wp, cp, ldc, accumulate, sp); break;
      case DT_U4: r4_rows2(DT_U4, nc, kc, blen, xd0, xs0, xd1, xs1, wp, cp, ldc, accumulate, sp); break;
      default: rf4_rows2(nc, kc, blen, xd0, xs0, xd1, xs1, wp, cp, ldc, accumulate, sp); break;
    }
  }
}

/* The same for s8 / u8 (x8:p8, session 22): r8_row16's first-panel chains (1 row) or r8_rows2's (2 rows) per block;
   f32_gemm_r_sums: any of the four integer types. */
INLINE void r8_sums(const int DT, size_t rows, size_t kc, size_t blen, const float* restrict xd0, const float* restrict xd1,
                    const uint8_t* restrict w, float* restrict sums) {
  BLOCK_SUMS(R8_CONSTS, R8_PANEL, R8_ROWS2_CONSTS, R8_ROWS2_BLOCK);
}

void f32_gemm_r_sums(size_t rows, size_t kc, size_t bs, const float* restrict xd0, const float* restrict xd1, const uint8_t* restrict w,
                     int dt, float* restrict sums) {
  switch (dt) {
    case DT_S4: r4_sums(DT_S4, rows, kc, bs, xd0, xd1, w, sums); break;
    case DT_U4: r4_sums(DT_U4, rows, kc, bs, xd0, xd1, w, sums); break;
    case DT_S8: r8_sums(DT_S8, rows, kc, bs, xd0, xd1, w, sums); break;
    default: r8_sums(DT_U8, rows, kc, bs, xd0, xd1, w, sums); break;
  }
}
