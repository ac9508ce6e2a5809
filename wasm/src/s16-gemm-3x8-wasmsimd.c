/* Integer GEMM microkernel, up to 3 rows (MR_INT, common.h: 4 rows spill an accumulator under V8) x
   8 columns, exact int32 accumulation of int16 products (1- and 2-row instances serve the last rows
   of a group: a padded row cost a whole one).
   A: a micro-panel of 3 rows x kc int16 (kc even): k-pair t of row r is the i32 at a + 2 * (3t + r)
      (one stream, as in the f32 kernel); the tile's src rows, already widened (s8/u8 minus the src
      zero point, or raw when the zero point is applied as a compensation).
   W: one 8-column panel of kc/2 k-pairs, in one of three layouts:
      s16  int16 k-pairs (plain weights packed per tile): k-pair t is 16 int16 = two vectors
           [w(2t,0) w(2t+1,0) w(2t,1) w(2t+1,1) w(2t,2) w(2t+1,2) w(2t,3) w(2t+1,3)] and the same for
           columns 4..7;
      w8   x8:p8 codes (s8 / u8, gemm-lowp.c): k-pair t is the 16 bytes at w + 16t (8 codes of 2t, then
           of 2t + 1), widened by two load8x8 and interleaved per column by two 16-bit unpacks;
      w4   x4:p8k2 codes (s4 / u4): k-pair t is the 8 bytes at w + 8t (low nibble 2t, high 2t + 1),
           put in the top nibble of 16-bit lanes by one shift and byte unpacks, then shifted down by 12
           (arithmetic for s4: the sign extension comes free).
      So the packed weights stream 1 (or 0.5) byte per weight instead of 2, and the products are the
      same int16 products: the int32 sums are bit-identical whatever the layout. An odd K is padded
      with a zero k (in A and W). The widening costs shuffle-port work the int16 panels did not have:
      tiles of more than 3 rows widen each piece of a panel once into L1 instead (s16_unpack_w8 / w4,
      then the s16 kernel per 3 rows, gemm-fused.c).
   Each k-pair of a row is one i32 (two int16) splat across the vector; i32x4.dot_i16x8_s
   (x64: pmaddwd) multiplies it with a weight vector and adds adjacent products: 4 columns x 2 k in
   one instruction, added to an i32x4 accumulator. Products of int16 never overflow int32 except
   (-32768)^2 * 2, which the widened 8/4-bit data cannot produce; the sums wrap modulo 2^32 like any
   int32 accumulator (exact whenever the true result fits in int32).
   C (+)= A * W in int32: the per-tile epilogue (scales, bias, post-ops) runs later on the C tile. */
#include "common.h"
#include "ukernel.h"
#include "tile_io.h"
#include "byte_tables.h" /* lut_nibbles */

#define DOT(a, b, acc) wasm_i32x4_add((acc), wasm_i32x4_dot_i16x8((a), (b)))

/* Weight layouts (a constant after inlining): int16 k-pairs, x8 codes (s8 / u8), x4 codes (s4 / u4, and
   f4_e2m1 as the integers 2 v: dynamic int8 activations x fp4 weights, whose scales carry the 0.5). */
enum { WF_S16 = 0, WF_S8 = 1, WF_U8 = 2, WF_S4 = 3, WF_U4 = 4, WF_F4 = 5 };

/* f4_e2m1 codes (nibbles) as 2 v, signed bytes: 2 v is an exact integer in [-12, 12] for every e2m1 value
   (0, 0.5, 1, 1.5, 2, 3, 4, 6), so the integer kernels take fp4 weights with exact int32 sums. */
#define F4X2_LUT wasm_i8x16_const(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12)

/* f4 k-pairs: the bytes' low (code of k) and high (code of k + 1) nibbles interleaved per byte, through
   the 2 v table, sign-extended to the int16 k-pair layout (columns 0..3 as b0, 4..7 as b1). t: one
   k-pair's 16 nibbles, interleaved (F4_NIBBLES). */
#define F4_HALF(t, b0, b1)                                                         \
  do {                                                                             \
    const v128_t v_ = lut_nibbles(F4X2_LUT, t);                                    \
    b0 = wasm_i16x8_extend_low_i8x16(v_);                                          \
    b1 = wasm_i16x8_extend_high_i8x16(v_);                                         \
  } while (0)
