/* Packed low-precision weights (issue 12): the layouts `reorder` produces for weights of 8-bit and
   4-bit types behind `tag.any`, and the fused path's loop over them (gemm-fused.c calls
   lowp_segment when a tile's weights are in one of these layouts).

     x8:p8    s8 u8 f8_e4m3 f8_e5m2: per group ceil(N/8) panels of Kp x 8 codes (bytes), k-major, the
              8 codes of k at panel + 8k; Kp = K rounded up to even, N and K zero padded.
     x4:p8k2  s4 u4 f4_e2m1: per group ceil(N/8) panels of Kp/2 k-pairs x 8 bytes, byte q of pair t =
              code(2t, q) | code(2t + 1, q) << 4; same padding.

   The codes are the stored codes (no conversion): a panel streams 8 (4) bytes per k instead of 32,
   and the microkernels (f32-gemm-4x8w8 / -4x8w4) decode them in registers. Zero points and scales
   are either execute-time arguments (as for plain weights: K-varying ones gathered per panel and K
   block, 8 values each) or, in the `+q` layouts, stored beside the panel they belong to:

     x8:p8+q / x4:p8k2+q  each panel = [codes, zero padded to 16 bytes]
                                       [scales: per K block 8 values in their stored type, padded to 16]
                                       [zero points: likewise]
              one K block when the values do not vary along K; padded columns hold scale 1, zero point 0.

   Embedded values are decoded 8 at a time with SIMD (the values load_any gives, so results do not
   change); a per-column scale still waits for the tile epilogue. */
#include "common.h"
#include "job.h"
#include "ukernel.h"
#include "driver.h"
#include "lowp.h"
#include "tile_io.h"
#include "byte_tables.h"
#include "lowp_gemm.h"

INLINE size_t pad16(size_t x) { return (x + 15) & ~(size_t)15; }

/* Bytes of one K block's 8 values and of a panel's section of them. */
INLINE size_t emb_block_bytes(const qarg_t* q) { return (size_t)NR * (size_t)dt_bits(q->dt) / 8; }
INLINE size_t emb_section(const qarg_t* q, int32_t Kfull) {
  return q->emb ? pad16((size_t)(q->st_k ? cdiv(Kfull, q->blk_k) : 1) * emb_block_bytes(q)) : 0;
}

void lowp_view_geom(const job_t* j, group_view_t* v) {
  const qarg_t *qs = &j->q[Q_WEI_SCALE], *qz = &j->q[Q_WEI_ZP];
  const size_t codes = lowp_panel_bytes(v->wfmt, v->Kfull);
  if (!qs->emb && !qz->emb) { /* x8:p8 / x4:p8k2 as before: codes only, unpadded */
    v->wps = codes;
    v->wso = v->wzo = 0;
    return;
  }
  v->wso = (uint32_t)pad16(codes);
  v->wzo = v->wso + (uint32_t)emb_section(qs, v->Kfull);
  v->wps = v->wzo + emb_section(qz, v->Kfull);
}

/* Element index of weight (k, n) in its panel, as load_any / load_int count them (4-bit: nibbles). */
INLINE size_t lowp_elem(const group_view_t* v, int32_t k, int32_t n) {
  if (v->wfmt == WEI_X8_P8 || v->wfmt == WEI_X16_P8) return (size_t)k * NR + n % NR; /* x16: 16-bit elements */
  return 2 * ((size_t)(k >> 1) * NR + n % NR) + (size_t)(k & 1);
}

