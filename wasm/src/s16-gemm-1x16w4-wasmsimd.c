/* Integer decode microkernel for 4-bit weights (issue 19): 1 row x 2 x4:p8k2 panels (16 columns), exact
   int32 sums, with one byte shuffle and one mask per 4 columns x 4 k instead of the 3x8 kernel's nibble
   shifts and unpacks (s16-gemm-3x8-wasmsimd.c: 6 shuffles + 5 shifts per 32 weights, all on the x64
   shuffle / shift ports; here 2 shuffles + 2 ands).

   Weights: 16 bytes of a panel = k-pairs t, t + 1 (byte q: code(2t, q) | code(2t + 1, q) << 4, then
   the same for t + 1). One swizzle puts, in the 32-bit lane of column q, the int16 pair
   (byte q of t, byte q of t + 1) zero-extended (indices 0x80 give the zero high bytes: 0 under
   i8x16.swizzle and relaxed_swizzle alike): H = (c0 + 16 c1, c2 + 16 c3) (ci = code(2t + i, q)); masked
   by 0x000F it is L = (c0, c2). i32x4.dot_i16x8_s of H with the activations' [x1 | x3] and of L with
   [16 x0 - x1 | 16 x2 - x3] (the quad layout, s16_quad_row) adds
   x1 c0 + 16 x1 c1 + x3 c2 + 16 x3 c3 + 16 x0 c0 - x1 c0 + 16 x2 c2 - x3 c2 = 16 (x0 c0 + x1 c1 + x2 c2 + x3 c3)
   into the column's lane: the sums are 16x the true ones, shifted back exactly at the end (the int32 adds
   wrap, so only the final sum has to fit). s4 codes are biased by xor 0x88 (code + 8 in [0, 15]) and 8 x
   the block's activation sum is subtracted. Integer sums do not depend on the order: the results are
   bitwise those of s16_gemm_3x8w4 / s16_dq_1x8. Bounds: 17 |x| fits int16 (the caller's 8-bit src:
   |x| <= 255) and 16 x the biased sum fits int32 (|x| <= 255: kc <= 32768; the caller checks both).

   f4_e2m1 codes (dynamic int8 activations x MXFP4 / NVFP4): the integers 2 v + 12 (2 v exact in
   [-12, 12] for every e2m1 value) take 5 bits. So the 16 code bytes are split into low and high nibbles,
   each through a 16-entry byte table to 2 v + 12, then placed per column by the same swizzles: int16
   pairs (w(2t), w(2t + 2)) and (w(2t + 1), w(2t + 3)), against the activations' plain quad layout
   [x0, x2, x1, x3], minus 12 x the block's activation sum. The sums are of 2 v: the caller's scales carry
   the 0.5. Bounds: 24 x 127 x kc fits int32. */
#include "common.h"
#include "ukernel.h"
#include "tile_io.h"
#include "dq_row16.h"
#include "byte_tables.h"

#define DOT(a, b, acc) wasm_i32x4_add((acc), wasm_i32x4_dot_i16x8((a), (b)))
#define KEEP(v) __asm__("" : "+r"(v))

#ifdef RELAXED
#define SWZ0(x) ((v128_t)__builtin_wasm_relaxed_swizzle_i8x16((__i8x16)(x), (__i8x16)i0))
#define SWZ1(x) ((v128_t)__builtin_wasm_relaxed_swizzle_i8x16((__i8x16)(x), (__i8x16)i1))
#else
#define SWZ0(x) wasm_i8x16_swizzle((x), i0)
#define SWZ1(x) wasm_i8x16_swizzle((x), i1)
#endif

/* The row's int16 k-pairs (s16_gemm_3x8's micro-panel, row 0: k-pair t at i32 index 3t) in the quad
   layout at out: per 4 k, int16 [16 x0 - x1, 16 x2 - x3, x1, x3] (mul = 16, x4 codes) or [x0, x2, x1, x3]
   (mul = 1, f4_e2m1 codes), or (mul = 0) s8_rd16_row's 32 bytes (a missing last k-pair: zeros); sums[b] = the activations' sum over block b of
   blk k (blk a multiple of 4; 0: one block of kcp). */
void s16_quad_row_x(const int16_t* a, int16_t* out, size_t kcp, size_t blk, int32_t* sums, int32_t mul) {
  const int32_t* in = (const int32_t*)a;
  if (!blk) blk = kcp;
  int32_t s = 0;
  size_t b = 0, left = blk; /* k left in the block (no division per step: 2% of a decode step) */
  for (size_t k = 0; k < kcp; k += 4) {
    const int32_t p0 = in[3 * (k / 2)], p1 = k + 2 < kcp ? in[3 * (k / 2 + 1)] : 0;
    const int16_t x0 = (int16_t)p0, x1 = (int16_t)(p0 >> 16), x2 = (int16_t)p1, x3 = (int16_t)(p1 >> 16);
    if (mul == 0) { /* s8_rd16_row's expansion */
      wasm_v128_store(out + 4 * k, wasm_i16x8_splat((int16_t)((uint8_t)x0 | (uint8_t)x2 << 8)));
      wasm_v128_store(out + 4 * k + 8, wasm_i16x8_splat((int16_t)((uint8_t)x1 | (uint8_t)x3 << 8)));
    } else {
      out[k] = (int16_t)(mul == 16 ? 16 * x0 - x1 : x0);
      out[k + 1] = (int16_t)(mul == 16 ? 16 * x2 - x3 : x2);
      out[k + 2] = x1;
      out[k + 3] = x3;
    }
    s += x0 + x1 + x2 + x3;
    if (left <= 4 || k + 4 >= kcp) {
      sums[b++] = s;
      s = 0;
      left = blk;
    } else left -= 4;
  }
}

/* The x4 codes' layout: [16 x0 - x1, 16 x2 - x3, x1, x3]. (f4_e2m1 weights take mul = 1: [x0, x2, x1, x3].) */
void s16_quad_row(const int16_t* a, int16_t* out, size_t kcp, size_t blk, int32_t* sums) { s16_quad_row_x(a, out, kcp, blk, sums, 16); }

/* Code kinds (a constant after inlining): u4, s4 (biased by xor 0x88), f4_e2m1 (2 v + 12 by a table). */
enum { C4_U4 = 0, C4_S4 = 1, C4_F4 = 2 };

