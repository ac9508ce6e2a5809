/* The fused paths of the driver (rfcs/0002): one tile = K loop on a microkernel into a scratch C tile,
   then one epilogue pass over that tile:

     acc  = sum_k A'[m, k] * B'[k, n]          f32 microkernel (F32_FUSED) or exact int32 (INT)
     x    = acc * s_src[row] * s_wei[n] + bias[n]
     y    = GLU(x) (N -> N/2 columns), then the post-op chain (eltwise / binary / sum)
     dst  = convert(y / s_dst + zp_dst)       round to nearest even, saturating

   What varies along K cannot wait for the epilogue, so it is folded into packing:
   F32_FUSED: A' = (decode(src) - zp_src[row, kblock]) * s_src[row, kblock] when s_src varies along K
              (else the per-row scale waits for the epilogue); B' = (decode(wei) - zp_wei) * s_wei when
              s_wei varies along K. Every data type is decoded here (lowp.h).
   INT:       A' = src - zp_src[row] in int16 (or raw src, with the zero point applied in the epilogue
              as a compensation when it does not fit int16); B' = raw weights: plain ones packed per
              tile into int16 panels, packed ones (x8:p8 / x4:p8k2 codes) read in place and widened
              in registers; the weights zero point is a compensation with the row sums of A':
              acc - zp_wei[n] * sum_k A'[m, k].
   Every epilogue step is O(MB x NB) per tile, against O(MB x NB x K) for the GEMM. */
#include "common.h"
#include "job.h"
#include "ukernel.h"
#include "driver.h"
#include "lowp.h"
#include "vmath.h"
#include "tile_io.h"
#include "dglu.h"
#include "glu.h"

/* ---------------------------------------------------------------------------------------------- */
/* Scales, zero points and binary inputs */

INLINE const void* q_base(const qarg_t* q, int32_t g) {
  if (!q->ptr) return 0;
  return q->table ? (const void*)(uintptr_t)((const uint32_t*)(uintptr_t)q->ptr)[g] : (const void*)(uintptr_t)q->ptr;
}

INLINE size_t q_index(const qarg_t* q, int32_t g, int32_t row, int32_t k, int32_t n) {
  size_t i = (q->table ? 0 : (size_t)g * (size_t)q->st_g) + (size_t)row * (size_t)q->st_r;
  if (q->st_k) i += (size_t)(q->blk_k == 1 ? k : k / q->blk_k) * (size_t)q->st_k;
  if (q->st_n) i += (size_t)(q->blk_n == 1 ? n : n / q->blk_n) * (size_t)q->st_n;
  return i;
}

INLINE float q_float(const qarg_t* q, const void* base, int32_t g, int32_t row, int32_t k, int32_t n) {
  return load_any(base, q->dt, q_index(q, g, row, k, n));
}

INLINE int32_t q_int(const qarg_t* q, const void* base, int32_t g, int32_t row, int32_t k, int32_t n) {
  return load_int(base, q->dt, q_index(q, g, row, k, n));
}

/* src1 of a binary post-op (element type in o->alg); the group's base and the element index of (g, row, n). */
INLINE const void* po_base(const post_op_t* o, int32_t g) {
  return o->table ? (const void*)(uintptr_t)((const uint32_t*)(uintptr_t)o->ptr)[g] : (const void*)(uintptr_t)o->ptr;
}

INLINE size_t po_index(const post_op_t* o, int32_t g, int32_t row, int32_t n) {
  return (o->table ? 0 : (size_t)g * (size_t)o->st_g) + (size_t)row * (size_t)o->st_r + (size_t)n * (size_t)o->st_n;
}

/* ---------------------------------------------------------------------------------------------- */
/* Decoding runs of elements (the type switch hoisted out of the loop) */

static void decode_f32(float* out, const char* base, int dt, size_t i0, int32_t stride, int32_t n) {
  if (stride == 1 && (dt == DT_F32 || dt == DT_BF16)) { /* vector loops for short runs (memory.copy is a call in V8) */
    int32_t x = 0;
    if (dt == DT_F32) {
      const float* p = (const float*)base + i0;
      if (n >= 64) { /* A rows: memory.copy (V8 calls an optimized memmove) */
        __builtin_memcpy(out, p, (size_t)n * 4);
        return;
      }
      for (; x + 4 <= n; x += 4) wasm_v128_store(out + x, wasm_v128_load(p + x));
      for (; x < n; x++) out[x] = p[x];
    } else {
      const uint16_t* p = (const uint16_t*)base + i0;
      for (; x + 4 <= n; x += 4) wasm_v128_store(out + x, wasm_u32x4_load16x4(p + x) << 16);
      for (; x < n; x++) out[x] = bf16_to_f32(p[x]);
    }
    return;
  }
#define RUN(expr) for (int32_t x = 0; x < n; x++) { const size_t i = i0 + (size_t)x * (size_t)stride; out[x] = (expr); } break
  switch (dt) {
    case DT_F32: RUN(((const float*)base)[i]);
    case DT_BF16: RUN(bf16_to_f32(((const uint16_t*)base)[i]));
    case DT_F16: RUN(f16_to_f32(((const uint16_t*)base)[i]));
    case DT_S8: RUN((float)((const int8_t*)base)[i]);
    case DT_U8: RUN((float)((const uint8_t*)base)[i]);
    case DT_F8_E4M3: RUN(f8e4m3_to_f32(((const uint8_t*)base)[i]));
    case DT_F8_E5M2: RUN(f8e5m2_to_f32(((const uint8_t*)base)[i]));
    default: RUN(load_any(base, dt, i));
  }
#undef RUN
}

static void decode_i16(int16_t* out, const char* base, int dt, size_t i0, int32_t stride, int32_t n, int32_t zp) {
  int32_t x = 0;
  if (stride == 1 && (dt == DT_S8 || dt == DT_U8)) {
    const v128_t z = wasm_i16x8_splat((int16_t)zp);
    const char* p = base + i0;
    for (; x + 8 <= n; x += 8) {
      const v128_t b = wasm_v128_load64_zero(p + x);
      const v128_t w = dt == DT_S8 ? wasm_i16x8_extend_low_i8x16(b) : wasm_u16x8_extend_low_u8x16(b);
      wasm_v128_store(out + x, wasm_i16x8_sub(w, z));
    }
  }
  for (; x < n; x++) out[x] = (int16_t)(load_int(base, dt, i0 + (size_t)x * (size_t)stride) - zp);
}

/* ---------------------------------------------------------------------------------------------- */
/* The tile: dst columns [n0, n0 + nc) and the GEMM columns they need, as 1 or 2 segments */

typedef struct tile {
  int32_t m0, mc, n0, nc;
  int nseg;
  int32_t seg_n[2], seg_w[2], seg_c[2]; /* first GEMM column, width, first C column */
  int32_t ncc;                          /* C columns in use, panel padding included */
  int32_t ldc;
} tile_t;

INLINE int32_t round8(int32_t x) { return (x + 7) & ~7; }

static void tile_setup(const job_t* j, const group_view_t* v, tile_t* t, int32_t m0, int32_t mc, int32_t n0, int32_t nc) {
  t->m0 = m0;
  t->mc = mc;
  t->n0 = n0;
  t->nc = nc;
  t->ldc = scratch_nbc(j);
  t->nseg = 1;
  if (!j->glu_alg) {
    t->seg_n[0] = n0;
    t->seg_w[0] = nc;
  } else if (j->glu_layout == GLU_HALVES) {
    t->nseg = 2;
    t->seg_n[0] = n0;
    t->seg_n[1] = v->N / 2 + n0;
    t->seg_w[0] = t->seg_w[1] = nc;
  } else { /* interleaved; blocks32 (n0 is a multiple of 32: the tile starts on a 64-column block) */
    t->seg_n[0] = 2 * n0;
    t->seg_w[0] = 2 * nc;
  }
  t->seg_c[0] = 0;
  t->seg_c[1] = round8(t->seg_w[0]);
  t->ncc = t->seg_c[t->nseg - 1] + round8(t->seg_w[t->nseg - 1]);
}