INLINE const uint8_t* lowp_panel(const group_view_t* v, int32_t n) {
  return (const uint8_t*)v->wpacked + (size_t)(n / NR) * v->wps;
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

/* 8 embedded scales (one panel, one K block) as f32: the values load_any gives. */
INLINE void emb_scales8(float* out, const uint8_t* p, int dt) {
  v128_t lo, hi;
  if (dt == DT_E8M0) {
    sbuf_e8m0(out, p);
    return;
  }
  if (dt == DT_F32) {
    lo = wasm_v128_load(p);
    hi = wasm_v128_load(p + 16);
  } else if (dt == DT_BF16 || dt == DT_F16) {
    const v128_t h = wasm_v128_load(p);
    lo = wasm_u32x4_extend_low_u16x8(h);
    hi = wasm_u32x4_extend_high_u16x8(h);
    if (dt == DT_BF16) {
      lo = wasm_i32x4_shl(lo, 16);
      hi = wasm_i32x4_shl(hi, 16);
    } else {
      lo = f16x4_to_f32(lo);
      hi = f16x4_to_f32(hi);
    }
  } else { /* DT_F8_E4M3 (NVFP4's block scales) */
    fp8_half(e4m3_planes(wasm_v128_load64_zero(p)), 0, &lo, &hi);
  }
  wasm_v128_store(out, lo);
  wasm_v128_store(out + 4, hi);
}

/* 8 embedded zero points (s8 u8 s4 u4 s32) as f32: (float)load_int. */
INLINE void emb_zps8(float* out, const uint8_t* p, int dt) {
  v128_t lo, hi;
  if (dt == DT_S32) {
    lo = wasm_v128_load(p);
    hi = wasm_v128_load(p + 16);
  } else {
    v128_t h;
    if (dt == DT_S8 || dt == DT_U8) {
      const v128_t b = wasm_v128_load64_zero(p);
      h = dt == DT_S8 ? wasm_i16x8_extend_low_i8x16(b) : wasm_u16x8_extend_low_u8x16(b);
    } else { /* 4 bytes, element i the low (even i) or high nibble of byte i / 2 */
      const v128_t b = wasm_v128_load32_zero(p);
      v128_t n = wasm_i8x16_shuffle(wasm_v128_and(b, wasm_i8x16_splat(0x0f)), wasm_u8x16_shr(b, 4), 0, 16, 1, 17, 2, 18, 3, 19, 0, 0, 0, 0, 0, 0, 0, 0);
      if (dt == DT_S4) n = wasm_i8x16_sub(wasm_v128_xor(n, wasm_i8x16_splat(8)), wasm_i8x16_splat(8));
      h = dt == DT_S4 ? wasm_i16x8_extend_low_i8x16(n) : wasm_u16x8_extend_low_u8x16(n);
    }
    lo = wasm_i32x4_extend_low_i16x8(h);
    hi = wasm_i32x4_extend_high_i16x8(h);
  }
  wasm_v128_store(out, wasm_f32x4_convert_i32x4(lo));
  wasm_v128_store(out + 4, wasm_f32x4_convert_i32x4(hi));
}

/* The integer path's staging (gemm-fused.c, dynamic int8 activations): nblk consecutive K blocks of one panel's
   embedded scales (8 per block from p) as f32 times `times` (0.5 for f4_e2m1 weights, whose sums are of 2 v; a
   power of two: exact), the values load_any gives. 1-byte types (MXFP4's e8m0, NVFP4's f8_e4m3) two blocks (16
   bytes) at a time: out must have room for nblk rounded up to even.
   (byte_tables.h scales16_b1.) */
void lowp_emb_scales(float* out, const uint8_t* p, int dt, int32_t nblk, float times) {
  const v128_t t = wasm_f32x4_splat(times);
  if (dt == DT_E8M0 || dt == DT_F8_E4M3) {
    for (int32_t b = 0; b < nblk; b += 2, p += 16, out += 16) {
      /* a last odd block: its 8 bytes twice (no read past the section: a panel may end the heap) */
      const v128_t c = b + 1 < nblk ? wasm_v128_load(p) : wasm_v128_load64_splat(p);
      v128_t w[4];
      scales16_b1(c, dt, t, w);
      for (int q = 0; q < 4; q++) wasm_v128_store(out + 4 * q, w[q]);
    }
    return;
  }
  const size_t bb = emb_block_bytes(&(qarg_t){ .dt = dt });
  for (int32_t b = 0; b < nblk; b++, p += bb, out += NR) {
    emb_scales8(out, p, dt);
    wasm_v128_store(out, wasm_f32x4_mul(wasm_v128_load(out), t));
    wasm_v128_store(out + 4, wasm_f32x4_mul(wasm_v128_load(out + 4), t));
  }
}

/* Pieces of at most LOWP_PIECE k: a tall tile's f32 block of one piece stays in L1. */
#define LOWP_PIECE 256

/* One K block's scales for a call's np panels (columns nb ..): in place (contiguous f32), or decoded
   into sbuf (16 floats): embedded ones 8 per panel with SIMD, runtime ones by a gather. */
static const float* stage_scales(const qarg_t* qs, const group_view_t* v, const void* sb, int32_t kabs, const uint8_t* panel,
                                 size_t pbytes, int32_t nb, int32_t np, int32_t ncp, float* sbuf) {
  if (qs->emb) {
    const uint8_t* s0 = panel + v->wso + (size_t)(kabs / qs->blk_k) * emb_block_bytes(qs);
    if (qs->dt == DT_F32 && np == 1) return (const float*)s0;
    for (int32_t q = 0; q < np; q++) emb_scales8(sbuf + NR * q, s0 + (size_t)q * pbytes, qs->dt);
    return sbuf;
  }
  const size_t i0 = qindex(qs, v->g, kabs, nb);
  if (qs->blk_n == 1 && qs->st_n == 1 && ncp == NR * np && (qs->dt == DT_F32 || qs->dt == DT_E8M0)) {
    /* contiguous per-column scales of the whole call: read in place (f32), or 8 e8m0 at a time */
    if (qs->dt == DT_F32) return (const float*)sb + i0;
    for (int32_t q = 0; q < NR * np; q += 8) sbuf_e8m0(sbuf + q, (const uint8_t*)sb + i0 + q);
    return sbuf;
  }
  for (int32_t q = 0; q < NR * np; q++)
    sbuf[q] = q >= ncp ? 1.0f : load_any(sb, qs->dt, qs->blk_n == 1 ? i0 + (size_t)q * (size_t)qs->st_n : qindex(qs, v->g, kabs, nb + q));
  return sbuf;
}

/* accumulation_mode relaxed: pieces of at most this many k (multiples of the K block) per relaxed call; the
   rows' activations of a piece are laid out once (relaxed_xdup) on the stack, 2 rows x 2 floats per k (32 KB;
   kernel stacks are 256 KB). A whole A block (2048 k) per piece: each panel is then read start to end in one
   call; with 1024 the pieces walked every panel's first half, then every second half (session 11, Node 24,
   w4:relaxed x f32 packed: 2.35-2.66 before the session, 2.34-2.39 with its kernels and 1024, 2.93-2.96 with 2048). */
#define RELAXED_PIECE 2048
/* Whole K blocks per relaxed call at most (their scales staged on the stack). */
#define RELAXED_BLOCKS 128

/* The strict 1-row kernels over [kk, kk + len) of one or two panels (ps = 0: one). */
INLINE void strict_row(const group_view_t* v, int np, int32_t ncp, int32_t kk, int32_t len, const float* a, const uint8_t* panel,
                       float* c, int acc, const float* sq) {
  const int x8 = v->wfmt == WEI_X8_P8, dt = v->B.dt;
  if (np == 2) {
    if (x8) f32_gemm_1x16w8(NR, (size_t)(ncp - NR), (size_t)kk, (size_t)len, a, panel + (size_t)kk * NR, v->wps, c, acc, dt, 0, sq);
    else f32_gemm_1x16w4(NR, (size_t)(ncp - NR), (size_t)kk, (size_t)len, a, panel, v->wps, c, acc, dt, 0, sq);
  } else if (x8) {
    f32_gemm_2x8w8(1, (size_t)ncp, (size_t)kk, (size_t)len, a, panel + (size_t)kk * NR, c, 0, acc, dt, 0, sq);
  } else {
    f32_gemm_2x8w4(1, (size_t)ncp, (size_t)kk, (size_t)len, a, panel, c, 0, acc, dt, 0, sq);
  }
}

/* Whether a row's activations suit the relaxed kernels: finite and at most 2^64 in magnitude. The relaxed sums
   carry the codes' bias (corrected by bias x Σx per block: Inf - Inf for an infinite x) and codes scaled by up to
   2^24 (a huge x overflows a partial sum); such a row runs the strict kernels instead (a fuzzer found both). */
static int relaxed_row_ok(const float* a, int32_t len) {
  for (int32_t k = 0; k < len; k++)
    if (!(__builtin_fabsf(a[(size_t)k * MR]) <= 0x1p64f)) return 0;
  return 1;
}

/* accumulation_mode relaxed (rfcs/0007): a 1-2 row tile x its panels (two per call) over the A block's
   [k0, k0 + kc), s8 / u8 / s4 / u4 / f4_e2m1 codes, no zero points. The K range is cut the same way for every panel and
   row (so the order depends on the geometry only): whole K blocks of scales, at most RELAXED_PIECE k and
   RELAXED_BLOCKS blocks at a time (per-column scales: pieces in multiples of 4 k from an even k), run the
   reordered f32_gemm_1x16r* kernels on the rows laid out once per piece; the k before the first whole block,
   blocks longer than a piece and the last < 4 k run the strict kernels, adding into the same C. */
static void relaxed_segment(const job_t* j, const group_view_t* v, const void* sb, int32_t sn, int32_t sw, const float* a, int32_t k0,
                            int32_t kc, float* c, int32_t ldc, int first, int32_t mc, float* sbuf) {
  const qarg_t* qs = &j->q[Q_WEI_SCALE];
  const int x8 = v->wfmt == WEI_X8_P8, dt = v->B.dt;
  const int32_t npan = cdiv(sw, NR);
  float xd[2][2 * RELAXED_PIECE], xs[2][RELAXED_PIECE / 4];
  float sall[16 * RELAXED_BLOCKS];
  float sums[2 * 16 * RELAXED_BLOCKS]; /* the 1-2 rows' block sums of one panel (f32_gemm_r_sums) */
  for (int32_t y = 0; y < kc;) {
    const int32_t kk = k0 + y, kabs = v->k0 + kk, acc = !first || y > 0;
    int32_t len = kc - y, blk = 0, nblk = 0, rel = 0;
    if (sb) {
      blk = qs->blk_k;
      const int32_t off = kabs % blk;
      if (off == 0 && len >= blk && blk <= RELAXED_PIECE) { /* whole blocks */
        nblk = MIN(MIN(len / blk, RELAXED_BLOCKS), RELAXED_PIECE / blk);
        len = nblk * blk;
        rel = 1;
      } else {
        len = MIN(len, blk - off); /* a partial (or over-long) block: strict */
      }
    } else if (!(kk & 1) && len >= 4) { /* per-column scales (applied by the epilogue): the piece in 4s */
      len = MIN(len & ~3, RELAXED_PIECE);
      rel = 1;
    }
    int ok[2] = { 1, 1 };
    if (rel)
      for (int32_t r = 0; r < mc; r++) {
        ok[r] = relaxed_row_ok(a + r + (size_t)y * MR, len);
        if (ok[r]) relaxed_xdup(a + r + (size_t)y * MR, (size_t)len, (size_t)(blk ? blk : len), !x8, xd[r], xs[r]);
      }
    for (int32_t p = 0, np; p < npan; p += np) {
      np = p + 1 < npan ? 2 : 1;
      const int32_t nb = sn + p * NR, ncp = MIN(NR * np, sw - p * NR);
      const uint8_t* panel = (const uint8_t*)v->wpacked + (size_t)(nb / NR) * v->wps;
      float* cp = c + p * NR;
      if (!rel) {
        const float* sq = sb ? stage_scales(qs, v, sb, kabs, panel, v->wps, nb, np, ncp, sbuf) : 0;
        for (int32_t r = 0; r < mc; r++) strict_row(v, np, ncp, kk, len, a + r + (size_t)y * MR, panel, cp + (size_t)r * ldc, acc, sq);
        continue;
      }
      const size_t ps = np == 2 ? v->wps : 0, nc1 = (size_t)MIN(NR, ncp), nc2 = np == 2 ? (size_t)(ncp - NR) : 0;
      const uint8_t* pw = panel + (x8 ? (size_t)kk * NR : (size_t)(kk >> 1) * NR);
      if (sb && dt != DT_F4_E2M1 && ok[0] && (mc == 1 || ok[1])) {
        /* K-block-scaled s4 / u4 / s8 / u8: one panel at a time, its codes then its scales (+q: right after them)
           in one run, the blocks' sums kept and folded after (the same bits as the two-panel kernels) */
        for (int32_t q = 0; q < np; q++) {
          const uint8_t* pq = panel + (size_t)q * v->wps;
          const int32_t ncq = MIN(NR, ncp - q * NR);
          f32_gemm_r_sums((size_t)mc, (size_t)len, (size_t)blk, xd[0], xd[1], pw + (size_t)q * v->wps, dt, sums);
          const float* sq = sall;
          if (qs->emb && qs->dt == DT_F32) sq = stage_scales(qs, v, sb, kabs, pq, v->wps, nb + q * NR, 1, ncq, sall); /* in place */
          else
            for (int32_t b = 0; b < nblk; b++) {
              float* sd = sall + NR * b;
              const float* s1 = stage_scales(qs, v, sb, kabs + b * blk, pq, v->wps, nb + q * NR, 1, ncq, sd);
              if (s1 != sd) for (int32_t i = 0; i < NR; i++) sd[i] = s1[i];
            }
          f32_gemm_r_fold((size_t)mc, (size_t)ncq, (size_t)nblk, sums, xs[0], xs[1], sq, cp + q * NR, (size_t)ldc, acc, dt);
        }
        continue;
      }
      for (int32_t b = 0; b < nblk; b++) { /* the blocks' scales, 16 per block (1.0 past the columns), decoded in place */
        float* sd = sall + 16 * b;
        const float* s1 = stage_scales(qs, v, sb, kabs + b * blk, panel, v->wps, nb, np, ncp, sd);
        if (s1 != sd) for (int32_t q = 0; q < NR * np; q++) sd[q] = s1[q];
        if (np == 1) for (int32_t q = NR; q < 16; q++) sd[q] = 1.0f;
      }
      if (mc == 2 && ok[0] && ok[1]) { /* both rows from one conversion of the codes */
        f32_gemm_2x16r(nc1, nc2, (size_t)len, (size_t)blk, xd[0], xs[0], xd[1], xs[1], pw, ps, cp, (size_t)ldc, acc, dt, sb ? sall : 0);
        continue;
      }
      for (int32_t r = 0; r < mc; r++) {
        float* cr = cp + (size_t)r * ldc;
        const float* ar = a + r + (size_t)y * MR;
        if (!ok[r]) { /* strict, block by block (the staged scales are the strict kernels' layout) */
          if (!sb) strict_row(v, np, ncp, kk, len, ar, panel, cr, acc, 0);
          for (int32_t b = 0; sb && b < nblk; b++) strict_row(v, np, ncp, kk + b * blk, blk, ar + (size_t)(b * blk) * MR, panel, cr, acc || b > 0, sall + 16 * b);
          continue;
        }
        if (x8) f32_gemm_1x16r8(nc1, nc2, (size_t)len, (size_t)blk, xd[r], xs[r], pw, ps, cr, acc, dt, sb ? sall : 0);
        else f32_gemm_1x16r4(nc1, nc2, (size_t)len, (size_t)blk, xd[r], xs[r], pw, ps, cr, acc, dt, sb ? sall : 0);
      }
    }
    y += len;
  }
}

/* x16:p8 (bf16 / f16 codes; the pds give them no weights zero points or scales): 1-row tiles two panels per
   call, 2-row tiles one, converted in registers; taller tiles convert a piece of the panel once into L1
   (`block`, LOWP_PIECE x 8 floats) and run f32_gemm_4x8 over it (pieces start on even k: the pairs of the
   plain path). */
static void x16_segment(const group_view_t* v, int32_t sn, int32_t sw, const float* a, int32_t lda, int32_t k0, int32_t kc,
                        float* c, int32_t ldc, int first, int32_t mc, float* block) {
  const int dt = v->B.dt;
  const int32_t npan = cdiv(sw, NR);
  for (int32_t p = 0, np; p < npan; p += np) {
    np = mc == 1 && p + 1 < npan ? 2 : 1;
    const int32_t nb = sn + p * NR, ncp = MIN(NR * np, sw - p * NR);
    const uint16_t* pw = (const uint16_t*)((const uint8_t*)v->wpacked + (size_t)(nb / NR) * v->wps) + (size_t)k0 * NR;
    float* cp = c + p * NR;
    if (np == 2) {
      f32_gemm_1x16wx16(NR, (size_t)(ncp - NR), (size_t)k0, (size_t)kc, a, pw, v->wps, cp, !first, dt);
    } else if (mc <= 2) {
      f32_gemm_2x8wx16((size_t)mc, (size_t)ncp, (size_t)k0, (size_t)kc, a, pw, cp, (size_t)ldc, !first, dt);
    } else {
      touch_range(pw, (size_t)kc * NR * 2);
      for (int32_t y = 0, len; y < kc; y += len) {
        len = MIN(kc - y, LOWP_PIECE - (k0 + y) % LOWP_PIECE);
        decode_wx16(pw + (size_t)y * NR, (size_t)len, dt, block);
        for (int32_t i = 0; i < mc; i += MR)
          f32_gemm_4x8((size_t)MIN(MR, mc - i), (size_t)ncp, (size_t)len, a + (size_t)i * lda + (size_t)y * MR, block,
                       cp + (size_t)i * ldc, (size_t)ldc, !first || y > 0, 0);
      }
    }
  }
}

void lowp_segment(const job_t* j, const group_view_t* v, int32_t sn, int32_t sw, const float* a, int32_t lda,
                  int32_t k0, int32_t kc, float* c, int32_t ldc, int first, int32_t mc, float* zbuf, float* sbuf,
                  float* block) {
  if (v->wfmt == WEI_X16_P8) {
    x16_segment(v, sn, sw, a, lda, k0, kc, c, ldc, first, mc, block);
    return;
  }
  const qarg_t* qs = &j->q[Q_WEI_SCALE];
  const qarg_t* qz = &j->q[Q_WEI_ZP];
  /* a per-column scale waits for the epilogue */
  const void* sb = qs->st_k ? (qs->emb ? v->wpacked : qbase(qs, v->g)) : 0;
  const void* zb = qz->emb ? v->wpacked : qbase(qz, v->g);
  const int x8 = v->wfmt == WEI_X8_P8, dt = v->B.dt;
  const size_t pbytes = v->wps;
  const int32_t npan = cdiv(sw, NR);
  /* 1-2 row tiles, K-varying scales in blocks of a multiple of 4 k (zero points constant along K): whole blocks in
     one f32_gemm_1x16w*_kb (1 row x 2 panels, a piece) or f32_gemm_2x8w*_kb call */
  const int kb_ok = mc <= 2 && sb && !(zb && qz->st_k) && qs->blk_k % 4 == 0 && qs->blk_k <= LOWP_PIECE;
  /* embedded f32 scales are read in place by the _kb kernels: 8 per block, a panel's bytes apart */
  const int kb_inplace = qs->emb && qs->dt == DT_F32;
  /* accumulation_mode relaxed: 1-2 row tiles of integer or f4_e2m1 codes without zero points, K blocks of a multiple of 4 */
  const int relaxed = j->accum_mode == ACC_RELAXED && mc <= 2 && !zb && (dt == DT_S8 || dt == DT_U8 || dt == DT_S4 || dt == DT_U4 || dt == DT_F4_E2M1) &&
                      (!sb || qs->blk_k % 4 == 0);
  if (relaxed) {
    relaxed_segment(j, v, sb, sn, sw, a, k0, kc, c, ldc, first, mc, sbuf);
    return;
  }
  for (int32_t p = 0, np; p < npan; p += np) {
    /* 1-row tiles take two panels per call (f32_gemm_1x16w*: twice the independent chains) */
    np = mc == 1 && p + 1 < npan ? 2 : 1;
    const int32_t nb = sn + p * NR, ncp = MIN(NR * np, sw - p * NR);
    const uint8_t* panel = (const uint8_t*)v->wpacked + (size_t)(nb / NR) * pbytes;
    if (mc > TOUCH_MIN_ROWS) { /* read-ahead of this piece (tile_io.h); 1-2 rows (decode) take none: the
                                  hardware prefetcher streams the panels, and a pass over the next panels
                                  stalled on their misses (decode w4 / w8 1.15x / 1.3x faster without) */
      /* the piece's bytes exactly (4-bit: the k-pairs holding k0 .. k0 + kc - 1): a panel at the end of
         the heap must not be read past (an over-read of one pair trapped at MoE-B shapes) */
      const size_t b0 = x8 ? (size_t)k0 * NR : (size_t)(k0 >> 1) * NR;
      const size_t nbytes = x8 ? (size_t)kc * NR : (size_t)(((k0 + kc - 1) >> 1) - (k0 >> 1) + 1) * NR;
      touch_range(panel + b0, nbytes);
    }
    int32_t next = 0; /* where the zero points / scales change */
    int32_t yp = -1;  /* tall tiles: first k (block relative) of the piece decoded into `block` so far */
    const float *zq = 0, *sq = 0;
    int stale = 0; /* whether sq is still to be staged for this K block */
    for (int32_t y = 0; y < kc;) {
      const int32_t kk = k0 + y, kabs = v->k0 + kk;
      if (y == next) { /* a new K block of zero points and scales */
        int32_t len = kc - y;
        if (sb) len = MIN(len, qs->blk_k - kabs % qs->blk_k);
        if (zb && qz->st_k) len = MIN(len, qz->blk_k - kabs % qz->blk_k);
        next = y + len;
        /* this block's values for the call's columns (one index per block; per-column steps after) */
        if (zb && qz->emb) { /* beside the panel(s): 8 per panel, SIMD */
          const uint8_t* z0 = panel + v->wzo + (qz->st_k ? (size_t)(kabs / qz->blk_k) : 0) * emb_block_bytes(qz);
          for (int32_t q = 0; q < np; q++) emb_zps8(zbuf + NR * q, z0 + (size_t)q * pbytes, qz->dt);
          zq = zbuf;
        } else if (zb) {
          const size_t i0 = qindex(qz, v->g, kabs, nb);
          for (int32_t q = 0; q < NR * np; q++)
            zbuf[q] = q >= ncp ? 0.0f : (float)load_int(zb, qz->dt, qz->blk_n == 1 ? i0 + (size_t)q * (size_t)qz->st_n : qindex(qz, v->g, kabs, nb + q));
          zq = zbuf;
        }
        stale = sb != 0; /* staged below unless the _kb kernels take the blocks */
      }
      if (kb_ok && !(kk & 1) && kabs % qs->blk_k == 0) { /* whole K blocks in one call */
        const int32_t blk = qs->blk_k;
        /* 1 row x 2 panels: a piece; 1-2 rows x 1 panel (decode in registers): every whole block (staged: what sall holds) */
        const int32_t plen = np == 2 ? MIN(kc - y, LOWP_PIECE - kk % LOWP_PIECE)
                                     : (kb_inplace ? kc - y : MIN(kc - y, blk * (16 * (LOWP_PIECE / 4) / NR))) / blk * blk;
        const int32_t nblk = plen / blk, sst = kb_inplace ? NR : NR * np;
        if (plen % blk == 0 && nblk > 1) {
          float sall[16 * (LOWP_PIECE / 4)];
          const float* sk = sall;
          if (kb_inplace) sk = (const float*)(panel + v->wso + (size_t)(kabs / blk) * emb_block_bytes(qs));
          else
            for (int32_t b = 0; b < nblk; b++) {
              float* sd = sall + sst * b;
              const float* s1 = stage_scales(qs, v, sb, kabs + b * blk, panel, pbytes, nb, np, ncp, sd);
              if (s1 != sd) for (int32_t q = 0; q < sst; q++) sd[q] = s1[q];
            }
          float* cp = c + p * NR;
          const float* ay = a + (size_t)y * MR;
          const size_t sps = kb_inplace ? pbytes / 4 : NR;
          const uint8_t* pk = panel + (size_t)kk * NR; /* x8: the piece's first codes */
          if (np == 2 && x8) f32_gemm_1x16w8_kb(NR, (size_t)(ncp - NR), (size_t)plen, (size_t)blk, ay, pk, pbytes, cp, !first || y > 0, dt, zq, sk, sps, (size_t)sst);
          else if (np == 2) f32_gemm_1x16w4_kb(NR, (size_t)(ncp - NR), (size_t)kk, (size_t)plen, (size_t)blk, ay, panel, pbytes, cp, !first || y > 0, dt, zq, sk, sps, (size_t)sst);
          else if (x8) f32_gemm_2x8w8_kb((size_t)mc, (size_t)ncp, (size_t)plen, (size_t)blk, ay, pk, cp, (size_t)ldc, !first || y > 0, dt, zq, sk, (size_t)sst);
          else f32_gemm_2x8w4_kb((size_t)mc, (size_t)ncp, (size_t)kk, (size_t)plen, (size_t)blk, ay, panel, cp, (size_t)ldc, !first || y > 0, dt, zq, sk, (size_t)sst);
          y += plen;
          next = y;
          continue;
        }
      }
      if (stale) sq = stage_scales(qs, v, sb, kabs, panel, pbytes, nb, np, ncp, sbuf);
      stale = 0;
      /* tall tiles: pieces of LOWP_PIECE k (the f32 block in L1); 1-2 rows decode in registers: the whole K block
         in one call (no C tile load + store per 256 k; the same chains, the same bits) */
      const int32_t len = mc <= 2 ? next - y : MIN(next - y, LOWP_PIECE - kk % LOWP_PIECE);
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
      } else { /* decode the piece once into L1 (one K block of zero points / scales at a time), then
                  f32_gemm_4x8 over every 4 rows and the whole piece: K blocks of 16-32 k no longer cost a
                  GEMM call (C tile load + store) each; the piece starts on an even k, so the pairs of k
                  are those of the plain path */
        if (yp < 0) yp = y;
        if (x8) decode_2x8w8(panel + (size_t)kk * NR, (size_t)len, dt, zq, sq, block + (size_t)(y - yp) * NR);
        else decode_2x8w4(panel, (size_t)kk, (size_t)len, dt, zq, sq, block + (size_t)(y - yp) * NR);
        if (y + len == kc || (kk + len) % LOWP_PIECE == 0) {
          for (int32_t i = 0; i < mc; i += MR)
            f32_gemm_4x8((size_t)MIN(MR, mc - i), (size_t)ncp, (size_t)(y + len - yp), a + (size_t)i * lda + (size_t)yp * MR, block,
                         cp + (size_t)i * ldc, (size_t)ldc, !first || yp > 0, 0);
          yp = -1;
        }
      }
      y += len;
    }
  }
}

/* Tests: n (a multiple of 8) embedded scales (f32 bf16 f16 e8m0 f8_e4m3) or zero points (s8 u8 s4 u4
   s32) of type dt through the SIMD decoders, for exhaustive checks against load_any / load_int. */
EXPORT(check_decode_emb) void check_decode_emb(int32_t dt, int32_t zp, const uint8_t* in, float* out, int32_t n) {
  const size_t step = (size_t)NR * (size_t)dt_bits(dt) / 8;
  for (int32_t i = 0; i < n; i += NR) {
    if (zp) emb_zps8(out + i, in + (size_t)(i / NR) * step, dt);
    else emb_scales8(out + i, in + (size_t)(i / NR) * step, dt);
  }
}