/*
 * The constants both decode kernels keep in registers: the swizzles placing each code byte of 4 columns,
 * zero-extended, in the int16 pairs of the quad activation layout (i0 / i1), the low nibble mask (mlo), and
 * (s4) the xor that biases codes to u4; f4: the 2 v + 12 table (mhi).
 */
#define DQ4_CONSTANTS(CK_)                                                                          \
  v128_t i0 = wasm_i8x16_const(0, -128, 8, -128, 1, -128, 9, -128, 2, -128, 10, -128, 3, -128, 11, -128); \
  v128_t i1 = wasm_i8x16_const(4, -128, 12, -128, 5, -128, 13, -128, 6, -128, 14, -128, 7, -128, 15, -128); \
  v128_t mlo = wasm_i8x16_splat(0x0f), xb = wasm_i8x16_splat((int8_t)0x88);                       \
  v128_t mhi = wasm_i8x16_const(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0);       \
  KEEP(i0);                                                                                         \
  KEEP(i1);                                                                                         \
  KEEP(mlo);                                                                                        \
  if ((CK_) == C4_F4) KEEP(mhi);                                                                    \
  if ((CK_) == C4_S4) KEEP(xb)

#ifdef RELAXED
#define LUT16(t, x) ((v128_t)__builtin_wasm_relaxed_swizzle_i8x16((__i8x16)(t), (__i8x16)(x)))
#else
#define LUT16(t, x) wasm_i8x16_swizzle((t), (x))
#endif

/* 16 code bytes R (k-pairs t, t + 1 of 8 columns) as the int16 vectors the dots take: L0 / L1 (columns 0-3 /
   4-7) against the activations [16 x0 - x1, 16 x2 - x3] (f4: [x0 x2]), H0 / H1 against [x1 x3]. x4: the code
   bytes zero-extended (H) and their low nibbles (L); f4: each nibble through the table, then placed (see the
   top of the file). */
#define CODES4(CK, R, L0, H0, L1, H1)                                                      \
  do {                                                                                     \
    v128_t r_ = (R);                                                                       \
    if ((CK) == C4_F4) {                                                                   \
      const v128_t ul_ = LUT16(mhi, wasm_v128_and(r_, mlo));                               \
      const v128_t uh_ = LUT16(mhi, wasm_v128_and(wasm_u16x8_shr(r_, 4), mlo));            \
      L0 = SWZ0(ul_);                                                                      \
      H0 = SWZ0(uh_);                                                                      \
      L1 = SWZ1(ul_);                                                                      \
      H1 = SWZ1(uh_);                                                                      \
    } else {                                                                               \
      if ((CK) == C4_S4) r_ = wasm_v128_xor(r_, xb);                                       \
      H0 = SWZ0(r_);                                                                       \
      H1 = SWZ1(r_);                                                                       \
      L0 = wasm_v128_and(H0, mlo);                                                         \
      L1 = wasm_v128_and(H1, mlo);                                                         \
    }                                                                                      \
  } while (0)

/* The 1-row kernels' two ways to sum (a constant after inlining): KV_QUAD, the SIMD128 int16 dots on the quad layout
   (16 x the sums), and KV_RD16, relaxed SIMD's i16x8 dot on the row's bytes (the sums themselves; RELAXED build). */
enum { KV_QUAD = 0, KV_RD16 = 1 };

/* The block's sums from the kernels' raw ones: x4 codes 16 x (back by an arithmetic shift), minus the s4
   bias 8 x sum(x); f4 minus 12 x sum(x). */
INLINE v128_t dq4_fix(const int CK, const int KV, v128_t v, v128_t bias) {
  if (CK != C4_F4 && KV == KV_QUAD) v = wasm_i32x4_shr(v, 4);
  return CK == C4_U4 ? v : wasm_i32x4_sub(v, bias);
}
INLINE v128_t dq4_bias(const int CK, int32_t xs) {
  return wasm_i32x4_splat((int32_t)((uint32_t)xs * (CK == C4_F4 ? 12u : 8u)));
}

#ifdef RELAXED
/* KV_RD16 (issue 19): i16x8.relaxed_dot_i8x16_i7x16_s is one pmaddubsw on x64 (16 byte products summed in pairs
   into int16 lanes), against the quad kernel's 4 pmaddwd + 4 paddd and 2 shuffles per 16 code bytes: here 1
   shuffle, 2 dots, 2 int16 adds. One byte shuffle puts column q's two code bytes side by side (bytes (q, q + 8) of
   the 16: k-pairs t and t + 1); masked, the pair is (c(4s), c(4s + 2)); shifted right 4 as int16 and masked,
   (c(4s + 1), c(4s + 3)). The row's bytes are expanded once per A block (s8_rd16_row) to [x(4s) x(4s + 2)] x 8 and
   [x(4s + 1) x(4s + 3)] x 8, so each int16 lane of the dots is one column. Codes are the i7 operand (u4, s4
   biased by xor 0x88: [0, 15]), so the relaxed dot is exact (no VNNI-dependent result); a pair is at most
   2 x 128 x 15 = 3840, so 8 dots (16 k) fit int16 before they are widened to the int32 sums. Integer sums:
   bitwise the quad kernel's. */
#define RD16(x, c) ((v128_t)__builtin_wasm_relaxed_dot_i8x16_i7x16_s_i16x8((__i8x16)(x), (__i8x16)(c)))
/* 16 code bytes (LOAD) as the dots' i7 operands: L, columns' (k 4s, 4s + 2), and H, (4s + 1, 4s + 3); f4_e2m1 nibbles
   through the table to 2 v + 12 in [0, 24] (then a pair is at most 2 x 128 x 24 = 6144: 4 dots, 8 k, per int16 sum). */
#define RD16_CODES(LOAD, L, H)                                                                   \
  do {                                                                                           \
    v128_t r_ = (LOAD);                                                                          \
    if (CK == C4_S4) r_ = wasm_v128_xor(r_, xb);                                                 \
    r_ = (v128_t)__builtin_wasm_relaxed_swizzle_i8x16((__i8x16)r_, (__i8x16)ix);                 \
    L = wasm_v128_and(r_, mlo);                                                                  \
    H = wasm_v128_and(wasm_u16x8_shr(r_, 4), mlo);                                               \
    if (CK == C4_F4) {                                                                           \
      L = LUT16(mhi, L);                                                                         \
      H = LUT16(mhi, H);                                                                         \
    }                                                                                            \
  } while (0)