/* Scratch vectors of the epilogue (NBC floats each, then MB-long row vectors). */
typedef struct vecs {
  float* bias;    /* per C column */
  float* cscale;  /* per C column: weights scale (not K-varying) */
  int32_t* czp;   /* per C column: weights zero point (INT) */
  int32_t* csum;  /* per C column: sum over K of B' (INT, src zero point as a compensation) */
  float* wz;      /* 8: weights zero points of a panel's columns (F32_FUSED packing) */
  float* ws;      /* 8: weights scales of a panel's columns (F32_FUSED packing) */
  float* rscale;  /* per row: src scale (not K-varying) */
  int32_t* rzp;   /* per row: src zero point (INT) */
  int32_t* rsum;  /* per row: sum over K of A' (INT, weights zero point) */
  float* dscale;  /* per dst column of the tile (dst scale varying along N) */
  float* dzp;     /* per dst column of the tile (dst zero point varying along N) */
} vecs_t;

static void vecs_setup(const job_t* j, const scratch_t* s, vecs_t* w) {
  const size_t nbc = (size_t)scratch_nbc(j), mb = (size_t)j->mb;
  float* p = s->vec;
  w->bias = p;
  w->cscale = p + nbc;
  w->czp = (int32_t*)(p + 2 * nbc);
  w->csum = (int32_t*)(p + 3 * nbc);
  w->wz = p + 4 * nbc;
  w->ws = p + 4 * nbc + 8;
  w->dscale = p + 5 * nbc;
  w->dzp = p + 6 * nbc;
  w->rscale = p + 8 * nbc;
  w->rzp = (int32_t*)(p + 8 * nbc + mb);
  w->rsum = (int32_t*)(p + 8 * nbc + 2 * mb);
}

/* ---------------------------------------------------------------------------------------------- */
/* Packing */

/* Element (k, n) of the group's weights as f32, whatever their storage. */
INLINE float wei_f32(const group_view_t* v, int32_t k, int32_t n) {
  if (v->wfmt == WEI_F32_P8)
    return ((const float*)v->wpacked)[((size_t)(n / NR) * v->Kfull + k) * NR + n % NR];
  if (v->wfmt >= WEI_X8_P8) return lowp_code_f32(v, k, n);
  return load_any(v->B.base, v->B.dt, v->B.off + (size_t)k * v->B.s0 + (size_t)n * v->B.s1);
}

INLINE int32_t wei_int(const group_view_t* v, int32_t k, int32_t n) {
  if (v->wfmt >= WEI_X8_P8) return lowp_code_int(v, k, n);
  return load_int(v->B.base, v->B.dt, v->B.off + (size_t)k * v->B.s0 + (size_t)n * v->B.s1);
}

/* A block, F32_FUSED: rows m0.., k0 .. k0 + kc, decoded, minus zero point, times K-varying scale, in
   4-row micro-panels (driver.h). Rows are decoded in pieces of 64 k on the stack, then interleaved. */
static void pack_a_f32(const job_t* j, const group_view_t* v, const tile_t* t, float* a, int32_t lda, int32_t k0,
                       int32_t kc) {
  const qarg_t* qs = &j->q[Q_SRC_SCALE];
  const qarg_t* qz = &j->q[Q_SRC_ZP];
  const void* sb = qs->st_k ? q_base(qs, v->grp) : 0; /* per-row scales wait for the epilogue */
  const void* zb = q_base(qz, v->grp);
  float piece[MR][64];
  for (int32_t i0 = 0; i0 < t->mc; i0 += MR) {
    const int32_t rows = MIN(MR, t->mc - i0);
    for (int32_t p0 = 0; p0 < kc; p0 += 64) {
      const int32_t pn = MIN(64, kc - p0);
      for (int32_t q = 0; q < rows; q++) {
        const int32_t i = i0 + q, r = src_row(j, v, t->m0 + i);
        float* x = piece[q];
        const size_t arow = a_row_elem(j, v, t->m0 + i);
        if (arow == SIZE_MAX) { /* a padding row of a gather: its dequantized src is 0 */
          for (int32_t y = 0; y < pn; y++) x[y] = 0.0f;
          continue;
        }
        decode_f32(x, v->A.base, v->A.dt, arow + (size_t)(k0 + p0) * v->A.s1, v->A.s1, pn);
        for (int32_t y0 = 0; (sb || zb) && y0 < pn;) {
          const int32_t kabs = v->k0 + k0 + p0 + y0;
          int32_t len = pn - y0;
          if (sb) len = MIN(len, qs->blk_k - kabs % qs->blk_k);
          if (zb && qz->st_k) len = MIN(len, qz->blk_k - kabs % qz->blk_k);
          const float z = zb ? (float)q_int(qz, zb, v->grp, r, kabs, 0) : 0.0f;
          const float sc = sb ? q_float(qs, sb, v->grp, r, kabs, 0) : 1.0f;
          for (int32_t y = y0; y < y0 + len; y++) x[y] = (x[y] - z) * sc;
          y0 += len;
        }
      }
      float* o = a + (size_t)i0 * lda + (size_t)p0 * MR;
      if (rows == MR) put_panel4(o, piece[0], 64, pn);
      else for (int32_t q = 0; q < rows; q++) put_row_panel(o, (size_t)lda, MR, q, piece[q], pn);
    }
  }
}

/* B block, F32_FUSED: the segment's panels for k0 .. k0 + kc as f32 [panel][kc][8], zero padded. */
/* 8 consecutive elements (element index i, 4-bit types: i even) of a plain buffer as two f32x4. */
INLINE void load8_f32(const char* base, int dt, size_t i, v128_t* lo, v128_t* hi) {
  switch (dt) {
    case DT_F32: {
      const float* q = (const float*)base + i;
      *lo = wasm_v128_load(q);
      *hi = wasm_v128_load(q + 4);
      return;
    }
    case DT_BF16: {
      const v128_t h = wasm_v128_load((const uint16_t*)base + i);
      *lo = wasm_i16x8_shuffle(wasm_i16x8_splat(0), h, 0, 8, 0, 9, 0, 10, 0, 11);
      *hi = wasm_i16x8_shuffle(wasm_i16x8_splat(0), h, 0, 12, 0, 13, 0, 14, 0, 15);
      return;
    }
    default: { /* s8 u8 s4 u4: to int16 x 8, then two int32x4 */
      v128_t w16;
      if (dt == DT_S8 || dt == DT_U8) {
        const v128_t b = wasm_v128_load64_zero(base + i);
        w16 = dt == DT_S8 ? wasm_i16x8_extend_low_i8x16(b) : wasm_u16x8_extend_low_u8x16(b);
      } else {
        const v128_t b = wasm_v128_load32_zero(base + (i >> 1));
        const v128_t lo4 = wasm_v128_and(b, wasm_i8x16_splat(0x0f)), hi4 = wasm_u8x16_shr(b, 4);
        v128_t n = wasm_i8x16_shuffle(lo4, hi4, 0, 16, 1, 17, 2, 18, 3, 19, 0, 0, 0, 0, 0, 0, 0, 0);
        if (dt == DT_S4) n = wasm_i8x16_sub(wasm_v128_xor(n, wasm_i8x16_splat(8)), wasm_i8x16_splat(8));
        w16 = dt == DT_S4 ? wasm_i16x8_extend_low_i8x16(n) : wasm_u16x8_extend_low_u8x16(n);
      }
      *lo = wasm_f32x4_convert_i32x4(wasm_i32x4_extend_low_i16x8(w16));
      *hi = wasm_f32x4_convert_i32x4(wasm_i32x4_extend_high_i16x8(w16));
      return;
    }
  }
}

INLINE int load8_ok(int dt, size_t i0, size_t s0) {
  if (dt == DT_F32 || dt == DT_BF16 || dt == DT_S8 || dt == DT_U8) return 1;
  return (dt == DT_S4 || dt == DT_U4) && !(i0 & 1) && !(s0 & 1); /* every row starts on a byte */
}

/* B block, F32_FUSED: the segment's panels for k0 .. k0 + kc as f32 [panel][kc][8], zero padded,
   minus the zero point and times the K-varying scale (both staged per panel and K-block). This runs
   once per tile (K x NB elements): full panels of plain weights take the vector loads above. */