/* The nibbles of 16 bytes r: pair t (bytes 0..7) as n0, pair t + 1 (bytes 8..15) as n1, each byte's
   low nibble then its high nibble. */
#define F4_NIBBLES(r, n0, n1)                                                                            \
  do {                                                                                                   \
    const v128_t lo_ = wasm_v128_and(r, wasm_i8x16_splat(0x0f)), hi_ = wasm_u8x16_shr(r, 4);            \
    n0 = wasm_i8x16_shuffle(lo_, hi_, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);          \
    n1 = wasm_i8x16_shuffle(lo_, hi_, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);    \
  } while (0)

/* Bytes of one k-pair of the panel. */
#define PAIR_BYTES(WF) ((WF) == WF_S16 ? 32 : (WF) <= WF_U8 ? 16 : 8)

/* 8 codes widened to int16 by the load itself (x64: pmovsxbw / pmovzxbw from memory). */
#define LD8S(p, off) ({ v128_t r_; __asm__ volatile("local.get %1\n\ti16x8.load8x8_s %2\n\tlocal.set %0" : "=r"(r_) : "r"(p), "i"(off)); r_; })
#define LD8U(p, off) ({ v128_t r_; __asm__ volatile("local.get %1\n\ti16x8.load8x8_u %2\n\tlocal.set %0" : "=r"(r_) : "r"(p), "i"(off)); r_; })

/* One x8 k-pair at byte OFF: the codes of k (8 bytes) and of k + 1 (the next 8) widened by their loads,
   then interleaved per column by two 16-bit unpacks (punpcklwd / punpckhwd): 4 instructions, no
   constant. */
#define X8_PAIR(WF, w, OFF, b0, b1)                                            \
  do {                                                                         \
    const v128_t e_ = (WF) == WF_S8 ? LD8S(w, OFF) : LD8U(w, OFF);             \
    const v128_t o_ = (WF) == WF_S8 ? LD8S(w, (OFF) + 8) : LD8U(w, (OFF) + 8); \
    b0 = wasm_i16x8_shuffle(e_, o_, 0, 8, 1, 9, 2, 10, 3, 11);                 \
    b1 = wasm_i16x8_shuffle(e_, o_, 4, 12, 5, 13, 6, 14, 7, 15);               \
  } while (0)

/* x4 k-pairs without a nibble mask or lookup: s = raw << 4 (16-bit lanes) puts each byte's low nibble
   (code of k) in that byte's top nibble; raw's own top nibble is the code of k + 1. Interleaving the
   bytes (s, raw), then each byte with itself, gives 16-bit lanes whose top nibble is, column by
   column, code(k), code(k + 1); an arithmetic (s4) or logical (u4) shift by 12 leaves the value (the
   low 12 bits, garbage, are shifted out). t: the interleaved bytes of one k-pair. */
#define X4_HALF(WF, t, b0, b1)                                                                              \
  do {                                                                                                      \
    const v128_t l_ = wasm_i8x16_shuffle(t, t, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);              \
    const v128_t h_ = wasm_i8x16_shuffle(t, t, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15);  \
    b0 = (WF) == WF_S4 ? wasm_i16x8_shr(l_, 12) : wasm_u16x8_shr(l_, 12);                                   \
    b1 = (WF) == WF_S4 ? wasm_i16x8_shr(h_, 12) : wasm_u16x8_shr(h_, 12);                                   \
  } while (0)

/* Two k-pairs (t, t + 1) at w as b0 b1 (pair t, columns 0..3 / 4..7) and b2 b3 (pair t + 1). */
#define LOAD_PAIRS2(WF, w, b0, b1, b2, b3)                                                                      \
  if ((WF) == WF_S16) {                                                                                         \
    b0 = LDV(w, 0); b2 = LDV(w, 32); b1 = LDV(w, 16); b3 = LDV(w, 48);                                          \
  } else if ((WF) <= WF_U8) {                                                                                   \
    X8_PAIR(WF, w, 0, b0, b1);                                                                                  \
    X8_PAIR(WF, w, 16, b2, b3);                                                                                 \
  } else if ((WF) == WF_F4) {                                                                                   \
    v128_t n0_, n1_;                                                                                            \
    F4_NIBBLES(LDV(w, 0), n0_, n1_);                                                                            \
    F4_HALF(n0_, b0, b1);                                                                                    \
    F4_HALF(n1_, b2, b3);                                                                                    \
  } else {                                                                                                      \
    const v128_t r_ = LDV(w, 0), s_ = wasm_i16x8_shl(r_, 4);                                                    \
    const v128_t t0_ = wasm_i8x16_shuffle(s_, r_, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);      \
    const v128_t t1_ = wasm_i8x16_shuffle(s_, r_, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31); \
    X4_HALF(WF, t0_, b0, b1);                                                                                   \
    X4_HALF(WF, t1_, b2, b3);                                                                                   \
  }