/* steps (4 k) per int16 sum before it is widened */
#define RD16_CH (CK == C4_F4 ? 2 : 4)
#define RD16_STEP(P, LOAD)                                      \
  do {                                                          \
    v128_t lo_, hi_;                                            \
    RD16_CODES(LOAD, lo_, hi_);                                 \
    h_ = wasm_i16x8_add(h_, RD16(wasm_v128_load(x_), lo_));     \
    h_ = wasm_i16x8_add(h_, RD16(wasm_v128_load(x_ + 16), hi_)); \
    (P) += 16;                                                  \
    x_ += 32;                                                   \
  } while (0)
#define RD16_WIDEN(V0, V1)                                       \
  do {                                                           \
    V0 = wasm_i32x4_add(V0, wasm_i32x4_extend_low_i16x8(h_));    \
    V1 = wasm_i32x4_add(V1, wasm_i32x4_extend_high_i16x8(h_));   \
  } while (0)
/* One panel (P) over LEN k (even; one K block) from the expanded row at a: int32 sums into V0 / V1 (columns 0-3 / 4-7);
   P and a past the block (a: 32 bytes per 4 k, a last k-pair included). */
#define RD16_BLOCK(P, LEN, V0, V1)                                                  \
  do {                                                                              \
    const int8_t* x_ = (const int8_t*)a;                                            \
    size_t n_ = (LEN) / 4;                                                          \
    for (; n_ >= RD16_CH; n_ -= RD16_CH) {                                          \
      v128_t h_ = zero;                                                             \
      RD16_STEP(P, wasm_v128_load(P));                                              \
      RD16_STEP(P, wasm_v128_load(P));                                              \
      if (RD16_CH == 4) {                                                           \
        RD16_STEP(P, wasm_v128_load(P));                                            \
        RD16_STEP(P, wasm_v128_load(P));                                            \
      }                                                                             \
      RD16_WIDEN(V0, V1);                                                           \
    }                                                                               \
    if (n_ || ((LEN) & 2)) { /* fewer steps than a chunk and the last k-pair */     \
      v128_t h_ = zero;                                                             \
      for (; n_; n_--) RD16_STEP(P, wasm_v128_load(P));                             \
      if ((LEN) & 2) RD16_STEP(P, wasm_v128_load64_zero(P));                        \
      RD16_WIDEN(V0, V1);                                                           \
    }                                                                               \
    a = (const int16_t*)x_;                                                         \
  } while (0)
/* The same for two rows (a0, a1: both expanded) against each code vector: int32 sums V0 / V1 (row 0), V2 / V3 (row 1). */
#define RD16_STEP2(P, LOAD)                                                                  \
  do {                                                                                       \
    v128_t lo_, hi_;                                                                         \
    RD16_CODES(LOAD, lo_, hi_);                                                              \
    h_ = wasm_i16x8_add(h_, RD16(wasm_v128_load(x_), lo_));                                  \
    h_ = wasm_i16x8_add(h_, RD16(wasm_v128_load(x_ + 16), hi_));                             \
    g_ = wasm_i16x8_add(g_, RD16(wasm_v128_load(y_), lo_));                                  \
    g_ = wasm_i16x8_add(g_, RD16(wasm_v128_load(y_ + 16), hi_));                             \
    (P) += 16;                                                                               \
    x_ += 32;                                                                                \
    y_ += 32;                                                                                \
  } while (0)
#define RD16_ROWS2(P, LEN, V0, V1, V2, V3)                                          \
  do {                                                                              \
    const int8_t* x_ = (const int8_t*)a0;                                           \
    const int8_t* y_ = (const int8_t*)a1;                                           \
    size_t n_ = (LEN) / 4;                                                          \
    for (; n_ >= RD16_CH; n_ -= RD16_CH) {                                          \
      v128_t h_ = zero, g_ = zero;                                                  \
      RD16_STEP2(P, wasm_v128_load(P));                                             \
      RD16_STEP2(P, wasm_v128_load(P));                                             \
      if (RD16_CH == 4) {                                                           \
        RD16_STEP2(P, wasm_v128_load(P));                                           \
        RD16_STEP2(P, wasm_v128_load(P));                                           \
      }                                                                             \
      RD16_WIDEN(V0, V1);                                                           \
      h_ = g_;                                                                      \
      RD16_WIDEN(V2, V3);                                                           \
    }                                                                               \
    if (n_ || ((LEN) & 2)) {                                                        \
      v128_t h_ = zero, g_ = zero;                                                  \
      for (; n_; n_--) RD16_STEP2(P, wasm_v128_load(P));                            \
      if ((LEN) & 2) RD16_STEP2(P, wasm_v128_load64_zero(P));                       \
      RD16_WIDEN(V0, V1);                                                           \
      h_ = g_;                                                                      \
      RD16_WIDEN(V2, V3);                                                           \
    }                                                                               \
  } while (0)
#define RD16_IX(KV_)                                                                            \
  v128_t ix = wasm_i8x16_const(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);          \
  if ((KV_) == KV_RD16) KEEP(ix)
#else
#define RD16_BLOCK(P, LEN, V0, V1) do { (void)(P); } while (0)
#define RD16_ROWS2(P, LEN, V0, V1, V2, V3) do { (void)(P); } while (0)
#define RD16_IX(KV_)
#endif

/* One step of one panel (P): 4 k (or the last k-pair), its two sums V0 (columns 0-3) and V1 (4-7). */
#define PANEL_STEP(P, LOAD, V0, V1)                                                   \
  do {                                                                                \
    v128_t l0, h0, l1, h1;                                                            \
    CODES4(CK, LOAD, l0, h0, l1, h1);                                                 \
    const v128_t xa = LDS(a, 0), xo = LDS(a, 4);                                      \
    V0 = DOT(h0, xo, DOT(l0, xa, V0));                                                \
    V1 = DOT(h1, xo, DOT(l1, xa, V1));                                                \
    (P) += 16;                                                                        \
    a += 4;                                                                           \
  } while (0)

/* kc k (even) of one row x two panels (w, w + ps) in blocks of blk k (a multiple of 4; the last may be
   shorter). sc = 0: C (int32, nc1 + nc2 columns) = sums (+ C when acc), one block. Else block b's sums
   in f32 times its 8 + 8 f32 scales (sc + 8 b and sc + sps + 8 b) added in block order to the f32 C
   (F = p0 when first, else F + p_b): dq_row's arithmetic. */