static void pack_b_f32(const job_t* j, const group_view_t* v, const vecs_t* w, int32_t n0, int32_t width, float* b,
                       int32_t k0, int32_t kc) {
  const qarg_t* qs = &j->q[Q_WEI_SCALE];
  const qarg_t* qz = &j->q[Q_WEI_ZP];
  const void* sb = qs->st_k ? (qs->emb ? v->wpacked : q_base(qs, v->g)) : 0;
  const void* zb = qz->emb ? v->wpacked : q_base(qz, v->g);
  const int plain = !v->wpacked;
  const int32_t npan = cdiv(width, NR);
  const size_t s0 = (size_t)v->B.s0;
  for (int32_t p = 0; p < npan; p++) {
    const int32_t nb = n0 + p * NR, cnt = MIN(NR, width - p * NR);
    const size_t i0 = v->B.off + (size_t)k0 * s0 + (size_t)nb * v->B.s1;
    const int vec = plain && cnt == NR && v->B.s1 == 1 && load8_ok(v->B.dt, i0, s0);
    int32_t next = 0; /* k (block relative) where the panel's zero points / scales change */
    v128_t z0 = wasm_f32x4_splat(0.0f), z1 = z0, c0 = wasm_f32x4_splat(1.0f), c1 = c0;
    for (int32_t k = 0; k < kc; k++) {
      float* o = b + ((size_t)p * kc + k) * NR;
      v128_t lo, hi;
      if (vec) {
        load8_f32(v->B.base, v->B.dt, i0 + (size_t)k * s0, &lo, &hi);
      } else {
        float t8[8] = { 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f };
        if (plain) decode_f32(t8, v->B.base, v->B.dt, i0 + (size_t)k * s0, v->B.s1, cnt);
        else for (int32_t q = 0; q < cnt; q++) t8[q] = wei_f32(v, k0 + k, nb + q);
        lo = wasm_v128_load(t8);
        hi = wasm_v128_load(t8 + 4);
      }
      if (sb || zb) {
        if (k == next) {
          const int32_t kabs = v->k0 + k0 + k;
          for (int32_t q = 0; q < NR; q++) {
            w->wz[q] = !zb || q >= cnt ? 0.0f
                     : (float)(qz->emb ? load_int(zb, qz->dt, emb_index(qz, v, kabs, nb + q)) : q_int(qz, zb, v->g, 0, kabs, nb + q));
            w->ws[q] = !sb || q >= cnt ? 1.0f
                     : qs->emb ? load_any(sb, qs->dt, emb_index(qs, v, kabs, nb + q)) : q_float(qs, sb, v->g, 0, kabs, nb + q);
          }
          z0 = wasm_v128_load(w->wz);
          z1 = wasm_v128_load(w->wz + 4);
          c0 = wasm_v128_load(w->ws);
          c1 = wasm_v128_load(w->ws + 4);
          int32_t len = kc - k;
          if (sb) len = MIN(len, qs->blk_k - kabs % qs->blk_k);
          if (zb && qz->st_k) len = MIN(len, qz->blk_k - kabs % qz->blk_k);
          next = k + len;
        }
        lo = VMUL(VSUB(lo, z0), c0);
        hi = VMUL(VSUB(hi, z1), c1);
      }
      wasm_v128_store(o, lo);
      wasm_v128_store(o + 4, hi);
    }
  }
}

/* A block, INT: rows as int16 (kc rounded up to even, zero padded), minus the row's zero point unless
   it is applied as a compensation, in 3-row micro-panels of k-pairs (rows 3p.. at a + p * 3 * lda,
   k-pair t of row r as the i32 at [2 (3t + r)]); row sums of A' when the weights have zero points.
   Rows are decoded in pieces of 128 k on the stack, then interleaved. */
static void pack_a_s16(const job_t* j, const group_view_t* v, const tile_t* t, const vecs_t* w, int16_t* a, int32_t lda, int32_t k0,
                       int32_t kc, int comp, int need_rsum) {
  int16_t piece[MR_INT][128];
  for (int32_t i0 = 0; i0 < t->mc; i0 += MR_INT) {
    const int32_t rows = MIN(MR_INT, t->mc - i0);
    for (int32_t p0 = 0; p0 < kc; p0 += 128) { /* p0 even: pieces hold whole k-pairs */
      const int32_t pn = MIN(128, kc - p0), pairs = (pn + 1) / 2;
      for (int32_t q = 0; q < rows; q++) {
        const int32_t i = i0 + q;
        int16_t* x = piece[q];
        const size_t arow = a_row_elem(j, v, t->m0 + i);
        if (arow == SIZE_MAX) for (int32_t y = 0; y < pn; y++) x[y] = 0; /* gather padding row (its zero point is 0) */
        else decode_i16(x, v->A.base, v->A.dt, arow + (size_t)(k0 + p0) * v->A.s1, v->A.s1, pn, comp ? 0 : w->rzp[i]);
        if (pn & 1) x[pn] = 0;
        if (!need_rsum) continue;
        int32_t y = 0;
        v128_t acc = wasm_i32x4_splat(0);
        for (; y + 8 <= pn; y += 8) acc = wasm_i32x4_add(acc, wasm_i32x4_extadd_pairwise_i16x8(wasm_v128_load(x + y)));
        uint32_t sum = (uint32_t)wasm_i32x4_extract_lane(acc, 0) + (uint32_t)wasm_i32x4_extract_lane(acc, 1) +
                       (uint32_t)wasm_i32x4_extract_lane(acc, 2) + (uint32_t)wasm_i32x4_extract_lane(acc, 3);
        for (; y < pn; y++) sum += (uint32_t)(int32_t)x[y];
        w->rsum[i] = (int32_t)((uint32_t)w->rsum[i] + sum);
      }
      /* the k-pairs are the panel's 32-bit lanes (lda int16 = lda / 2 lanes per row) */
      uint32_t* o = (uint32_t*)(a + (size_t)i0 * lda) + (size_t)p0 / 2 * MR_INT;
      for (int32_t q = 0; q < rows; q++) put_row_panel(o, (size_t)lda / 2, MR_INT, q, piece[q], pairs);
    }
  }
}

/* B block, INT: the segment's plain weights as int16 k-pair panels [panel][kcp/2][8][2], zero padded. */
static void pack_b_s16(const group_view_t* v, int32_t n0, int32_t width, int16_t* b, int32_t k0,
                       int32_t kc) {
  const int32_t kcp = (kc + 1) & ~1, npan = cdiv(width, NR);
  const int dt = v->B.dt;
  for (int32_t p = 0; p < npan; p++) {
    const int32_t nb = n0 + p * NR, cnt = MIN(NR, width - p * NR);
    for (int32_t k = 0; k < kcp; k += 2) {
      int16_t* o = b + ((size_t)p * kcp + k) * NR;
      const size_t i0 = v->B.off + (size_t)(k0 + k) * v->B.s0 + (size_t)nb * v->B.s1;
      if (!v->wpacked && cnt == NR && k + 1 < kc && v->B.s1 == 1 && (dt == DT_S8 || dt == DT_U8)) {
        const v128_t r0 = wasm_v128_load64_zero(v->B.base + i0);
        const v128_t r1 = wasm_v128_load64_zero(v->B.base + i0 + v->B.s0);
        const v128_t w0 = dt == DT_S8 ? wasm_i16x8_extend_low_i8x16(r0) : wasm_u16x8_extend_low_u8x16(r0);
        const v128_t w1 = dt == DT_S8 ? wasm_i16x8_extend_low_i8x16(r1) : wasm_u16x8_extend_low_u8x16(r1);
        wasm_v128_store(o, wasm_i16x8_shuffle(w0, w1, 0, 8, 1, 9, 2, 10, 3, 11));
        wasm_v128_store(o + 8, wasm_i16x8_shuffle(w0, w1, 4, 12, 5, 13, 6, 14, 7, 15));
        continue;
      }
      for (int32_t q = 0; q < NR; q++) {
        o[2 * q] = (int16_t)(q < cnt ? wei_int(v, k0 + k, nb + q) : 0);
        o[2 * q + 1] = (int16_t)(q < cnt && k + 1 < kc ? wei_int(v, k0 + k + 1, nb + q) : 0);
      }
    }
  }
}

/* ---------------------------------------------------------------------------------------------- */
/* Epilogue */

/* cnt (<= 4) elements of type dt at base[i + l * stride], as f32 lanes. */
INLINE v128_t load_lanes(const void* base, int dt, size_t i, int32_t stride, int32_t cnt) {
  if (dt == DT_F32) {
    const float* p = (const float*)base + i;
    if (stride == 1 && cnt == 4) return wasm_v128_load(p);
    if (stride == 0) return wasm_v128_load32_splat(p);
  }
  if (stride == 0) return VF(load_any(base, dt, i));
  float t[4] = { 0.0f, 0.0f, 0.0f, 0.0f };
  for (int32_t l = 0; l < cnt; l++) t[l] = load_any(base, dt, i + (size_t)l * (size_t)stride);
  return wasm_v128_load(t);
}

INLINE v128_t glu_apply(const job_t* j, v128_t g, v128_t u) { return glu4(j->glu_alg, j->glu_alpha, j->glu_limit, g, u); }