/* One k-pair at w as b0 b1 (no read past the pair: a panel may end the heap). */
#define LOAD_PAIR1(WF, w, b0, b1)                                                                          \
  if ((WF) == WF_S16) {                                                                                    \
    b0 = wasm_v128_load(w); b1 = wasm_v128_load((const char*)(w) + 16);                                    \
  } else if ((WF) <= WF_U8) {                                                                              \
    X8_PAIR(WF, w, 0, b0, b1);                                                                             \
  } else if ((WF) == WF_F4) {                                                                              \
    v128_t n0_, n1_;                                                                                       \
    F4_NIBBLES(wasm_v128_load64_zero(w), n0_, n1_);                                                        \
    (void)n1_;                                                                                             \
    F4_HALF(n0_, b0, b1);                                                                               \
  } else {                                                                                                 \
    const v128_t r_ = wasm_v128_load64_zero(w), s_ = wasm_i16x8_shl(r_, 4);                                \
    const v128_t t0_ = wasm_i8x16_shuffle(s_, r_, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23); \
    X4_HALF(WF, t0_, b0, b1);                                                                              \
  }

/* The kernel for R = 1..3 rows and layout WF (constants after inlining; rows a short tile lacks are
   not computed). */
INLINE void s16_rows(const int R, const int WF, size_t nc, size_t kc, const int16_t* restrict a,
                     const uint8_t* restrict w, int32_t* restrict c, size_t ldc, int accumulate) {
  /* 0 for every valid call; makes the pointers i32.add results V8 knows are zero-extended. */
  const size_t z = (size_t)((uint32_t)kc >> 31);
  a = a + z;
  int32_t* c0 = c;
  int32_t* c1 = c0 + ldc;
  int32_t* c2 = c1 + ldc;
  w = w + z;

  const v128_t zero = wasm_i32x4_splat(0);
  v128_t v00 = zero, v01 = zero, v10 = zero, v11 = zero, v20 = zero, v21 = zero;
  if (accumulate) {
    load_row8(c0, nc, &v00, &v01);
    if (R > 1) load_row8(c1, nc, &v10, &v11);
    if (R > 2) load_row8(c2, nc, &v20, &v21);
  }

  /* Two k-pairs per iteration, shaped like the f32 kernel: the 4 weight vectors first, then per row
     the two A splats and the row's math: 6 accumulators + 4 weights + 2 splats + 2 products fit V8's
     15 xmm registers. A trailing k-pair (kc / 2 odd) takes the one-pair step. */
  size_t n = kc / 4;
  if (n) do {
    v128_t b0, b1, b2, b3;
    LOAD_PAIRS2(WF, w, b0, b1, b2, b3)
    v128_t x00, x01, x10 = zero, x11 = zero, x20 = zero, x21 = zero;
    x00 = LDS(a, 0);
    x01 = LDS(a, 4 * MR_INT);
    if (R > 1) { x10 = LDS(a, 4); x11 = LDS(a, 4 * MR_INT + 4); }
    if (R > 2) { x20 = LDS(a, 8); x21 = LDS(a, 4 * MR_INT + 8); }
    v00 = DOT(x01, b2, DOT(x00, b0, v00));
    v01 = DOT(x01, b3, DOT(x00, b1, v01));
    if (R > 1) { v10 = DOT(x11, b2, DOT(x10, b0, v10)); v11 = DOT(x11, b3, DOT(x10, b1, v11)); }
    if (R > 2) { v20 = DOT(x21, b2, DOT(x20, b0, v20)); v21 = DOT(x21, b3, DOT(x20, b1, v21)); }
    w += 2 * PAIR_BYTES(WF);
    a += 4 * MR_INT;
  } while (--n);
  if (kc & 2) {
    v128_t b0, b1;
    LOAD_PAIR1(WF, w, b0, b1)
    const v128_t x0 = wasm_v128_load32_splat(a);
    v00 = DOT(x0, b0, v00);
    v01 = DOT(x0, b1, v01);
    if (R > 1) {
      const v128_t x1 = wasm_v128_load32_splat(a + 2);
      v10 = DOT(x1, b0, v10);
      v11 = DOT(x1, b1, v11);
    }
    if (R > 2) {
      const v128_t x2 = wasm_v128_load32_splat(a + 4);
      v20 = DOT(x2, b0, v20);
      v21 = DOT(x2, b1, v21);
    }
  }
  if (R > 2) store_row8(c2, nc, v20, v21);
  if (R > 1) store_row8(c1, nc, v10, v11);
  store_row8(c0, nc, v00, v01);
}