INLINE void dq4_row16(const int CK, const int KV, size_t nc1, size_t nc2, size_t kc, size_t blk, const int16_t* restrict a,
                      const int32_t* restrict xs, const uint8_t* restrict w, size_t ps, const float* restrict sc, size_t sps,
                      void* restrict c, int acc, int first) {
  const size_t z = (size_t)((uint32_t)kc >> 31);
  a = a + z;
  w = w + z;
  const uint8_t* u = w + ps;
  DQ4_CONSTANTS(CK);
  RD16_IX(KV);
  DQ16_F_INIT
  for (size_t k = 0; k < kc; k += blk) {
    const size_t len = kc - k < blk ? kc - k : blk;
    v128_t v0 = zero, v1 = zero, v2 = zero, v3 = zero;
    /* One panel at a time: one sequential stream of weights, not two interleaved ones (from memory 1.02x
       on Node 24, 1.09x on Node 20: reports/issue19-s11-kernel-ab.txt); integer sums,
       so the same bits. */
    const int16_t* a0 = a;
    if (KV == KV_RD16) {
      RD16_BLOCK(w, len, v0, v1);
      a = a0;
      RD16_BLOCK(u, len, v2, v3);
    } else {
    for (const uint8_t* const we2 = w + 32 * (len / 8); w != we2;) {
      PANEL_STEP(w, wasm_v128_load(w), v0, v1);
      PANEL_STEP(w, wasm_v128_load(w), v0, v1);
    }
    if (len & 4) PANEL_STEP(w, wasm_v128_load(w), v0, v1);
    if (len & 2) PANEL_STEP(w, wasm_v128_load64_zero(w), v0, v1); /* the last k-pair: its 8 bytes (no read past
                                                                     the panel); x2 = x3 = 0 in the quad */
    a = a0;
    for (const uint8_t* const ue2 = u + 32 * (len / 8); u != ue2;) {
      PANEL_STEP(u, wasm_v128_load(u), v2, v3);
      PANEL_STEP(u, wasm_v128_load(u), v2, v3);
    }
    if (len & 4) PANEL_STEP(u, wasm_v128_load(u), v2, v3);
    if (len & 2) PANEL_STEP(u, wasm_v128_load64_zero(u), v2, v3);
    }
    /* the exact sums (x4: 16 x, shifted back), minus the codes' bias x sum(x) */
    const v128_t bias = dq4_bias(CK, *xs);
    v0 = dq4_fix(CK, KV, v0, bias);
    v1 = dq4_fix(CK, KV, v1, bias);
    v2 = dq4_fix(CK, KV, v2, bias);
    v3 = dq4_fix(CK, KV, v3, bias);
    xs++;
    DQ16_BLOCK_END;
  }
  DQ16_F_STORE
}

/* A batch's folds in block order, FOLD(b, s0, s1) for block b with its scales read in place: SDT DT_F32, 8 f32 per
   block at sc; 1-byte types, 8 bytes per block at sb, decoded two blocks at a time times TV. sc / sb end past the batch. */
#define FOLD_BATCH(FOLD, NB, TV)                                                                                        \
  do {                                                                                                                  \
    if (SDT == DT_F32) {                                                                                                \
      for (size_t b_ = 0; b_ < (NB); b_++, sc += NR) FOLD(b_, wasm_v128_load(sc), wasm_v128_load(sc + 4));              \
    } else {                                                                                                            \
      for (size_t b_ = 0; b_ < (NB); b_ += 2, sb += 2 * NR) {                                                           \
        /* a last odd block: its 8 bytes twice (no read past the section: a panel may end the heap) */                  \
        v128_t s_[4];                                                                                                   \
        scales16_b1(b_ + 1 < (NB) ? wasm_v128_load(sb) : wasm_v128_load64_splat(sb), SDT, (TV), s_);                    \
        FOLD(b_, s_[0], s_[1]);                                                                                         \
        if (b_ + 1 < (NB)) FOLD(b_ + 1, s_[2], s_[3]);                                                                  \
      }                                                                                                                 \
      sb -= ((NB) & 1) * NR; /* an odd batch: the next one starts on the block after it */                              \
    }                                                                                                                   \
  } while (0)

/* Blocks of sums computed before their folds: at most this many per batch (their int32 sums, 8 KB, on the stack). */
#define DQ4_SUMS_BATCH 256

/* One panel of dq4_row16 for short K blocks (blk <= 64: w4k32, MXFP4, NVFP4) with scales: the sums of up to
   DQ4_SUMS_BATCH blocks, then their folds in block order (the same f32 steps) into the 8 f32 at c. So a panel's
   codes and then its scales (x4:p8k2+q: right past the codes) are read as one run: weights read with gaps of
   512 bytes or more between runs stream at half the rate (AMD EPYC, Node 20, 20 experts x 176 panels from
   memory, bench-kernels' ukernel_dq4: 8 KB panels 12.6 GB/s back to back, 5.5-6.2 GB/s 512 B - 8 KB apart),
   and reading a block's scales beside its codes (32 bytes every 128) made such gaps in both.
   SDT: the scales' type. DT_F32: 8 f32 per block at sc. DT_E8M0 / DT_F8_E4M3 (f4_e2m1 codes: MXFP4, NVFP4): the
   panel's stored 8 bytes per block at sc, decoded two blocks at a time and times 0.5 (the codes' sums are of
   2 v): the values the staged copy held (lowp_emb_scales), so the same bits. */