/* What turns one row's accumulators into f32 values (rfcs/0002 (1)-(2)): INT compensations and
   conversion, row and column scales, bias. */
typedef struct rowpre {
  const float* x; /* the row's accumulators (f32 or int32 bits) */
  const vecs_t* w;
  int is_int, wzp, comp, has_bias, has_cscale, has_rscale;
  v128_t rs, rsum, za, kza;
} rowpre_t;

/* C columns cc .. cc + 3 of the row, as f32 with scales and bias applied. */
INLINE v128_t pre(const rowpre_t* q, int32_t cc) {
  v128_t y;
  if (q->is_int) {
    v128_t acc = wasm_v128_load(q->x + cc);
    if (q->wzp) {
      const v128_t zw = wasm_v128_load(q->w->czp + cc);
      acc = wasm_i32x4_sub(acc, wasm_i32x4_mul(zw, q->rsum));
      if (q->comp) acc = wasm_i32x4_add(acc, wasm_i32x4_mul(zw, q->kza));
    }
    if (q->comp) acc = wasm_i32x4_sub(acc, wasm_i32x4_mul(q->za, wasm_v128_load(q->w->csum + cc)));
    y = wasm_f32x4_convert_i32x4(acc);
  } else {
    y = wasm_v128_load(q->x + cc);
  }
  if (q->has_rscale) y = VMUL(y, q->rs);
  if (q->has_cscale) y = VMUL(y, wasm_v128_load(q->w->cscale + cc));
  if (q->has_bias) y = VADD(y, wasm_v128_load(q->w->bias + cc));
  return y;
}

/* One pass over the tile: every C column is read once, turned into f32 (pre), combined by the GLU,
   run through the post-op chain, divided by the dst scale, shifted by the dst zero point, stored. */
static void epilogue(const job_t* j, const group_view_t* v, const tile_t* t, const vecs_t* w, float* c, int is_int,
                     int has_bias, int has_cscale, int has_rscale, int wzp, int comp) {
  const int32_t ldc = t->ldc;
  const qarg_t* qds = &j->q[Q_DST_SCALE];
  const qarg_t* qdz = &j->q[Q_DST_ZP];
  const void* dsb = q_base(qds, v->grp);
  const void* dzb = q_base(qdz, v->grp);
  const operand_t C = v->C;
  /* dst scale / zero point varying along N: staged per tile (per row too if they also vary along rows) */
  const int ds_cols = dsb && qds->st_n, dz_cols = dzb && qdz->st_n;
  const int32_t r_first = MAX(dst_row(j, v, t->m0), 0); /* a padding row's values are never stored */
  for (int32_t x = 0; x < t->nc; x++) {
    if (ds_cols) w->dscale[x] = q_float(qds, dsb, v->grp, r_first, 0, t->n0 + x);
    if (dz_cols) w->dzp[x] = (float)q_int(qdz, dzb, v->grp, r_first, 0, t->n0 + x);
  }
  rowpre_t q = { 0, w, is_int, wzp, comp, has_bias, has_cscale, has_rscale, VF(1.0f), wasm_i32x4_splat(0),
                 wasm_i32x4_splat(0), wasm_i32x4_splat(0) };
  const int fast_store = C.dt == DT_F32 && C.s1 == 1;
  const int glu = j->glu_alg, layout = j->glu_layout;
  const int32_t up = t->seg_c[1];
  const int dglu = j->n_po > 0 && j->po[0].kind == PO_DGLU;
  const int plain = !glu && j->n_po == 0 && !dsb && !dzb && fast_store && !wzp && !comp;
  for (int32_t i = 0; i < t->mc; i++) {
    const int32_t r = dst_row(j, v, t->m0 + i);
    const size_t drow = c_row_elem(j, v, t->m0 + i);
    if (drow == SIZE_MAX) continue; /* scatter: a padding row */
    if (r != r_first && ((ds_cols && qds->st_r) || (dz_cols && qdz->st_r)))
      for (int32_t xx = 0; xx < t->nc; xx++) {
        if (ds_cols) w->dscale[xx] = q_float(qds, dsb, v->grp, r, 0, t->n0 + xx);
        if (dz_cols) w->dzp[xx] = (float)q_int(qdz, dzb, v->grp, r, 0, t->n0 + xx);
      }
    q.x = c + (size_t)i * ldc;
    if (has_rscale) q.rs = VF(w->rscale[i]);
    if (wzp) q.rsum = wasm_i32x4_splat(w->rsum[i]);
    if (comp) {
      q.za = wasm_i32x4_splat(w->rzp[i]);
      q.kza = wasm_i32x4_splat((int32_t)((uint32_t)v->Kg * (uint32_t)w->rzp[i]));
    }
    if (dglu) { /* GLU backward: the tile's f32 values in place, then dglu_tile (glu-bwd.c) */
      for (int32_t jj = 0; jj < t->nc; jj += 4) wasm_v128_store(c + (size_t)i * ldc + jj, pre(&q, jj));
      continue;
    }
    const float ds_row = dsb && !ds_cols ? q_float(qds, dsb, v->grp, r, 0, 0) : 1.0f;
    const float dz_row = dzb && !dz_cols ? (float)q_int(qdz, dzb, v->grp, r, 0, 0) : 0.0f;
    int32_t jj0 = 0;
    if (plain) { /* no GLU, post-ops, dst scale or zero point, f32 dst rows: the whole vectors with the flags fixed
                    (decode tiles are 1 row: this loop was 5% of a w4:dq step) */
      float* const out = (float*)C.base + drow + t->n0;
      for (; jj0 + 4 <= t->nc; jj0 += 4) { /* pre()'s steps */
        const v128_t a = wasm_v128_load(q.x + jj0);
        v128_t y = is_int ? wasm_f32x4_convert_i32x4(a) : a;
        if (has_rscale) y = VMUL(y, q.rs);
        if (has_cscale) y = VMUL(y, wasm_v128_load(w->cscale + jj0));
        if (has_bias) y = VADD(y, wasm_v128_load(w->bias + jj0));
        wasm_v128_store(out + jj0, y);
      }
    }
    for (int32_t jj = jj0; jj < t->nc; jj += 4) {
      const int32_t cnt = MIN(4, t->nc - jj);
      v128_t y;
      if (!glu) {
        y = pre(&q, jj);
      } else if (layout == GLU_HALVES) {
        y = glu_apply(j, pre(&q, jj), pre(&q, up + jj));
      } else if (layout == GLU_INTERLEAVED) {
        const v128_t lo = pre(&q, 2 * jj), hi = pre(&q, 2 * jj + 4);
        y = glu_apply(j, wasm_i32x4_shuffle(lo, hi, 0, 2, 4, 6), wasm_i32x4_shuffle(lo, hi, 1, 3, 5, 7));
      } else {
        const int32_t cb = 64 * (jj / 32) + jj % 32;
        y = glu_apply(j, pre(&q, cb), pre(&q, cb + 32));
      }
      const int32_t n = t->n0 + jj;
      for (int32_t e = 0; e < j->n_po; e++) {
        const post_op_t* o = &j->po[e];
        if (o->kind == PO_ELTWISE) {
          y = v_eltwise(y, o->alg, o->alpha, o->beta);
        } else if (o->kind == PO_SUM) {
          float t4[4] = { 0.0f, 0.0f, 0.0f, 0.0f };
          for (int32_t l = 0; l < cnt; l++) t4[l] = load_any(C.base, C.dt, drow + (size_t)(n + l) * C.s1);
          y = VADD(y, VMUL(VF(o->alpha), wasm_v128_load(t4)));
        } else {
          const v128_t s1 = load_lanes(po_base(o, v->grp), o->alg, po_index(o, v->grp, r, n), o->st_n, cnt);
          y = o->kind == PO_BIN_MUL ? VMUL(y, s1) : VADD(y, s1);
        }
      }
      if (dsb) y = wasm_f32x4_div(y, ds_cols ? wasm_v128_load(w->dscale + jj) : VF(ds_row));
      if (dzb) y = VADD(y, dz_cols ? wasm_v128_load(w->dzp + jj) : VF(dz_row));
      if (fast_store && cnt == 4) {
        wasm_v128_store((float*)C.base + drow + n, y);
      } else {
        float t4[4];
        wasm_v128_store(t4, y);
        for (int32_t l = 0; l < cnt; l++) store_any((char*)C.base, C.dt, drow + (size_t)(n + l) * C.s1, t4[l]);
      }
    }
  }
  if (dglu) dglu_tile(j, v, t->m0, t->mc, t->n0, t->nc, c, ldc);
}