#define S16_ROWS(WF)                                                                  \
  switch (mr) {                                                                       \
    case 3: s16_rows(3, WF, nc, kc, a, (const uint8_t*)w, c, ldc, accumulate); break; \
    case 2: s16_rows(2, WF, nc, kc, a, (const uint8_t*)w, c, ldc, accumulate); break; \
    default: s16_rows(1, WF, nc, kc, a, (const uint8_t*)w, c, ldc, accumulate); break; \
  }

void s16_gemm_3x8(size_t mr, size_t nc, size_t kc, const int16_t* restrict a, const int16_t* restrict w,
                  int32_t* restrict c, size_t ldc, int accumulate) {
  S16_ROWS(WF_S16)
}

void s16_gemm_3x8w8(size_t mr, size_t nc, size_t kc, const int16_t* restrict a, const uint8_t* restrict w,
                    int32_t* restrict c, size_t ldc, int accumulate, int dt) {
  if (dt == DT_S8) S16_ROWS(WF_S8) else S16_ROWS(WF_U8)
}

void s16_gemm_3x8w4(size_t mr, size_t nc, size_t kc, const int16_t* restrict a, const uint8_t* restrict w,
                    int32_t* restrict c, size_t ldc, int accumulate, int dt) {
  if (dt == DT_S4) S16_ROWS(WF_S4) else if (dt == DT_F4_E2M1) S16_ROWS(WF_F4) else S16_ROWS(WF_U4)
}

/* The kc k (kc even) of an x8 / x4 panel from w, widened into the int16 k-pair layout at out (kc x 8
   int16): tiles of more than 3 rows widen a piece once and run s16_gemm_3x8 on it for every 3 rows. */
INLINE void unpack_pairs(const int WF, const uint8_t* restrict w, size_t kc, int16_t* restrict out) {
  const size_t z = (size_t)((uint32_t)kc >> 31);
  w = w + z;
  for (size_t n = kc / 4; n; n--) {
    v128_t b0, b1, b2, b3;
    LOAD_PAIRS2(WF, w, b0, b1, b2, b3)
    wasm_v128_store(out, b0);
    wasm_v128_store(out + 8, b1);
    wasm_v128_store(out + 16, b2);
    wasm_v128_store(out + 24, b3);
    w += 2 * PAIR_BYTES(WF);
    out += 32;
  }
  if (kc & 2) {
    v128_t b0, b1;
    LOAD_PAIR1(WF, w, b0, b1)
    wasm_v128_store(out, b0);
    wasm_v128_store(out + 8, b1);
  }
}

void s16_unpack_w8(const uint8_t* restrict w, size_t kc, int dt, int16_t* restrict out) {
  if (dt == DT_S8) unpack_pairs(WF_S8, w, kc, out);
  else unpack_pairs(WF_U8, w, kc, out);
}

void s16_unpack_w4(const uint8_t* restrict w, size_t kc, int dt, int16_t* restrict out) {
  if (dt == DT_S4) unpack_pairs(WF_S4, w, kc, out);
  else if (dt == DT_F4_E2M1) unpack_pairs(WF_F4, w, kc, out);
  else unpack_pairs(WF_U4, w, kc, out);
}

/* Decode with dynamic int8 activations and K-block weights scales (issue 19): one row x one x8 / x4
   panel, kc k (even) in blocks of blk k (even; the last may be shorter), each block's exact int32 sums
   turned into f32 and multiplied by the block's 8 scales (f32, at sc + b * 8: the `+q` section of the
   panel), then added in block order: F = p0 (first, the group's first block) or F + p_b, mul then add —
   fold_block's arithmetic in gemm-fused.c, in registers: no C tile round trip or call per block. */
