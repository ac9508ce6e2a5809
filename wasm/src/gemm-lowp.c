/* Packed low-precision weights (issue 12): the layouts `reorder` produces for weights of 8-bit and
   4-bit types behind `tag.any`, and the fused path's loop over them (gemm-fused.c calls
   lowp_segment when a tile's weights are in one of these layouts).

     x8:p8    s8 u8 f8_e4m3 f8_e5m2: per group ceil(N/8) panels of Kp x 8 codes (bytes), k-major, the
              8 codes of k at panel + 8k; Kp = K rounded up to even, N and K zero padded.
     x4:p8k2  s4 u4 f4_e2m1: per group ceil(N/8) panels of Kp/2 k-pairs x 8 bytes, byte q of pair t =
              code(2t, q) | code(2t + 1, q) << 4; same padding.

   The codes are the stored codes (no conversion): a panel streams 8 (4) bytes per k instead of 32,
   and the microkernels (f32-gemm-4x8w8 / -4x8w4) decode them in registers. Zero points and scales
   stay where the user put them (execute-time arguments, as for plain weights): K-varying ones are
   read per panel and K block (8 values each), the per-column scale waits for the tile epilogue. */
#include "common.h"
#include "job.h"
#include "ukernel.h"
#include "driver.h"
#include "lowp.h"
#include "tile_io.h"

INLINE int32_t even(int32_t k) { return (k + 1) & ~1; }

/* Packs 8-bit codes [G, K, N] (any strides, element indices) into x8:p8 panels. */
EXPORT(pack_weights_x8) void pack_weights_x8(const uint8_t* w, int32_t G, int32_t K, int32_t N, int32_t sg, int32_t sk,
                                             int32_t sn, uint8_t* out) {
  const int32_t npan = cdiv(N, NR), Kp = even(K);
  for (int32_t g = 0; g < G; g++)
    for (int32_t p = 0; p < npan; p++)
      for (int32_t k = 0; k < Kp; k++) {
        uint8_t* o = out + (((size_t)g * npan + p) * Kp + k) * NR;
        for (int32_t q = 0; q < NR; q++) {
          const int32_t n = p * NR + q;
          o[q] = n < N && k < K ? w[(size_t)g * sg + (size_t)k * sk + (size_t)n * sn] : 0;
        }
      }
}

/* Packs 4-bit codes [G, K, N] (element indices: element i is nibble i & 1 of byte i / 2) into x4:p8k2. */
EXPORT(pack_weights_x4) void pack_weights_x4(const uint8_t* w, int32_t G, int32_t K, int32_t N, int32_t sg, int32_t sk,
                                             int32_t sn, uint8_t* out) {
  const int32_t npan = cdiv(N, NR), Kp = even(K);
  for (int32_t g = 0; g < G; g++)
    for (int32_t p = 0; p < npan; p++)
      for (int32_t k = 0; k < Kp; k += 2) {
        uint8_t* o = out + (((size_t)g * npan + p) * (Kp / 2) + k / 2) * NR;
        for (int32_t q = 0; q < NR; q++) {
          const int32_t n = p * NR + q;
          const size_t i = (size_t)g * sg + (size_t)k * sk + (size_t)n * sn;
          const uint32_t lo = n < N ? nibble(w, i) : 0, hi = n < N && k + 1 < K ? nibble(w, i + (size_t)sk) : 0;
          o[q] = (uint8_t)(lo | hi << 4);
        }
      }
}

/* Element index of weight (k, n) in its panel, as load_any / load_int count them (4-bit: nibbles). */
INLINE size_t lowp_elem(const group_view_t* v, int32_t k, int32_t n) {
  if (v->wfmt == WEI_X8_P8) return (size_t)k * NR + n % NR;
  return 2 * ((size_t)(k >> 1) * NR + n % NR) + (size_t)(k & 1);
}

INLINE const uint8_t* lowp_panel(const group_view_t* v, int32_t n) {
  return (const uint8_t*)v->wpacked + (size_t)(n / NR) * lowp_panel_bytes(v->wfmt, v->Kfull);
}

float lowp_code_f32(const group_view_t* v, int32_t k, int32_t n) { return load_any(lowp_panel(v, n), v->B.dt, lowp_elem(v, k, n)); }

int32_t lowp_code_int(const group_view_t* v, int32_t k, int32_t n) { return load_int(lowp_panel(v, n), v->B.dt, lowp_elem(v, k, n)); }