INLINE void dq4_panel_short(const int CK, const int KV, const int SDT, size_t kc, size_t blk, const int16_t* restrict a, const int32_t* restrict xs,
                            const uint8_t* restrict w, const void* restrict scv, float* restrict c, int first) {
  DQ4_CONSTANTS(CK);
  RD16_IX(KV);
  const v128_t zero = wasm_i32x4_splat(0);
  v128_t f0 = zero, f1 = zero;
  if (!first) {
    f0 = wasm_v128_load(c);
    f1 = wasm_v128_load(c + 4);
  }
  const float* sc = (const float*)scv;
  const uint8_t* sb = (const uint8_t*)scv;
  const v128_t half = wasm_f32x4_splat(0.5f); /* (1-byte scales: f4_e2m1's 2 v codes) */
  int32_t sums[DQ4_SUMS_BATCH * NR] __attribute__((aligned(16)));
#define FOLD_BLOCK(B, S0, S1)                                                                                  \
  do {                                                                                                         \
    const v128_t p0 = wasm_f32x4_mul(wasm_f32x4_convert_i32x4(wasm_v128_load(sums + NR * (B))), (S0));         \
    const v128_t p1 = wasm_f32x4_mul(wasm_f32x4_convert_i32x4(wasm_v128_load(sums + NR * (B) + 4)), (S1));     \
    if (first && b0 + (B) == 0) {                                                                              \
      f0 = p0;                                                                                                 \
      f1 = p1;                                                                                                 \
    } else {                                                                                                   \
      f0 = wasm_f32x4_add(f0, p0);                                                                             \
      f1 = wasm_f32x4_add(f1, p1);                                                                             \
    }                                                                                                          \
  } while (0)
  for (size_t k = 0, b0 = 0; k < kc;) {
    size_t nb = 0;
    for (; nb < DQ4_SUMS_BATCH && k < kc; nb++, k += blk) {
      const size_t len = kc - k < blk ? kc - k : blk;
      v128_t v0 = zero, v1 = zero;
      if (KV == KV_RD16) RD16_BLOCK(w, len, v0, v1);
      else {
        for (size_t n = len / 4; n; n--) PANEL_STEP(w, wasm_v128_load(w), v0, v1);
        if (len & 2) PANEL_STEP(w, wasm_v128_load64_zero(w), v0, v1);
      }
      const v128_t bias = dq4_bias(CK, *xs++);
      wasm_v128_store(sums + NR * nb, dq4_fix(CK, KV, v0, bias));
      wasm_v128_store(sums + NR * nb + 4, dq4_fix(CK, KV, v1, bias));
    }
    FOLD_BATCH(FOLD_BLOCK, nb, half);
    b0 += nb;
  }
#undef FOLD_BLOCK
  wasm_v128_store(c, f0);
  wasm_v128_store(c + 4, f1);
}

/* dq4_row16 for short K blocks with scales: one panel after the other (columns 0-7, then 8-15; the second panel's
   scales sps floats (f32) or bytes (1-byte types) past the first's). */
INLINE void dq4_row16_short(const int CK, const int KV, const int SDT, size_t kc, size_t blk, const int16_t* restrict a, const int32_t* restrict xs,
                            const uint8_t* restrict w, size_t ps, const void* restrict sc, size_t sps, float* restrict c, int first) {
  const size_t z = (size_t)((uint32_t)kc >> 31);
  dq4_panel_short(CK, KV, SDT, kc, blk, a + z, xs, w + z, sc, c, first);
  dq4_panel_short(CK, KV, SDT, kc, blk, a + z, xs, w + z + ps, (const uint8_t*)sc + sps * (SDT == DT_F32 ? 4 : 1), c + NR, first);
}

/* 1 row x two panels of f4_e2m1 codes with their 1-byte K-block scales (sdt: DT_E8M0 or DT_F8_E4M3, 8 bytes per
   block; blk <= 64, a multiple of 4) read in place, each panel's after its codes (sps: bytes from the first
   panel's scales to the second's): s16_dq_1x16w4's folds into the f32 C, the same bits as with the staged copy. */
void s16_dq_1x16f4(size_t kc, size_t blk, const int16_t* restrict a, const int32_t* restrict xs, const uint8_t* restrict w, size_t ps,
                   const uint8_t* restrict sc, size_t sps, int sdt, float* restrict c, int first) {
  if (sdt == DT_E8M0) dq4_row16_short(C4_F4, KV_QUAD, DT_E8M0, kc, blk, a, xs, w, ps, sc, sps, c, first);
  else dq4_row16_short(C4_F4, KV_QUAD, DT_F8_E4M3, kc, blk, a, xs, w, ps, sc, sps, c, first);
}

void s16_dq_1x16w4(size_t nc1, size_t nc2, size_t kc, size_t blk, const int16_t* restrict a, const int32_t* restrict xs,
                   const uint8_t* restrict w, size_t ps, const float* restrict sc, size_t sps, void* restrict c, int acc, int first,
                   int dt) {
  /* f4_e2m1 with staged f32 scales (read apart from the panels) keeps the per-block folds: the batched ones cost it
     6-9% (decode mxfp4:dq / nvfp4:dq, Node 20); its 1-byte scales beside the panels take s16_dq_1x16f4. */
  if (sc && blk && blk <= 64 && dt != DT_F4_E2M1) {
    if (dt == DT_S4) dq4_row16_short(C4_S4, KV_QUAD, DT_F32, kc, blk, a, xs, w, ps, sc, sps, (float*)c, first);
    else dq4_row16_short(C4_U4, KV_QUAD, DT_F32, kc, blk, a, xs, w, ps, sc, sps, (float*)c, first);
    return;
  }
  if (dt == DT_S4) dq4_row16(C4_S4, KV_QUAD, nc1, nc2, kc, blk ? blk : kc, a, xs, w, ps, sc, sps, c, acc, first);
  else if (dt == DT_F4_E2M1) dq4_row16(C4_F4, KV_QUAD, nc1, nc2, kc, blk ? blk : kc, a, xs, w, ps, sc, sps, c, acc, first);
  else dq4_row16(C4_U4, KV_QUAD, nc1, nc2, kc, blk ? blk : kc, a, xs, w, ps, sc, sps, c, acc, first);
}

#ifdef RELAXED
/* s16_dq_1x16w4 on relaxed SIMD's i16x8 dot (KV_RD16), u4 / s4 codes: a the row expanded by s8_rd16_row, xs its sums
   per block; the same arguments and bitwise the same results otherwise. */