INLINE void dq_row(const int WF, size_t kc, size_t blk, const int16_t* restrict a, const uint8_t* restrict w, const float* restrict sc,
                   float* restrict c, int first) {
  const size_t z = (size_t)((uint32_t)kc >> 31);
  a = a + z;
  w = w + z;
  const v128_t zero = wasm_i32x4_splat(0);
  v128_t f0 = zero, f1 = zero;
  if (!first) {
    f0 = wasm_v128_load(c);
    f1 = wasm_v128_load(c + 4);
  }
  for (size_t k = 0; k < kc; k += blk) {
    const size_t len = kc - k < blk ? kc - k : blk;
    v128_t v0 = zero, v1 = zero, u0 = zero, u1 = zero; /* two chains per column half: pairs t, t + 1 */
    for (size_t n = len / 4; n; n--) {
      v128_t b0, b1, b2, b3;
      LOAD_PAIRS2(WF, w, b0, b1, b2, b3)
      const v128_t x0 = LDS(a, 0), x1 = LDS(a, 4 * MR_INT);
      v0 = DOT(x0, b0, v0);
      v1 = DOT(x0, b1, v1);
      u0 = DOT(x1, b2, u0);
      u1 = DOT(x1, b3, u1);
      w += 2 * PAIR_BYTES(WF);
      a += 4 * MR_INT;
    }
    if (len & 2) {
      v128_t b0, b1;
      LOAD_PAIR1(WF, w, b0, b1)
      const v128_t x0 = wasm_v128_load32_splat(a);
      v0 = DOT(x0, b0, v0);
      v1 = DOT(x0, b1, v1);
      w += PAIR_BYTES(WF);
      a += 2 * MR_INT;
    }
    /* integer sums: the order of the adds does not matter */
    const v128_t p0 = wasm_f32x4_mul(wasm_f32x4_convert_i32x4(wasm_i32x4_add(v0, u0)), wasm_v128_load(sc));
    const v128_t p1 = wasm_f32x4_mul(wasm_f32x4_convert_i32x4(wasm_i32x4_add(v1, u1)), wasm_v128_load(sc + 4));
    sc += NR;
    if (first && k == 0) {
      f0 = p0;
      f1 = p1;
    } else {
      f0 = wasm_f32x4_add(f0, p0);
      f1 = wasm_f32x4_add(f1, p1);
    }
  }
  wasm_v128_store(c, f0);
  wasm_v128_store(c + 4, f1);
}

void s16_dq_1x8(size_t kc, size_t blk, const int16_t* restrict a, const uint8_t* restrict w, const float* restrict sc, float* restrict c,
                int first, int dt) {
  switch (dt) {
    case DT_S8: dq_row(WF_S8, kc, blk, a, w, sc, c, first); break;
    case DT_U8: dq_row(WF_U8, kc, blk, a, w, sc, c, first); break;
    case DT_S4: dq_row(WF_S4, kc, blk, a, w, sc, c, first); break;
    case DT_F4_E2M1: dq_row(WF_F4, kc, blk, a, w, sc, c, first); break;
    default: dq_row(WF_U4, kc, blk, a, w, sc, c, first); break;
  }
}

#ifdef RELAXED
typedef signed char i8x16_t __attribute__((vector_size(16)));
typedef int i32x4_t __attribute__((vector_size(16)));
/* lanes of acc + the sums of 4 byte products a[4i..4i+3] * b[4i..4i+3]; b must be in [0, 127] (i7). */
#define RDOT(a, b, acc) ((v128_t)__builtin_wasm_relaxed_dot_i8x16_i7x16_add_s_i32x4((i8x16_t)(a), (i8x16_t)(b), (i32x4_t)(acc)))

/* 1 row x one x4 panel (s4 / u4 / f4_e2m1) on the relaxed dot: a the row's s8 codes (4 consecutive k per i32
   splat), each 4 k x 8 columns of the panel (two k-pairs, 16 bytes) rearranged by nibble masks and
   byte / 16-bit unpacks into [column: k k+1 k+2 k+3] x 4 columns x 2, s4 biased to code + 8 in [0, 15]
   (the i7 operand), the bias removed with 8 x the row's sum over the block (one more dot with ones);
   f4_e2m1 nibbles through a table to 2 v + 12 in [0, 24] (exact integers, i7), minus 12 x the sum (the
   caller's scales carry the 0.5).
   Integer sums: the same int32 values as the SIMD128 kernels. sc = 0: C (int32, 8 columns) = sums
   (+ C when acc), kc = blk; else blocks of blk k (even) folded as dq_row does. kc: the real k count
   (no padding k is read from a). */