/* ---------------------------------------------------------------------------------------------- */

/* k (even) per widened piece of an x8 / x4 panel on tiles of more than 3 rows: 512 x 8 int16 = 8 KiB. */
#define INT_PIECE 512
/* Where the f32 tile of K-block folding lives in s->b (direct mode: s->b only holds a widened piece). */
#define FACC_OFFSET (INT_PIECE * NR / 2)

/* The 8 weights scales of one panel (C columns cc ..) for the K block holding kabs: in the panel (`+q`)
   or gathered from the runtime scales; padding columns 0 (their sums are 0 too). times: 0.5 for f4_e2m1
   weights on the integer path (their sums are of 2 v), else 1; a power of two, so exact. */
static void stage_block_scales(const qarg_t* qs, const group_view_t* v, int32_t kabs, int32_t nb, int32_t cnt, float* out, float times) {
  if (qs->emb) decode_f32(out, (const char*)v->wpacked, qs->dt, emb_index(qs, v, kabs, nb), 1, cnt);
  else for (int32_t x = 0; x < cnt; x++) out[x] = q_float(qs, q_base(qs, v->g), v->g, 0, kabs, nb + x);
  for (int32_t x = 0; x < cnt; x++) out[x] *= times;
  for (int32_t x = cnt; x < NR; x++) out[x] = 0.0f;
}

/* K blocks of weights scales the 1-row integer decode kernels fold from a staged copy (f32, the 0.5 of f4_e2m1
   weights applied) when they cannot read them in place (f32 beside the panel): e8m0 (MXFP4), f8_e4m3 (NVFP4),
   other types, execute-time scales. 2 panels x 512 blocks x 8 floats: 32 KB of stack (kernel stacks: 256 KB). */
#define DQ_STAGE_BLOCKS 512
/* K blocks of 2-row tiles whose int32 sums are kept before their folds (8 KB of stack). */
#define DQ2_BATCH 128

/* nblk K blocks' scales (from the block holding kabs) of the panel of columns nb .. nb + cnt - 1, 8 per block
   at out: embedded ones with SIMD (padding columns hold 1; up to one block past nblk written), runtime ones
   gathered (padding 0). */
static void stage_dq_scales(const qarg_t* qs, const group_view_t* v, int32_t kabs, int32_t nblk, int32_t nb, int32_t cnt, float* out,
                            float times) {
  if (qs->emb) {
    const size_t bb = (size_t)NR * (size_t)dt_bits(qs->dt) / 8;
    const uint8_t* s0 = (const uint8_t*)v->wpacked + (size_t)(nb / NR) * v->wps + v->wso + (size_t)(kabs / qs->blk_k) * bb;
    lowp_emb_scales(out, s0, qs->dt, nblk, times);
    return;
  }
  for (int32_t b = 0; b < nblk; b++) stage_block_scales(qs, v, kabs + b * qs->blk_k, nb, cnt, out + (size_t)b * NR, times);
}

/* One K block's exact int32 sums of a panel (mc rows, 8 columns) folded into the f32 tile:
   facc = float(acc) * s (first block of the group) or facc + float(acc) * s, mul then add (no FMA, in
   either build: the reference models each rounding). */
static void fold_block_ld(float* facc, int32_t ldf, const int32_t* ci, int32_t ldi, const float* bs, int32_t mc, int first) {
  const v128_t s0 = wasm_v128_load(bs), s1 = wasm_v128_load(bs + 4);
  for (int32_t i = 0; i < mc; i++) {
    const int32_t* c = ci + (size_t)i * ldi;
    float* f = facc + (size_t)i * ldf;
    v128_t p0 = wasm_f32x4_mul(wasm_f32x4_convert_i32x4(wasm_v128_load(c)), s0);
    v128_t p1 = wasm_f32x4_mul(wasm_f32x4_convert_i32x4(wasm_v128_load(c + 4)), s1);
    if (!first) {
      p0 = wasm_f32x4_add(wasm_v128_load(f), p0);
      p1 = wasm_f32x4_add(wasm_v128_load(f + 4), p1);
    }
    wasm_v128_store(f, p0);
    wasm_v128_store(f + 4, p1);
  }
}
/* The same with the sums and the f32 tile on one row stride. */
static void fold_block(float* facc, const int32_t* ci, const float* bs, int32_t mc, int32_t ldc, int first) {
  fold_block_ld(facc, ldc, ci, ldc, bs, mc, first);
}

/* 0: the 1-2 row x4 decode tiles run the former 3x8 / dq_row kernels instead of s16_dq_1x16w4 / 2x8w4 (the same
   bits); 1: those, without the relaxed i16x8 dot (s8_dq_1x16w4r) on 1-row x4 tiles; 2 (default): with it where
   allowed. In-process A/Bs for `bench --mode=weights` (variants w4:dq-3x8, w4:dq-quad). In the shared memory: every
   thread sees it. */
static volatile int32_t dq_quad_on = 2;
EXPORT(set_dq_quad) void set_dq_quad(int32_t on) { dq_quad_on = on; }