void s8_dq_1x16w4r(size_t nc1, size_t nc2, size_t kc, size_t blk, const int16_t* restrict a, const int32_t* restrict xs,
                   const uint8_t* restrict w, size_t ps, const float* restrict sc, size_t sps, void* restrict c, int acc, int first,
                   int dt) {
  if (sc && blk && blk <= 64 && dt != DT_F4_E2M1) { /* (f4_e2m1 with staged scales: per-block folds, as s16_dq_1x16w4) */
    if (dt == DT_S4) dq4_row16_short(C4_S4, KV_RD16, DT_F32, kc, blk, a, xs, w, ps, sc, sps, (float*)c, first);
    else dq4_row16_short(C4_U4, KV_RD16, DT_F32, kc, blk, a, xs, w, ps, sc, sps, (float*)c, first);
    return;
  }
  if (dt == DT_S4) dq4_row16(C4_S4, KV_RD16, nc1, nc2, kc, blk ? blk : kc, a, xs, w, ps, sc, sps, c, acc, first);
  else if (dt == DT_F4_E2M1) dq4_row16(C4_F4, KV_RD16, nc1, nc2, kc, blk ? blk : kc, a, xs, w, ps, sc, sps, c, acc, first);
  else dq4_row16(C4_U4, KV_RD16, nc1, nc2, kc, blk ? blk : kc, a, xs, w, ps, sc, sps, c, acc, first);
}

/* s16_dq_1x16f4 on the relaxed i16x8 dot: a expanded by s8_rd16_row. */
void s8_dq_1x16f4r(size_t kc, size_t blk, const int16_t* restrict a, const int32_t* restrict xs, const uint8_t* restrict w, size_t ps,
                   const uint8_t* restrict sc, size_t sps, int sdt, float* restrict c, int first) {
  if (sdt == DT_E8M0) dq4_row16_short(C4_F4, KV_RD16, DT_E8M0, kc, blk, a, xs, w, ps, sc, sps, c, first);
  else dq4_row16_short(C4_F4, KV_RD16, DT_F8_E4M3, kc, blk, a, xs, w, ps, sc, sps, c, first);
}

/* Whether i16x8.relaxed_dot_i8x16_i7x16_s sums exactly here (i7 second operand: it must on every lowering), probed
   once on 70 k of s4 codes against scalar sums (as rdot_ok does for the i32x4 dot). The engine allows it only where
   relaxed SIMD is native (Node 22+, browsers; set_relaxed_dot bit 2). */
static volatile int32_t rd16_state; /* 0 unknown, 1 exact, 2 not used */
void rd16_allow(int32_t allowed) { rd16_state = allowed ? 0 : 2; }
int32_t rd16_ok(void) {
  if (rd16_state == 0) {
    enum { PK = 70 }; /* 16 k chunks, one more step and a last k-pair */
    static int16_t a3[3 * PK];
    static int16_t ax[16 * (PK / 4 + 1)];
    static uint8_t w[2 * 4 * PK];
    static int32_t c[2 * NR];
    int32_t xs[2];
    for (int k = 0; k < PK; k++) a3[3 * (k & ~1) + (k & 1)] = (int16_t)((k * 97 + 13) % 256 - 128);
    for (int i = 0; i < 2 * 4 * PK; i++) w[i] = (uint8_t)((i * 59 + 7) & 255);
    s8_rd16_row(a3, (int8_t*)ax, PK, 0, xs);
    s8_dq_1x16w4r(NR, NR, PK, 0, ax, xs, w, 4 * PK, 0, 0, c, 0, 1, DT_S4);
    int ok = 1;
    for (int q = 0; q < 2 * NR; q++) {
      int32_t want = 0;
      for (int k = 0; k < PK; k++) {
        const int nib = (w[(q / NR) * 4 * PK + (k >> 1) * NR + q % NR] >> (4 * (k & 1))) & 15;
        want += a3[3 * (k & ~1) + (k & 1)] * (nib >= 8 ? nib - 16 : nib);
      }
      ok = ok && c[q] == want;
    }
    rd16_state = ok ? 1 : 2;
  }
  return rd16_state == 1;
}
#else
void s8_dq_1x16w4r(size_t nc1, size_t nc2, size_t kc, size_t blk, const int16_t* restrict a, const int32_t* restrict xs,
                   const uint8_t* restrict w, size_t ps, const float* restrict sc, size_t sps, void* restrict c, int acc, int first,
                   int dt) {
  /* never called (rd16_ok() is 0 in this build); a call would read s8_rd16_row's layout as the quad one: trap, not
     wrong sums */
  (void)nc1, (void)nc2, (void)kc, (void)blk, (void)a, (void)xs, (void)w, (void)ps, (void)sc, (void)sps, (void)c, (void)acc, (void)first, (void)dt;
  __builtin_trap();
}
void s8_dq_1x16f4r(size_t kc, size_t blk, const int16_t* restrict a, const int32_t* restrict xs, const uint8_t* restrict w, size_t ps,
                   const uint8_t* restrict sc, size_t sps, int sdt, float* restrict c, int first) {
  (void)kc, (void)blk, (void)a, (void)xs, (void)w, (void)ps, (void)sc, (void)sps, (void)sdt, (void)c, (void)first;
  __builtin_trap(); /* never called: rd16_ok() is 0 */
}
void rd16_allow(int32_t allowed) { (void)allowed; }
int32_t rd16_ok(void) { return 0; }
#endif

EXPORT(relaxed_dot16_ok) int32_t relaxed_dot16_ok(void) { return rd16_ok(); }

/* The row's k values (s8) expanded for s8_dq_1x16w4r / s8_dq_2x8w4r: per 4 k, 32 bytes, [x0 x2] x 8 then [x1 x3] x 8 (a
   missing last k-pair: zeros); sums as s16_quad_row. */
void s8_rd16_row(const int16_t* a, int8_t* out, size_t kcp, size_t blk, int32_t* sums) { s16_quad_row_x(a, (int16_t*)out, kcp, blk, sums, 0); }

/* The int32 sums of 2 rows x one x4 panel over kc k (even): v0 / v1 (row 0, columns 0-3 / 4-7), v2 / v3 (row 1), bias
   not removed. The panel's bytes are rearranged once for both rows; a0 / a1 the rows' layouts (quad, or rd16_row's). */