INLINE void rdot_row_x4(const int WF, size_t kc, size_t blk, const int8_t* restrict a, const uint8_t* restrict w, const float* restrict sc,
                        void* restrict c, int acc, int first) {
  const v128_t zero = wasm_i32x4_splat(0), m4 = wasm_i8x16_splat(0x0f), ones = wasm_i8x16_splat(1);
  const v128_t xb = wasm_i8x16_splat(WF == WF_S4 ? (int8_t)0x88 : 0);
  const v128_t f4b = wasm_i8x16_const(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0); /* 2 v + 12 */
  v128_t f0 = zero, f1 = zero;
  if (sc && !first) {
    f0 = wasm_v128_load(c);
    f1 = wasm_v128_load((const float*)c + 4);
  }
  for (size_t k = 0; k < kc; k += blk) {
    const size_t len = kc - k < blk ? kc - k : blk;
    v128_t v0 = zero, v1 = zero, sum = zero;
    size_t y = 0;
    for (; y + 4 <= len; y += 4) {
      v128_t r = wasm_v128_load(w);
      if (WF == WF_S4) r = wasm_v128_xor(r, xb);
      v128_t lo = wasm_v128_and(r, m4), hi = wasm_u8x16_shr(r, 4);
      if (WF == WF_F4) {
        lo = lut_nibbles(f4b, lo);
        hi = lut_nibbles(f4b, hi);
      }
      const v128_t p01 = wasm_i8x16_shuffle(lo, hi, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
      const v128_t p23 = wasm_i8x16_shuffle(lo, hi, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
      const v128_t c03 = wasm_i16x8_shuffle(p01, p23, 0, 8, 1, 9, 2, 10, 3, 11);
      const v128_t c47 = wasm_i16x8_shuffle(p01, p23, 4, 12, 5, 13, 6, 14, 7, 15);
      const v128_t x = wasm_v128_load32_splat(a + y);
      v0 = RDOT(x, c03, v0);
      v1 = RDOT(x, c47, v1);
      if (WF == WF_S4 || WF == WF_F4) sum = RDOT(x, ones, sum);
      w += 16;
    }
    if (y < len) { /* 1-3 last k (the end of K): their k-pairs, activations zero past len (times any code: 0) */
      const size_t r = len - y;
      v128_t q = r > 2 ? wasm_v128_load(w) : wasm_v128_load64_zero(w);
      if (WF == WF_S4) q = wasm_v128_xor(q, xb);
      v128_t lo = wasm_v128_and(q, m4), hi = wasm_u8x16_shr(q, 4);
      if (WF == WF_F4) { /* zero padding bytes give 12 here: times activations 0 */
        lo = lut_nibbles(f4b, lo);
        hi = lut_nibbles(f4b, hi);
      }
      const v128_t p01 = wasm_i8x16_shuffle(lo, hi, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
      const v128_t p23 = wasm_i8x16_shuffle(lo, hi, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
      const v128_t c03 = wasm_i16x8_shuffle(p01, p23, 0, 8, 1, 9, 2, 10, 3, 11);
      const v128_t c47 = wasm_i16x8_shuffle(p01, p23, 4, 12, 5, 13, 6, 14, 7, 15);
      uint32_t bytes = (uint8_t)a[y];
      if (r > 1) bytes |= (uint32_t)(uint8_t)a[y + 1] << 8;
      if (r > 2) bytes |= (uint32_t)(uint8_t)a[y + 2] << 16;
      const v128_t x = wasm_i32x4_splat((int32_t)bytes);
      v0 = RDOT(x, c03, v0);
      v1 = RDOT(x, c47, v1);
      if (WF == WF_S4 || WF == WF_F4) sum = RDOT(x, ones, sum);
      w += 8 * ((r + 1) / 2);
    }
    if (WF == WF_S4 || WF == WF_F4) {
      const v128_t b = WF == WF_S4 ? wasm_i32x4_shl(sum, 3) : wasm_i32x4_mul(sum, wasm_i32x4_splat(12));
      v0 = wasm_i32x4_sub(v0, b);
      v1 = wasm_i32x4_sub(v1, b);
    }
    a += len;
    if (!sc) {
      if (acc) {
        v0 = wasm_i32x4_add(v0, wasm_v128_load(c));
        v1 = wasm_i32x4_add(v1, wasm_v128_load((const int32_t*)c + 4));
      }
      wasm_v128_store(c, v0);
      wasm_v128_store((int32_t*)c + 4, v1);
      return;
    }
    const v128_t q0 = wasm_f32x4_mul(wasm_f32x4_convert_i32x4(v0), wasm_v128_load(sc));
    const v128_t q1 = wasm_f32x4_mul(wasm_f32x4_convert_i32x4(v1), wasm_v128_load(sc + 4));
    sc += NR;
    if (first && k == 0) {
      f0 = q0;
      f1 = q1;
    } else {
      f0 = wasm_f32x4_add(f0, q0);
      f1 = wasm_f32x4_add(f1, q1);
    }
  }
  if (sc) {
    wasm_v128_store(c, f0);
    wasm_v128_store((float*)c + 4, f1);
  }
}

void s8_rdot_1x8w4(size_t kc, size_t blk, const int8_t* restrict a, const uint8_t* restrict w, const float* restrict sc, void* restrict c,
                   int acc, int first, int dt) {
  if (dt == DT_S4) rdot_row_x4(WF_S4, kc, blk, a, w, sc, c, acc, first);
  else if (dt == DT_F4_E2M1) rdot_row_x4(WF_F4, kc, blk, a, w, sc, c, acc, first);
  else rdot_row_x4(WF_U4, kc, blk, a, w, sc, c, acc, first);
}
/* Whether this runtime computes i32x4.relaxed_dot_i8x16_i7x16_add_s as the exact sums of products plus
   the accumulator. The engine first says whether relaxed SIMD is native (set_relaxed_dot: Node 20 only
   has it behind a flag and returns other values); where it is, the kernel itself is probed once on 64 k
   of s4 codes against scalar sums. The state lives in the shared memory: every thread of one engine
   sees the same answer (racing probes agree). */
static volatile int32_t rdot_state; /* 0 unknown, 1 exact, 2 not used */
/* allowed: bit 0 the i32x4 dot (opt-in: Engine.create relaxedDot), bit 1 the i16x8 dot of s8_dq_1x16w4r (where relaxed
   SIMD is native) */
EXPORT(set_relaxed_dot) void set_relaxed_dot(int32_t allowed) {
  rdot_state = allowed & 1 ? 0 : 2;
  rd16_allow(allowed & 2);
}
int32_t rdot_ok(void) {
  if (rdot_state == 0) {
    static int8_t a[64];
    static uint8_t w[256];
    static int32_t c[8];
    for (int i = 0; i < 64; i++) a[i] = (int8_t)((i * 97 + 13) % 255 - 127);
    for (int i = 0; i < 256; i++) w[i] = (uint8_t)((i * 59 + 7) & 255);
    s8_rdot_1x8w4(64, 64, a, w, 0, c, 0, 1, DT_S4);
    int ok = 1;
    for (int q = 0; q < NR; q++) {
      int32_t want = 0;
      for (int k = 0; k < 64; k++) {
        const int nib = (w[(k >> 1) * NR + q] >> (4 * (k & 1))) & 15;
        want += a[k] * (nib >= 8 ? nib - 16 : nib);
      }
      ok = ok && c[q] == want;
    }
    rdot_state = ok ? 1 : 2;
  }
  return rdot_state == 1;
}
EXPORT(relaxed_dot_ok) int32_t relaxed_dot_ok(void) { return rdot_ok(); }
#else
EXPORT(set_relaxed_dot) void set_relaxed_dot(int32_t allowed) { (void)allowed; }
EXPORT(relaxed_dot_ok) int32_t relaxed_dot_ok(void) { return 0; }
int32_t rdot_ok(void) { return 0; }
void s8_rdot_1x8w4(size_t kc, size_t blk, const int8_t* restrict a, const uint8_t* restrict w, const float* restrict sc, void* restrict c,
                   int acc, int first, int dt) {
  (void)kc; (void)blk; (void)a; (void)w; (void)sc; (void)c; (void)acc; (void)first; (void)dt;
}
#endif