INLINE const void* qbase(const qarg_t* q, int32_t g) {
  if (!q->ptr) return 0;
  return q->table ? (const void*)(uintptr_t)((const uint32_t*)(uintptr_t)q->ptr)[g] : (const void*)(uintptr_t)q->ptr;
}

INLINE size_t qindex(const qarg_t* q, int32_t g, int32_t k, int32_t n) {
  size_t i = q->table ? 0 : (size_t)g * (size_t)q->st_g;
  if (q->st_k) i += (size_t)(q->blk_k == 1 ? k : k / q->blk_k) * (size_t)q->st_k;
  if (q->st_n) i += (size_t)(q->blk_n == 1 ? n : n / q->blk_n) * (size_t)q->st_n;
  return i;
}

/* 8 e8m0 scales as f32 (lowp.h e8m0_to_f32: 2^(c - 127), 0x00 = 2^-127, 0xFF = NaN). */
INLINE void sbuf_e8m0(float* out, const uint8_t* in) {
  const v128_t h = wasm_u16x8_extend_low_u8x16(wasm_v128_load64_zero(in));
  for (int half = 0; half < 2; half++) {
    const v128_t c = half ? wasm_u32x4_extend_high_u16x8(h) : wasm_u32x4_extend_low_u16x8(h);
    v128_t r = wasm_i32x4_shl(c, 23);
    r = wasm_v128_bitselect(wasm_i32x4_splat(0x00400000), r, wasm_i32x4_eq(c, wasm_i32x4_splat(0)));
    r = wasm_v128_bitselect(wasm_i32x4_splat(0x7fc00000), r, wasm_i32x4_eq(c, wasm_i32x4_splat(255)));
    wasm_v128_store(out + 4 * half, r);
  }
}

/* Pieces of at most LOWP_PIECE k: a tall tile's f32 block of one piece stays in L1. */
#define LOWP_PIECE 256
#ifndef LOWP_AHEAD
#define LOWP_AHEAD 1
#endif