INLINE void dq4_rows2_sums(const int CK, const int KV, size_t kc, const int16_t* restrict a0, const int16_t* restrict a1,
                           const uint8_t* restrict w, v128_t* s0, v128_t* s1, v128_t* s2, v128_t* s3) {
  DQ4_CONSTANTS(CK);
  RD16_IX(KV);
  const v128_t zero = wasm_i32x4_splat(0);
  v128_t v0 = zero, v1 = zero, v2 = zero, v3 = zero;
  if (KV == KV_RD16) {
    /* the relaxed i16x8 dot (RD16_BLOCK's steps, each code vector against both rows: 2 more dots, no more shuffles) */
    RD16_ROWS2(w, kc, v0, v1, v2, v3);
  } else {
#define ROWS2_STEP(LOAD_W)                                                                              \
  do {                                                                                                  \
    v128_t l0, h0, l1, h1;                                                                              \
    CODES4(CK, LOAD_W, l0, h0, l1, h1);                                                                 \
    v128_t xa = LDS(a0, 0), xo = LDS(a0, 4);                                                            \
    v0 = DOT(h0, xo, DOT(l0, xa, v0));                                                                  \
    v1 = DOT(h1, xo, DOT(l1, xa, v1));                                                                  \
    xa = LDS(a1, 0);                                                                                    \
    xo = LDS(a1, 4);                                                                                    \
    v2 = DOT(h0, xo, DOT(l0, xa, v2));                                                                  \
    v3 = DOT(h1, xo, DOT(l1, xa, v3));                                                                  \
    w += 16;                                                                                            \
    a0 += 4;                                                                                            \
    a1 += 4;                                                                                            \
  } while (0)
  for (size_t n = kc / 4; n; n--) ROWS2_STEP(wasm_v128_load(w));
  if (kc & 2) ROWS2_STEP(wasm_v128_load64_zero(w));
#undef ROWS2_STEP
  }
  *s0 = v0;
  *s1 = v1;
  *s2 = v2;
  *s3 = v3;
}

/* 2 rows x one x4 panel, int32 sums (C rows c, c + ldc (+)= sums; nc columns): the decode tiles of experts
   with two rows. xs0 / xs1 the rows' activation sums over kc. */
INLINE void dq4_rows2(const int CK, const int KV, size_t nc, size_t kc, const int16_t* restrict a0, const int16_t* restrict a1,
                      const int32_t* restrict xs0, const int32_t* restrict xs1, const uint8_t* restrict w, int32_t* restrict c,
                      size_t ldc, int acc) {
  const size_t z = (size_t)((uint32_t)kc >> 31);
  v128_t v0, v1, v2, v3;
  dq4_rows2_sums(CK, KV, kc, a0 + z, a1 + z, w + z, &v0, &v1, &v2, &v3);
  const v128_t b0 = dq4_bias(CK, *xs0), b1 = dq4_bias(CK, *xs1);
  v0 = dq4_fix(CK, KV, v0, b0);
  v1 = dq4_fix(CK, KV, v1, b0);
  v2 = dq4_fix(CK, KV, v2, b1);
  v3 = dq4_fix(CK, KV, v3, b1);
  dq_store_rows2(c, ldc, nc, acc, v0, v1, v2, v3);
}

/* Blocks per batch of dq4_rows2_short (their int32 sums for two rows, 8 KB, on the stack). */
#define DQ4_ROWS2_BATCH 128

/* 2 rows x one x4 panel in K blocks of blk k (a multiple of 4; the last may be shorter) with the panel's scales read
   in place: each block's int32 sums for both rows (xs0 / xs1: one activation sum per block), up to DQ4_ROWS2_BATCH
   blocks, then their folds in block order into the f32 rows c and c + ldf (F = p0 when first and the block is the
   first, else F + p_b, p_b = float(sums) x scales): fold_block_ld's arithmetic, so the bits of one call per block.
   One call per panel: the per-block calls and folds outside cost w4k32:dq's 2-row tiles a third of their time.
   SDT: DT_F32, 8 f32 per block at scv; DT_E8M0 / DT_F8_E4M3, 8 bytes per block decoded two blocks at a time, times
   `times` (0.5 for f4_e2m1's 2 v codes), the values lowp_emb_scales gives. */
INLINE void dq4_rows2_short(const int CK, const int KV, const int SDT, size_t kc, size_t blk, const int16_t* restrict a0,
                            const int16_t* restrict a1, const int32_t* restrict xs0, const int32_t* restrict xs1,
                            const uint8_t* restrict w, const void* restrict scv, float times, float* restrict c, size_t ldf,
                            int first) {
  const size_t qk = KV == KV_RD16 ? 4 : 1; /* int16 per k of a row's layout */
  const v128_t zero = wasm_i32x4_splat(0);
  float* restrict c1 = c + ldf;
  v128_t f0 = zero, f1 = zero, f2 = zero, f3 = zero;
  if (!first) {
    f0 = wasm_v128_load(c);
    f1 = wasm_v128_load(c + 4);
    f2 = wasm_v128_load(c1);
    f3 = wasm_v128_load(c1 + 4);
  }
  const float* sc = (const float*)scv;
  const uint8_t* sb = (const uint8_t*)scv;
  const v128_t tv = wasm_f32x4_splat(times);
  int32_t sums[DQ4_ROWS2_BATCH * 2 * NR] __attribute__((aligned(16)));
#define FOLD_ROWS2(B, S0, S1)                                                                                      \
  do {                                                                                                             \
    const int32_t* q_ = sums + 2 * NR * (B);                                                                       \
    const v128_t p0 = wasm_f32x4_mul(wasm_f32x4_convert_i32x4(wasm_v128_load(q_)), (S0));                          \
    const v128_t p1 = wasm_f32x4_mul(wasm_f32x4_convert_i32x4(wasm_v128_load(q_ + 4)), (S1));                      \
    const v128_t p2 = wasm_f32x4_mul(wasm_f32x4_convert_i32x4(wasm_v128_load(q_ + 8)), (S0));                      \
    const v128_t p3 = wasm_f32x4_mul(wasm_f32x4_convert_i32x4(wasm_v128_load(q_ + 12)), (S1));                     \
    DQ16_FOLD4(first && b0 + (B) == 0, p0, p1, p2, p3);                                                            \
  } while (0)
  for (size_t k = 0, b0 = 0; k < kc;) {
    size_t nb = 0;
    for (; nb < DQ4_ROWS2_BATCH && k < kc; nb++, k += blk) {
      const size_t len = kc - k < blk ? kc - k : blk;
      v128_t v0, v1, v2, v3;
      dq4_rows2_sums(CK, KV, len, a0 + qk * k, a1 + qk * k, w + k * (NR / 2), &v0, &v1, &v2, &v3);
      const v128_t bz0 = dq4_bias(CK, xs0[b0 + nb]), bz1 = dq4_bias(CK, xs1[b0 + nb]);
      int32_t* q = sums + 2 * NR * nb;
      wasm_v128_store(q, dq4_fix(CK, KV, v0, bz0));
      wasm_v128_store(q + 4, dq4_fix(CK, KV, v1, bz0));
      wasm_v128_store(q + 8, dq4_fix(CK, KV, v2, bz1));
      wasm_v128_store(q + 12, dq4_fix(CK, KV, v3, bz1));
    }
    FOLD_BATCH(FOLD_ROWS2, nb, tv);
    b0 += nb;
  }
#undef FOLD_ROWS2
  wasm_v128_store(c, f0);
  wasm_v128_store(c + 4, f1);
  wasm_v128_store(c1, f2);
  wasm_v128_store(c1 + 4, f3);
}