void run_tile_fused(const job_t* j, scratch_t* s, const group_view_t* v, int32_t m0, int32_t mc, int32_t n0,
                    int32_t nc) {
  tile_t t;
  tile_setup(j, v, &t, m0, mc, n0, nc);
  vecs_t w;
  vecs_setup(j, s, &w);
  const int is_int = j->path == PATH_INT;
  /* Dynamic int8 activations x weights with K-block scales (INT, weights scales varying along K): each K
     block's int32 sums are folded into an f32 tile in block order (fold_block); the epilogue then takes
     that tile as f32 (row scale, bias, GLU, post-ops). The pd guarantees packed weights read in place
     (direct), no zero points and even blocks. */
  const int kvs = is_int && j->q[Q_WEI_SCALE].st_k != 0;
  const int32_t kblk = kvs ? j->q[Q_WEI_SCALE].blk_k : 0;
  /* f4_e2m1 weights on the integer path (dynamic int8 activations): the kernels sum the codes as 2 v (exact
     integers in [-12, 12]); the 0.5 goes into the weights scales as they are staged (a power of two: exact),
     or is the column scale when there is none. */
  const int f4 = is_int && v->B.dt == DT_F4_E2M1;
  const float wtimes = f4 ? 0.5f : 1.0f;
  float sst[2 * DQ_STAGE_BLOCKS * NR + NR]; /* staged K-block scales of two panels (dq_staged; lowp_emb_scales may
                                               write one block past nblk) */
  /* Weights values follow the expert (g), src values the group (gr): they differ under an expert map. */
  const int32_t Kg = v->Kg, ldc = t.ldc, g = v->g, gr = v->grp;
  const int f32_direct_ok = v->wfmt == WEI_F32_P8 && !j->q[Q_WEI_SCALE].st_k;
  const int lowp = v->wfmt >= WEI_X8_P8; /* decoded in the microkernel (gemm-lowp.c; INT: s16-gemm-3x8w8 / w4) */
  /* Weights read straight from their packed panels (every segment starts on a panel). */
  int direct = is_int ? lowp : f32_direct_ok || lowp;
  for (int sg = 0; sg < t.nseg; sg++) direct = direct && t.seg_n[sg] % NR == 0;
  const int32_t KC = k_block(j, direct, mc, Kg, is_int ? 2 : 1, is_int ? MR_INT : MR);

  /* Per-column and per-row parameters of the tile (constant along K by construction of the path). */
  const qarg_t *qss = &j->q[Q_SRC_SCALE], *qws = &j->q[Q_WEI_SCALE], *qsz = &j->q[Q_SRC_ZP], *qwz = &j->q[Q_WEI_ZP];
  const void* ssb = qss->st_k ? 0 : q_base(qss, gr);
  const void* wsb = qws->st_k ? 0 : qws->emb ? v->wpacked : q_base(qws, g);
  const void* szb = is_int ? q_base(qsz, gr) : 0;
  const void* wzb = is_int ? q_base(qwz, g) : 0;
  const int has_bias = v->bias != 0;
  int comp = 0;
  /* Column vectors over each segment's contiguous GEMM columns (padding columns are never stored). */
  for (int sg = 0; sg < t.nseg; sg++) {
    const int32_t c0 = t.seg_c[sg], n0s = t.seg_n[sg], wd = t.seg_w[sg];
    if (has_bias) decode_f32(w.bias + c0, v->bias, j->b_dt, v->bias_off + (size_t)n0s * j->b_n, j->b_n, wd);
    if (wsb && qws->emb) /* embedded: 8 per panel */
      for (int32_t x = 0, run; x < wd; x += run) {
        run = MIN(wd - x, NR - (n0s + x) % NR);
        decode_f32(w.cscale + c0 + x, (const char*)wsb, qws->dt, emb_index(qws, v, 0, n0s + x), 1, run);
      }
    else if (wsb && qws->blk_n == 1) decode_f32(w.cscale + c0, (const char*)wsb, qws->dt, q_index(qws, g, 0, 0, n0s), qws->st_n, wd);
    else if (wsb) for (int32_t x = 0; x < wd; x++) w.cscale[c0 + x] = q_float(qws, wsb, g, 0, 0, n0s + x);
    if (wzb) for (int32_t x = 0; x < wd; x++) w.czp[c0 + x] = q_int(qwz, wzb, g, 0, 0, n0s + x);
    if (f4 && !kvs) for (int32_t x = 0; x < wd; x++) w.cscale[c0 + x] = (wsb ? w.cscale[c0 + x] : 1.0f) * 0.5f;
    for (int32_t x = 0; x < wd; x++) w.csum[c0 + x] = 0;
    for (int32_t x = wd; x < round8(wd); x++) { /* panel padding: read by the vector epilogue, never stored */
      w.bias[c0 + x] = w.cscale[c0 + x] = 0.0f;
      w.czp[c0 + x] = w.csum[c0 + x] = 0;
    }
  }
  if (ssb && !j->gather) decode_f32(w.rscale, (const char*)ssb, qss->dt, q_index(qss, gr, v->r0 + m0, 0, 0), qss->st_r, mc);
  for (int32_t i = 0; ssb && j->gather && i < mc; i++) { /* gather: rows of src are tokens */
    const int32_t r = src_row(j, v, m0 + i);
    w.rscale[i] = r < 0 ? 1.0f : q_float(qss, ssb, gr, r, 0, 0);
  }
  for (int32_t i = 0; i < mc; i++) {
    const int32_t r = src_row(j, v, m0 + i);
    w.rzp[i] = szb && r >= 0 ? q_int(qsz, szb, gr, r, 0, 0) : 0;
    if (w.rzp[i] < -32512 || w.rzp[i] > 32512) comp = 1; /* a - zp would leave int16 */
    w.rsum[i] = 0;
  }

  /* C columns past a segment's width are never written by the microkernel but read by the vector
     epilogue: zero them (stale bits of another path's tile could be denormals, slow on x64). */
  for (int sg = 0; sg < t.nseg; sg++)
    for (int32_t x = t.seg_c[sg] + t.seg_w[sg]; x < t.seg_c[sg] + round8(t.seg_w[sg]); x++)
      for (int32_t i = 0; i < mc; i++) s->c[(size_t)i * ldc + x] = 0.0f;

  for (int32_t k0 = 0; k0 < Kg || k0 == 0; k0 += KC) {
    const int32_t kc = MIN(KC, Kg - k0), kcp = (kc + 1) & ~1;
    const int first = k0 == 0;
    /* Consecutive tiles of a group (N-blocks) share their A block: pack it once per worker, unless the
       packing also sums the rows (weights zero points), which the tile epilogue needs afresh. */
    int fresh = 1; /* the A block was packed in this iteration */
    if (is_int && wzb) {
      s->a_base = 0;
      pack_a_s16(j, v, &t, &w, (int16_t*)s->a, KC, k0, kc, comp, 1);
    } else if (!a_block_cached(s, gr, v->tix, v->A.base, v->A.off, m0, mc, k0, kc, KC)) {
      if (is_int) pack_a_s16(j, v, &t, &w, (int16_t*)s->a, KC, k0, kc, comp, 0);
      else pack_a_f32(j, v, &t, s->a, KC, k0, kc);
    } else fresh = 0;
    /* 1 row of s8 src (no zero points) x x4 codes where the relaxed dot computes exactly: the row's bytes
       are read in place (4 k per i32 splat), no int16 A block */
    const int x8w = v->wfmt == WEI_X8_P8;
    const size_t arow_e = is_int && mc == 1 && direct && !x8w && kc > 0 && !szb && !wzb && !comp && v->A.dt == DT_S8 && v->A.s1 == 1 ? a_row_elem(j, v, m0) : SIZE_MAX;
    const int rdot_can = arow_e != SIZE_MAX && rdot_ok();
    /* 1 row with K-block scales folded in registers, this K block on block boundaries: f32 scales beside the panel
       read in place, or (other types, runtime scales, f4_e2m1's 0.5) a staged copy of the A block's blocks */
    const int kb_row = kvs && mc == 1 && direct && kcp > 0 && (v->k0 + k0) % kblk == 0 && (kc % kblk == 0 || k0 + kc >= Kg);
    const int dq_inplace = kb_row && !f4 && j->q[Q_WEI_SCALE].emb && j->q[Q_WEI_SCALE].dt == DT_F32;
    const int32_t dq_nblk = kvs ? cdiv(kc, kblk) : 0;
    const int dq_staged = kb_row && !dq_inplace && dq_nblk <= DQ_STAGE_BLOCKS;
    /* f4_e2m1 with 1-byte K-block scales beside the panels (MXFP4 e8m0, NVFP4 f8_e4m3, blocks of at most 64 k): the
       1-row quad tiles read them in place after each panel's codes (s16_dq_1x16f4), not from a copy staged first */
    const int dq_f4b = kb_row && f4 && j->q[Q_WEI_SCALE].emb && (j->q[Q_WEI_SCALE].dt == DT_E8M0 || j->q[Q_WEI_SCALE].dt == DT_F8_E4M3) &&
                       kblk <= 64;
    const int dq_fast = dq_inplace || dq_staged;
    /* Otherwise 1-2 rows of 8-bit src (|x| <= 255, no zero points) x x4 codes: s16_dq_1x16w4 (1 row, two panels per
       call; K blocks folded as above) or s16_dq_2x8w4 (2 rows, int32 sums) on copies of the rows in their quad
       layout, with the activation sums per K block, past the micro-panel in the A block's room (made once per A
       block: consecutive tiles share them as they share the A block). */
    const size_t qstride = ((size_t)kcp + 7) & ~(size_t)7, xstride = (size_t)kcp / 4 + 1;
    int16_t* aq = (int16_t*)s->a + ((3 * (size_t)KC + 7) & ~(size_t)7);
    int32_t* xs = (int32_t*)(aq + 2 * qstride);
    const size_t a_room = 2 * (size_t)(j->mb + MR) * (size_t)MAX(scratch_kcf(j), j->kc_packed); /* int16 */
    /* 2 rows with K blocks: s16_dq_2x8w4 per block (int32 sums), folded by fold_block; the A block on block boundaries */
    const int dq_inplace2 = !f4 && j->q[Q_WEI_SCALE].emb && j->q[Q_WEI_SCALE].dt == DT_F32; /* (f32 scales beside the panels: read in place) */
    const int dq_emb1 = j->q[Q_WEI_SCALE].emb && (j->q[Q_WEI_SCALE].dt == DT_E8M0 || j->q[Q_WEI_SCALE].dt == DT_F8_E4M3);
    const int kb_rows2 = kvs && mc == 2 && direct && kcp > 0 && kblk % 4 == 0 && (v->k0 + k0) % kblk == 0 && (kc % kblk == 0 || k0 + kc >= Kg);
    const int quad = dq_quad_on && is_int && (mc == 1 || mc == 2) && direct && lowp && !x8w && kcp > 0 && !szb && !wzb && !comp &&
                     (v->A.dt == DT_S8 || v->A.dt == DT_U8) && (!kvs || (mc == 1 ? dq_fast && kblk % 4 == 0 : kb_rows2)) && kcp <= 32768 &&
                     3 * (size_t)KC + 8 + 2 * qstride + 4 * xstride <= a_room;
    /* The relaxed dot takes the 1-row tiles the quad kernels do not (K blocks not a multiple of 4, kc > 32768): on
       x64 without VNNI its 3 instructions per 16 products lose to the quad kernels' placing of whole code bytes
       (decode w4:dq, Node 24, 1 thread: 6.05 ms with it on every 1-row tile, 3.35 ms on the quad kernels). */
    const int rdot = rdot_can && !quad;
    const int8_t* arow = rdot ? (const int8_t*)v->A.base + arow_e : 0;
    /* 1 row of 8-bit src x x8 codes: s16_dq_1x16w8 on the micro-panel's row (two panels per call; K blocks folded
       as above); 2 rows without K blocks: s16_dq_2x8w8 (int32 sums) */
    const int dq8 = dq_quad_on && is_int && (mc == 1 || (mc == 2 && !kvs)) && direct && lowp && x8w && kcp > 0 && !szb && !wzb && !comp &&
                    (v->A.dt == DT_S8 || v->A.dt == DT_U8) && (!kvs || dq_fast) && kcp <= 32768;
    /* 1-2 rows of s8 src x u4 / s4 / f4_e2m1 codes where relaxed SIMD is native: s8_dq_1x16w4r / s8_dq_2x8w4r on the rows expanded
       to 8 bytes per k (s8_rd16_row, in the quad layout's place; their sums past them). qk: int16 per k of a row's layout. */
    const int rd16 = quad && dq_quad_on == 2 && v->A.dt == DT_S8 &&
                     3 * (size_t)KC + 8 + 4 * (size_t)mc * qstride + 4 * xstride <= a_room && rd16_ok();
    const size_t qk = rd16 ? 4 : 1;
    if (rd16) xs = (int32_t*)(aq + 4 * (size_t)mc * qstride);
    int16_t* const aq1 = aq + qk * qstride; /* the second row's layout */
    if (fresh) s->a_quad = 0;
    if (quad && s->a_quad != 1 + rd16) {
      for (int32_t i = 0; i < mc; i++) {
        if (rd16) s8_rd16_row((const int16_t*)s->a + 2 * i, (int8_t*)(aq + i * qk * qstride), (size_t)kcp, kvs ? (size_t)kblk : 0, xs + i * xstride);
        else s16_quad_row_x((const int16_t*)s->a + 2 * i, aq + i * qstride, (size_t)kcp, kvs ? (size_t)kblk : 0, xs + i * xstride, f4 ? 1 : 16);
      }
      s->a_quad = 1 + rd16;
    }
    for (int sg = 0; sg < t.nseg; sg++) {
      const int32_t sn = t.seg_n[sg], sw = t.seg_w[sg], npan = cdiv(sw, NR);
      float* cseg = s->c + t.seg_c[sg];
      if (is_int) {
        /* direct: the x8 / x4 code panels at k0 (k0 even: on a k-pair); else int16 panels packed here */
        const uint8_t* bp;
        size_t pstride;
        if (direct) {
          pstride = v->wps;
          bp = (const uint8_t*)v->wpacked + (size_t)(sn / NR) * pstride + (size_t)k0 * (v->wfmt == WEI_X8_P8 ? NR : NR / 2);
        } else {
          pack_b_s16(v, sn, sw, (int16_t*)s->b, k0, kc);
          bp = (const uint8_t*)s->b;
          pstride = (size_t)kcp * NR * sizeof(int16_t);
        }
        if (comp) /* column sums of B' over the block (rare: a src zero point outside int16) */
          for (int32_t p = 0; p < npan; p++)
            for (int32_t q = 0; q < NR; q++) {
              uint32_t sum = 0;
              const uint8_t* pw = bp + p * pstride;
              for (int32_t kk = 0; kk < kcp; kk++) {
                const int32_t x = !direct ? ((const int16_t*)pw)[(kk & ~1) * NR + 2 * q + (kk & 1)]
                                : v->wfmt == WEI_X8_P8 ? load_int(pw, v->B.dt, (size_t)kk * NR + q)
                                : load_int(pw, v->B.dt, 2 * ((size_t)(kk >> 1) * NR + q) + (size_t)(kk & 1));
                sum += (uint32_t)x;
              }
              w.csum[t.seg_c[sg] + p * NR + q] = (int32_t)((uint32_t)w.csum[t.seg_c[sg] + p * NR + q] + sum);
            }
        const int x8 = x8w;
        const size_t pbytes = !direct ? (size_t)kcp * NR * sizeof(int16_t) : (size_t)kcp * (x8 ? NR : NR / 2);
        if (quad && mc == 2) {
          for (int32_t p = 0; p < npan; p++) {
            const int32_t ncp = MIN(NR, sw - p * NR);
            if (!kvs) {
              (rd16 ? s8_dq_2x8w4r : s16_dq_2x8w4)((size_t)ncp, (size_t)kcp, aq, aq1, xs, xs + xstride, bp + p * pstride, (int32_t*)cseg + p * NR,
                                                   (size_t)ldc, !first, v->B.dt);
              continue;
            }
            const uint8_t* psc = (const uint8_t*)v->wpacked + (size_t)(sn / NR + p) * v->wps + v->wso; /* (embedded scales) */
            if (dq_inplace2 || dq_emb1) { /* scales beside the panel: one call sums and folds every block */
              const int sdt = dq_inplace2 ? DT_F32 : j->q[Q_WEI_SCALE].dt;
              const uint8_t* sb = psc + (size_t)((v->k0 + k0) / kblk) * NR * (dq_inplace2 ? sizeof(float) : 1);
              (rd16 ? s8_dq_2x8w4r_kb : s16_dq_2x8w4_kb)((size_t)kcp, (size_t)kblk, aq, aq1, xs, xs + xstride, bp + p * pstride, sb, sdt, wtimes,
                                                         s->b + FACC_OFFSET + t.seg_c[sg] + p * NR, (size_t)ldc, first, v->B.dt);
              continue;
            }
            /* staged scales: each K block's int32 sums (up to DQ2_BATCH blocks kept), then their folds in block order: the
               panel's codes and then its scales read as runs (s16_dq_1x16w4's short blocks say why) */
            int32_t rsum[DQ2_BATCH * 2 * NR] __attribute__((aligned(16)));
            for (int32_t x = 0; x < DQ2_BATCH * 2 * NR; x++) rsum[x] = 0; /* (columns past ncp: folded, never stored) */
            for (int32_t y0 = 0, b = 0; y0 < kcp;) {
              const int32_t yb = y0;
              int32_t nb = 0;
              for (; nb < DQ2_BATCH && y0 < kcp; nb++, y0 += kblk, b++)
                (rd16 ? s8_dq_2x8w4r : s16_dq_2x8w4)((size_t)ncp, (size_t)MIN(kcp - y0, kblk), aq + qk * (size_t)y0, aq1 + qk * (size_t)y0, xs + b,
                                                     xs + xstride + b, bp + p * pstride + (size_t)y0 * (NR / 2), rsum + nb * 2 * NR, NR, 0, v->B.dt);
              for (int32_t i = 0; i < nb; i++) {
                const int32_t kabs = v->k0 + k0 + yb + i * kblk;
                float bs[NR];
                stage_block_scales(&j->q[Q_WEI_SCALE], v, kabs, sn + p * NR, ncp, bs, wtimes);
                fold_block_ld(s->b + FACC_OFFSET + t.seg_c[sg] + p * NR, ldc, rsum + i * 2 * NR, NR, bs, mc, kabs == v->k0);
              }
            }
          }
          continue;
        }
        if (dq8 && mc == 2) {
          for (int32_t p = 0; p < npan; p++)
            s16_dq_2x8w8((size_t)MIN(NR, sw - p * NR), (size_t)kcp, (const int16_t*)s->a, bp + p * pstride, (int32_t*)cseg + p * NR,
                         (size_t)ldc, !first, v->B.dt);
          continue;
        }
        if (quad || dq8) { /* two panels per call; an odd last one against itself, its 8 results through a copy */
          for (int32_t p = 0; p < npan; p += 2) {
            const int two = p + 1 < npan;
            const int32_t nc1 = MIN(NR, sw - p * NR), nc2 = two ? MIN(NR, sw - (p + 1) * NR) : 0;
            const uint8_t* pw = bp + p * pstride;
            uint32_t tmp[2 * NR] = { 0 }; /* f32 or int32 lanes, copied as bits */
            uint32_t* out = (uint32_t*)(kvs ? s->b + FACC_OFFSET + t.seg_c[sg] + p * NR : cseg + p * NR);
            uint32_t* o = two ? out : tmp;
            if (!two) for (int32_t q = 0; q < NR; q++) tmp[q] = out[q];
            const float* sp = kvs && dq_inplace ? (const float*)((const uint8_t*)v->wpacked + (size_t)(sn / NR + p) * v->wps + v->wso) +
                                                      (size_t)((v->k0 + k0) / kblk) * NR : 0;
            size_t sps = two ? v->wps / 4 : 0;
            if (kvs && dq_f4b && !dq8) {
              const uint8_t* sb = (const uint8_t*)v->wpacked + (size_t)(sn / NR + p) * v->wps + v->wso + (size_t)((v->k0 + k0) / kblk) * NR;
              (rd16 ? s8_dq_1x16f4r : s16_dq_1x16f4)((size_t)kcp, (size_t)kblk, aq, xs, pw, two ? pstride : 0, sb, two ? v->wps : 0,
                                                     j->q[Q_WEI_SCALE].dt, (float*)o, first);
              if (!two) for (int32_t q = 0; q < NR; q++) out[q] = tmp[q];
              continue;
            }
            if (kvs && dq_staged) {
              stage_dq_scales(&j->q[Q_WEI_SCALE], v, v->k0 + k0, dq_nblk, sn + p * NR, nc1, sst, wtimes);
              if (two) stage_dq_scales(&j->q[Q_WEI_SCALE], v, v->k0 + k0, dq_nblk, sn + (p + 1) * NR, nc2, sst + DQ_STAGE_BLOCKS * NR, wtimes);
              sp = sst;
              sps = DQ_STAGE_BLOCKS * NR;
            }
            if (dq8)
              s16_dq_1x16w8((size_t)nc1, (size_t)nc2, (size_t)kcp, kvs ? (size_t)kblk : 0, (const int16_t*)s->a, pw,
                            two ? pstride : 0, sp, two ? sps : 0, o, !first, first, v->B.dt);
            else if (rd16)
              s8_dq_1x16w4r((size_t)nc1, (size_t)nc2, (size_t)kcp, kvs ? (size_t)kblk : 0, aq, xs, pw,
                            two ? pstride : 0, sp, two ? sps : 0, o, !first, first, v->B.dt);
            else
              s16_dq_1x16w4((size_t)nc1, (size_t)nc2, (size_t)kcp, kvs ? (size_t)kblk : 0, aq, xs, pw,
                            two ? pstride : 0, sp, two ? sps : 0, o, !first, first, v->B.dt);
            if (!two) for (int32_t q = 0; q < NR; q++) out[q] = tmp[q];
          }
          continue;
        }
        for (int32_t p = 0; p < npan; p++) {
          const int32_t ncp = MIN(NR, sw - p * NR);
          const uint8_t* pw = bp + p * pstride;
          /* 1-2 rows (decode) take no read-ahead pass (tile_io.h TOUCH_MIN_ROWS): the hardware prefetcher
             streams the panel, and a pass over the next panel stalled on its misses instead */
          if (direct && mc > TOUCH_MIN_ROWS) touch_range(pw, pbytes);
          /* k ranges of the block: all of it, or (kvs) each weights-scale K block, folded after its sums */
          if (rdot && !kvs) { /* 1 s8 row x x4 codes on the relaxed dot: int32 sums */
            s8_rdot_1x8w4((size_t)kc, (size_t)kc, arow + k0, pw, 0, (int32_t*)cseg + p * NR, !first, 1, v->B.dt);
            continue;
          }
          if (dq_fast) { /* 1 row, this K block on block boundaries: fold in registers */
            const uint8_t* pbase = (const uint8_t*)v->wpacked + (size_t)(sn / NR + p) * v->wps;
            const float* sp = sst;
            if (dq_inplace) sp = (const float*)(pbase + v->wso) + (size_t)((v->k0 + k0) / kblk) * NR;
            else stage_dq_scales(&j->q[Q_WEI_SCALE], v, v->k0 + k0, dq_nblk, sn + p * NR, ncp, sst, wtimes);
            float* fc = s->b + FACC_OFFSET + t.seg_c[sg] + p * NR;
            if (rdot) s8_rdot_1x8w4((size_t)kc, (size_t)kblk, arow + k0, pw, sp, fc, 0, first, v->B.dt);
            else s16_dq_1x8((size_t)kcp, (size_t)kblk, (const int16_t*)s->a, pw, sp, fc, first, v->B.dt);
            continue;
          }
          /* (an empty group, kcp = 0, still runs the kernels once: they store its zeros) */
          int32_t y0 = 0, ylen;
          do {
            const int32_t kabs = v->k0 + k0 + y0;
            ylen = kvs ? MIN(kcp - y0, kblk - kabs % kblk) : kcp;
            const int acc = kvs ? kabs % kblk != 0 : !first;
            const uint8_t* py = pw + (size_t)y0 * (x8 ? NR : NR / 2);
            if (direct && mc > MR_INT) {
              /* Taller tiles: widen a piece of the panel once into L1 (s->b, free in direct mode), then the
                 int16 kernel for every 3 rows. Integer sums do not depend on the blocking. */
              for (int32_t y = 0; y < ylen; y += INT_PIECE) {
                const int32_t len = MIN(INT_PIECE, ylen - y);
                int16_t* blk = (int16_t*)s->b;
                if (x8) s16_unpack_w8(py + (size_t)y * NR, (size_t)len, v->B.dt, blk);
                else s16_unpack_w4(py + (size_t)y * (NR / 2), (size_t)len, v->B.dt, blk);
                for (int32_t i = 0; i < mc; i += MR_INT)
                  s16_gemm_3x8((size_t)MIN(MR_INT, mc - i), (size_t)ncp, (size_t)len, (const int16_t*)s->a + (size_t)i * KC + (size_t)(y0 + y) * MR_INT,
                               blk, (int32_t*)cseg + (size_t)i * ldc + p * NR, (size_t)ldc, acc || y > 0);
              }
            } else {
              for (int32_t i = 0; i < mc; i += MR_INT) {
                const size_t mr = (size_t)MIN(MR_INT, mc - i);
                const int16_t* ai = (const int16_t*)s->a + (size_t)i * KC + (size_t)y0 * MR_INT;
                int32_t* ci = (int32_t*)cseg + (size_t)i * ldc + p * NR;
                if (!direct) s16_gemm_3x8(mr, (size_t)ncp, (size_t)ylen, ai, (const int16_t*)pw, ci, (size_t)ldc, acc);
                else if (v->wfmt == WEI_X8_P8) s16_gemm_3x8w8(mr, (size_t)ncp, (size_t)ylen, ai, py, ci, (size_t)ldc, acc, v->B.dt);
                else s16_gemm_3x8w4(mr, (size_t)ncp, (size_t)ylen, ai, py, ci, (size_t)ldc, acc, v->B.dt);
              }
            }
            if (kvs && ((kabs + ylen) % kblk == 0 || (y0 + ylen == kcp && k0 + kc >= Kg))) {
              float bs[NR];
              stage_block_scales(&j->q[Q_WEI_SCALE], v, kabs, sn + p * NR, ncp, bs, wtimes);
              fold_block(s->b + FACC_OFFSET + t.seg_c[sg] + p * NR, (const int32_t*)cseg + p * NR, bs, mc, ldc, kabs - kabs % kblk == v->k0);
            }
            y0 += ylen;
          } while (y0 < kcp);
        }
      } else if (lowp && direct) {
        lowp_segment(j, v, sn, sw, s->a, KC, k0, kc, cseg, ldc, first, mc, w.dscale, w.dzp, s->b); /* staged by the epilogue later */
      } else {
        const float* bp;
        size_t pstride;
        if (direct && !lowp) {
          bp = (const float*)v->wpacked + ((size_t)(sn / NR) * v->Kfull + k0) * NR;
          pstride = (size_t)v->Kfull * NR;
        } else {
          pack_b_f32(j, v, &w, sn, sw, s->b, k0, kc);
          bp = s->b;
          pstride = (size_t)kc * NR;
        }
        for (int32_t p = 0; p < npan; p++) {
          const int32_t ncp = MIN(NR, sw - p * NR);
          if (direct && mc > TOUCH_MIN_ROWS) touch_range(bp + p * pstride, (size_t)kc * NR * sizeof(float));
          for (int32_t i = 0; i < mc; i += MR)
            f32_gemm_4x8((size_t)MIN(MR, mc - i), (size_t)ncp, (size_t)kc, s->a + (size_t)i * KC, bp + p * pstride,
                         cseg + (size_t)i * ldc + p * NR, (size_t)ldc, !first, 0);
        }
      }
    }
  }
  if (kvs) epilogue(j, v, &t, &w, s->b + FACC_OFFSET, 0, has_bias, 0, ssb != 0, 0, 0);
  else epilogue(j, v, &t, &w, s->c, is_int, has_bias, wsb != 0 || f4, ssb != 0, wzb != 0, comp);
}