void lowp_segment(const job_t* j, const group_view_t* v, int32_t sn, int32_t sw, const float* a, int32_t lda,
                  int32_t k0, int32_t kc, float* c, int32_t ldc, int first, int32_t mc, float* zbuf, float* sbuf,
                  float* block) {
  const qarg_t* qs = &j->q[Q_WEI_SCALE];
  const qarg_t* qz = &j->q[Q_WEI_ZP];
  const void* sb = qs->st_k ? qbase(qs, v->g) : 0; /* a per-column scale waits for the epilogue */
  const void* zb = qbase(qz, v->g);
  const int x8 = v->wfmt == WEI_X8_P8, dt = v->B.dt;
  const size_t pbytes = lowp_panel_bytes(v->wfmt, v->Kfull);
  const int32_t npan = cdiv(sw, NR);
  for (int32_t p = 0, np; p < npan; p += np) {
    /* 1-row tiles take two panels per call (f32_gemm_1x16w*: twice the independent chains) */
    np = mc == 1 && p + 1 < npan ? 2 : 1;
    const int32_t nb = sn + p * NR, ncp = MIN(NR * np, sw - p * NR);
    const uint8_t* panel = (const uint8_t*)v->wpacked + (size_t)(nb / NR) * pbytes;
    { /* read-ahead (tile_io.h): this piece, or with 1-2 rows the next panels' while these run */
      /* the piece's bytes exactly (4-bit: the k-pairs holding k0 .. k0 + kc - 1): a panel at the end of
       the heap must not be read past (an over-read of one pair trapped at MoE-B shapes) */
    const size_t b0 = x8 ? (size_t)k0 * NR : (size_t)(k0 >> 1) * NR;
    const size_t nbytes = x8 ? (size_t)kc * NR : (size_t)(((k0 + kc - 1) >> 1) - (k0 >> 1) + 1) * NR;
      if (mc > TOUCH_MIN_ROWS || !LOWP_AHEAD) touch_range(panel + b0, nbytes);
      else {
        if (p == 0) for (int32_t q = 0; q < np; q++) touch_range(panel + (size_t)q * pbytes + b0, nbytes);
        for (int32_t q = np; q < 2 * np && p + q < npan; q++) touch_range(panel + (size_t)q * pbytes + b0, nbytes);
      }
    }
    int32_t next = 0; /* where the zero points / scales change */
    const float *zq = 0, *sq = 0;
    for (int32_t y = 0; y < kc;) {
      const int32_t kk = k0 + y, kabs = v->k0 + kk;
      if (y == next) { /* a new K block of zero points and scales */
        int32_t len = kc - y;
        if (sb) len = MIN(len, qs->blk_k - kabs % qs->blk_k);
        if (zb && qz->st_k) len = MIN(len, qz->blk_k - kabs % qz->blk_k);
        next = y + len;
        /* this block's values for the call's columns (one index per block; per-column steps after) */
        if (zb) {
          const size_t i0 = qindex(qz, v->g, kabs, nb);
          for (int32_t q = 0; q < NR * np; q++)
            zbuf[q] = q >= ncp ? 0.0f : (float)load_int(zb, qz->dt, qz->blk_n == 1 ? i0 + (size_t)q * (size_t)qz->st_n : qindex(qz, v->g, kabs, nb + q));
          zq = zbuf;
        }
        if (sb && qs->blk_n == 1 && qs->st_n == 1 && ncp == NR * np && (qs->dt == DT_F32 || qs->dt == DT_E8M0)) {
          /* contiguous per-column scales of the whole call: read in place (f32), or 8 e8m0 at a time */
          const size_t i0 = qindex(qs, v->g, kabs, nb);
          if (qs->dt == DT_F32) sq = (const float*)sb + i0;
          else {
            for (int32_t q = 0; q < NR * np; q += 8) sbuf_e8m0(sbuf + q, (const uint8_t*)sb + i0 + q);
            sq = sbuf;
          }
        } else if (sb) {
          const size_t i0 = qindex(qs, v->g, kabs, nb);
          for (int32_t q = 0; q < NR * np; q++)
            sbuf[q] = q >= ncp ? 1.0f : load_any(sb, qs->dt, qs->blk_n == 1 ? i0 + (size_t)q * (size_t)qs->st_n : qindex(qs, v->g, kabs, nb + q));
          sq = sbuf;
        }
      }
      const int32_t len = MIN(next - y, LOWP_PIECE - kk % LOWP_PIECE);
      const int acc = !first || y > 0;
      float* cp = c + p * NR;
      if (np == 2) {
        if (x8)
          f32_gemm_1x16w8(NR, (size_t)(ncp - NR), (size_t)kk, (size_t)len, a + (size_t)y * MR, panel + (size_t)kk * NR, pbytes,
                          cp, acc, dt, zq, sq);
        else
          f32_gemm_1x16w4(NR, (size_t)(ncp - NR), (size_t)kk, (size_t)len, a + (size_t)y * MR, panel, pbytes, cp, acc, dt, zq, sq);
      } else if (mc <= 2) { /* decode in registers */
        if (x8)
          f32_gemm_2x8w8((size_t)mc, (size_t)ncp, (size_t)kk, (size_t)len, a + (size_t)y * MR, panel + (size_t)kk * NR, cp,
                         (size_t)ldc, acc, dt, zq, sq);
        else
          f32_gemm_2x8w4((size_t)mc, (size_t)ncp, (size_t)kk, (size_t)len, a + (size_t)y * MR, panel, cp, (size_t)ldc, acc,
                         dt, zq, sq);
      } else { /* decode the piece once into L1, then f32_gemm_4x8 over every 4 rows */
        int32_t y1 = y, n1 = len;
        if (kk & 1) { /* an odd first k is the second of its pair: the in-register kernel takes it alone */
          for (int32_t i = 0; i < mc; i += 2) {
            const float* ai = a + (size_t)(i / MR) * MR * lda + (size_t)(i % MR) + (size_t)y * MR;
            if (x8) f32_gemm_2x8w8((size_t)MIN(2, mc - i), (size_t)ncp, (size_t)kk, 1, ai, panel + (size_t)kk * NR, cp + (size_t)i * ldc, (size_t)ldc, acc, dt, zq, sq);
            else f32_gemm_2x8w4((size_t)MIN(2, mc - i), (size_t)ncp, (size_t)kk, 1, ai, panel, cp + (size_t)i * ldc, (size_t)ldc, acc, dt, zq, sq);
          }
          y1++;
          n1--;
        }
        if (n1 > 0) {
          const int32_t k1 = k0 + y1;
          if (x8) decode_2x8w8(panel + (size_t)k1 * NR, (size_t)n1, dt, zq, sq, block);
          else decode_2x8w4(panel, (size_t)k1, (size_t)n1, dt, zq, sq, block);
          const int acc1 = acc || y1 > y;
          for (int32_t i = 0; i < mc; i += MR)
            f32_gemm_4x8((size_t)MIN(MR, mc - i), (size_t)ncp, (size_t)n1, a + (size_t)i * lda + (size_t)y1 * MR, block,
                         cp + (size_t)i * ldc, (size_t)ldc, acc1, 0);
        }
      }
      y += len;
    }
  }
}