/* dq4_rows2_short's entry: x4 / f4_e2m1 codes (dt), scales of type sdt (DT_F32, DT_E8M0, DT_F8_E4M3). */
#define DQ4_ROWS2_SHORT_CALL(KV_)                                                                                           \
  do {                                                                                                                     \
    const int ck_ = dt == DT_S4 ? C4_S4 : dt == DT_F4_E2M1 ? C4_F4 : C4_U4;                                                \
    if (sdt == DT_F32) {                                                                                                   \
      if (ck_ == C4_S4) dq4_rows2_short(C4_S4, KV_, DT_F32, kc, blk, a0, a1, xs0, xs1, w, sc, times, c, ldf, first);     \
      else if (ck_ == C4_F4) dq4_rows2_short(C4_F4, KV_, DT_F32, kc, blk, a0, a1, xs0, xs1, w, sc, times, c, ldf, first); \
      else dq4_rows2_short(C4_U4, KV_, DT_F32, kc, blk, a0, a1, xs0, xs1, w, sc, times, c, ldf, first);                  \
    } else if (sdt == DT_E8M0) {                                                                                           \
      if (ck_ == C4_F4) dq4_rows2_short(C4_F4, KV_, DT_E8M0, kc, blk, a0, a1, xs0, xs1, w, sc, times, c, ldf, first);    \
      else if (ck_ == C4_S4) dq4_rows2_short(C4_S4, KV_, DT_E8M0, kc, blk, a0, a1, xs0, xs1, w, sc, times, c, ldf, first); \
      else dq4_rows2_short(C4_U4, KV_, DT_E8M0, kc, blk, a0, a1, xs0, xs1, w, sc, times, c, ldf, first);                 \
    } else {                                                                                                               \
      if (ck_ == C4_F4) dq4_rows2_short(C4_F4, KV_, DT_F8_E4M3, kc, blk, a0, a1, xs0, xs1, w, sc, times, c, ldf, first); \
      else if (ck_ == C4_S4) dq4_rows2_short(C4_S4, KV_, DT_F8_E4M3, kc, blk, a0, a1, xs0, xs1, w, sc, times, c, ldf, first); \
      else dq4_rows2_short(C4_U4, KV_, DT_F8_E4M3, kc, blk, a0, a1, xs0, xs1, w, sc, times, c, ldf, first);              \
    }                                                                                                                      \
  } while (0)

void s16_dq_2x8w4_kb(size_t kc, size_t blk, const int16_t* restrict a0, const int16_t* restrict a1, const int32_t* restrict xs0,
                     const int32_t* restrict xs1, const uint8_t* restrict w, const void* restrict sc, int sdt, float times,
                     float* restrict c, size_t ldf, int first, int dt) {
  DQ4_ROWS2_SHORT_CALL(KV_QUAD);
}

void s16_dq_2x8w4(size_t nc, size_t kc, const int16_t* restrict a0, const int16_t* restrict a1, const int32_t* restrict xs0,
                  const int32_t* restrict xs1, const uint8_t* restrict w, int32_t* restrict c, size_t ldc, int acc, int dt) {
  if (dt == DT_S4) dq4_rows2(C4_S4, KV_QUAD, nc, kc, a0, a1, xs0, xs1, w, c, ldc, acc);
  else if (dt == DT_F4_E2M1) dq4_rows2(C4_F4, KV_QUAD, nc, kc, a0, a1, xs0, xs1, w, c, ldc, acc);
  else dq4_rows2(C4_U4, KV_QUAD, nc, kc, a0, a1, xs0, xs1, w, c, ldc, acc);
}

/* s16_dq_2x8w4_kb on relaxed SIMD's i16x8 dot: a0 / a1 the rows expanded by s8_rd16_row; bitwise the same. */
void s8_dq_2x8w4r_kb(size_t kc, size_t blk, const int16_t* restrict a0, const int16_t* restrict a1, const int32_t* restrict xs0,
                     const int32_t* restrict xs1, const uint8_t* restrict w, const void* restrict sc, int sdt, float times,
                     float* restrict c, size_t ldf, int first, int dt) {
#ifdef RELAXED
  DQ4_ROWS2_SHORT_CALL(KV_RD16);
#else
  (void)kc, (void)blk, (void)a0, (void)a1, (void)xs0, (void)xs1, (void)w, (void)sc, (void)sdt, (void)times, (void)c, (void)ldf, (void)first, (void)dt;
  __builtin_trap(); /* never called: rd16_ok() is 0 */
#endif
}

/* s16_dq_2x8w4 on relaxed SIMD's i16x8 dot (u4 / s4): a0 / a1 the rows expanded by s8_rd16_row; bitwise the same. */
void s8_dq_2x8w4r(size_t nc, size_t kc, const int16_t* restrict a0, const int16_t* restrict a1, const int32_t* restrict xs0,
                  const int32_t* restrict xs1, const uint8_t* restrict w, int32_t* restrict c, size_t ldc, int acc, int dt) {
#ifdef RELAXED
  if (dt == DT_S4) dq4_rows2(C4_S4, KV_RD16, nc, kc, a0, a1, xs0, xs1, w, c, ldc, acc);
  else if (dt == DT_F4_E2M1) dq4_rows2(C4_F4, KV_RD16, nc, kc, a0, a1, xs0, xs1, w, c, ldc, acc);
  else dq4_rows2(C4_U4, KV_RD16, nc, kc, a0, a1, xs0, xs1, w, c, ldc, acc);
#else
  (void)nc, (void)kc, (void)a0, (void)a1, (void)xs0, (void)xs1, (void)w, (void)c, (void)ldc, (void)acc, (void)dt;
  __builtin_trap(); /* never called: rd16_ok() is 0 */
#endif
}
