/* Weights packing as an op job on the workers (issue 19): the reorders into f32:p8 / f32:p8t
   (src/memory/packed_weights.ts: the layouts and their TypeScript packers), x8:p8 / x4:p8k2 and x16:p8, and a
   plain byte copy (the streaming rate the bench compares them with). Tiles are blocks of PB panels x KB
   k of one group (the shapes below): a tile reads KB rows of PB x 8 columns, one panel after the other,
   and writes one contiguous run; K above KB takes K blocks one after the other, each block's strips in
   a row. x8 / x4 tiles of row-major sources store 16 bytes at a time (two k of two x8 panels, two k
   pairs of four x4 panels), not 8. Every output byte belongs to one tile, and the bytes are the
   single-threaded packers' (tests compare them), so the thread count changes nothing. */
#include "op_job.h"
#include "common.h"
#include "lowp.h"
#include "driver.h"

typedef struct pack_job {
  op_head_t h;
  /* 32 */ uint32_t src, dst;
  int32_t fmt, dt; /* fmt PACK_*; dt: the f32 panels' source type (DT_F32 / DT_BF16 / DT_F16) */
  /* 48 */ int32_t G, K, N, sg;
  /* 64 */ int32_t sk, sn, ps, pad; /* element strides; ps: bytes per x8 / x4 panel; copy: N bytes */
  /* 80: `+q` values beside the panels, per-column ones with one byte size (the host writes any other
     kind): qsrc 0 = none; value (g, K block b, n) at qsrc + (g qsg + b qsb + n) qbytes; the section of
     qnkb x 8 values at byte qoff of each panel, zero padded to 16; columns past N get the code qpad */
  uint32_t qsrc;
  int32_t qoff, qbytes, qnkb;
  /* 96 */ int32_t qsg, qsb, qpad, pad1;
} pack_job_t;
_Static_assert(sizeof(pack_job_t) == 112, "pack_job_t layout changed: update src/primitives/reorder/pack_job.ts");

/* The `+q` section of panel p of group g (every K block's 8 values, stored bits copied). */
static void panel_values(const pack_job_t* j, int32_t g, int32_t p, uint8_t* panel) {
  uint8_t* o = panel + j->qoff;
  const size_t vb = (size_t)j->qbytes, run = NR * vb;
  const uint8_t* v = (const uint8_t*)(uintptr_t)j->qsrc + ((size_t)g * (size_t)j->qsg + (size_t)p * NR) * vb;
  const size_t step = (size_t)j->qsb * vb;
  const int32_t nkb = j->qnkb;
  if (p * NR + NR <= j->N && (vb == 4 || vb == 2 || vb == 1)) {
    /* whole panels: one 8-value run per K block in v128 moves (a memcpy of a runtime size is a
       memory.copy, which V8 calls out of line: at k32 f32 scales the reorder took 3.0x the copy, 1.6x with these) */
    int32_t b = 0;
    if (vb == 4)
      for (; b < nkb; b++, o += run, v += step) {
        wasm_v128_store(o, wasm_v128_load(v));
        wasm_v128_store(o + 16, wasm_v128_load(v + 16));
      }
    else if (vb == 2)
      for (; b < nkb; b++, o += run, v += step) wasm_v128_store(o, wasm_v128_load(v));
    else
      for (; b < nkb; b++, o += run, v += step) wasm_v128_store64_lane(o, wasm_v128_load64_zero(v), 0);
  } else {
    for (int32_t b = 0; b < nkb; b++, o += run, v += step) {
      if (p * NR + NR <= j->N) __builtin_memcpy(o, v, run);
      else
        for (int32_t q = 0; q < NR; q++)
          for (size_t x = 0; x < vb; x++) o[(size_t)q * vb + x] = p * NR + q < j->N ? v[(size_t)q * vb + x] : (uint8_t)((uint32_t)j->qpad >> (8 * x));
    }
  }
  for (size_t x = (size_t)j->qnkb * run; x % 16; x++) panel[j->qoff + x] = 0;
}

enum { PACK_F32 = 0, PACK_X8 = 1, PACK_X4 = 2, PACK_COPY = 3, PACK_X16 = 4 };
/* Tile shapes per format: PB panels are one 64-byte column strip of row-major source rows (2 f32
   panels of 32 bytes a row, 8 x8 panels of 8, 16 x4 panels of 4), KB k tall. A tile then writes one
   contiguous run (its panels are adjacent in the output: PB x KB x the panel's row bytes, 64-128 KiB),
   and every source line it reads belongs to it alone, so two threads never pull the same line into
   both cores' caches. Measured on 92 MB sources (bench --mode=reorder, 1 / 2 threads, Node 20, AMD EPYC),
   x the plain copy: 16 panels x 64-128 k tiles gave f32 1.9-2.2 / 1.6-1.7, x8 2.1-2.9 / 1.8-2.3,
   x4 2.2-2.5 / 2.0-2.4; these f32 1.3-1.5 / 1.2-1.4, x8 1.8 / 1.6, x4 1.6 / 1.6: the writes, not the
   strided reads, were what cost (the copy writes one stream). */
enum { PB_F32 = 2, KB_F32 = 2048, PB_X8 = 8, KB_X8 = 1024, PB_X4 = 16, KB_X4 = 1024, COPY_TILE = 65536 };
/* x16:p8: 4 panels of 16 bytes a row are the 64-byte strip, as above (not measured apart: the f32 shape's
   reasoning, half the bytes per k). */
enum { PB_X16 = 4, KB_X16 = 2048 };

/* f32 panels (8 columns, K x 8 floats each, panel p of group g at out + (g npan + p) K 8). */
static void tile_f32(const pack_job_t* j, int32_t g, int32_t p0, int32_t np, int32_t k0, int32_t kc) {
  const int32_t npan = cdiv(j->N, NR);
  const char* w = (const char*)(uintptr_t)j->src;
  for (int32_t p = p0; p < p0 + np; p++) {
    float* o = (float*)(uintptr_t)j->dst + (((size_t)g * npan + p) * (size_t)j->K + (size_t)k0) * NR;
    const size_t base = (size_t)g * (size_t)j->sg + (size_t)(p * NR) * (size_t)j->sn;
    if (j->dt == DT_F32 && j->sn == 1 && p * NR + NR <= j->N) { /* rows contiguous along n: two loads per k */
      const float* r = (const float*)w + base + (size_t)k0 * (size_t)j->sk;
      for (int32_t k = 0; k < kc; k++, r += j->sk, o += NR) {
        wasm_v128_store(o, wasm_v128_load(r));
        wasm_v128_store(o + 4, wasm_v128_load(r + 4));
      }
    } else if (j->dt == DT_F32 && j->sk == 1 && p * NR + NR <= j->N && kc % 4 == 0) {
      /* columns contiguous along k (f32:p8t of row-major weights): 8 rows, 4 k at a time, 4x4 transposes */
      const float* r = (const float*)w + base + (size_t)k0;
      const size_t sn = (size_t)j->sn;
      for (int32_t k = 0; k < kc; k += 4, o += 4 * NR) {
        for (int h = 0; h < 2; h++) {
          const float* q = r + (size_t)(4 * h) * sn + k;
          const v128_t a = wasm_v128_load(q), b = wasm_v128_load(q + sn), c = wasm_v128_load(q + 2 * sn), d = wasm_v128_load(q + 3 * sn);
          const v128_t ab0 = wasm_i32x4_shuffle(a, b, 0, 4, 1, 5), ab1 = wasm_i32x4_shuffle(a, b, 2, 6, 3, 7);
          const v128_t cd0 = wasm_i32x4_shuffle(c, d, 0, 4, 1, 5), cd1 = wasm_i32x4_shuffle(c, d, 2, 6, 3, 7);
          wasm_v128_store(o + 4 * h, wasm_i64x2_shuffle(ab0, cd0, 0, 2));
          wasm_v128_store(o + NR + 4 * h, wasm_i64x2_shuffle(ab0, cd0, 1, 3));
          wasm_v128_store(o + 2 * NR + 4 * h, wasm_i64x2_shuffle(ab1, cd1, 0, 2));
          wasm_v128_store(o + 3 * NR + 4 * h, wasm_i64x2_shuffle(ab1, cd1, 1, 3));
        }
      }
    } else {
      for (int32_t k = k0; k < k0 + kc; k++, o += NR)
        for (int32_t q = 0; q < NR; q++) {
          const int32_t n = p * NR + q;
          o[q] = n < j->N ? load_elem(w, j->dt, (size_t)g * (size_t)j->sg + (size_t)k * (size_t)j->sk + (size_t)n * (size_t)j->sn) : 0.0f;
        }
    }
  }
}

/* x8:p8 panels: k rows k0 .. k0 + kc of the Kp (K rounded up to even, zero padded) x 8 codes. The job's
   fields are read into locals first: byte stores may alias them, which would reload them per k. */
static void tile_x8(const pack_job_t* j, int32_t g, int32_t p0, int32_t np, int32_t k0, int32_t kc) {
  const int32_t npan = cdiv(j->N, NR), K = j->K, N = j->N;
  const size_t sk = (size_t)j->sk, sn = (size_t)j->sn, ps = (size_t)j->ps;
  const uint8_t* w = (const uint8_t*)(uintptr_t)j->src + (size_t)g * (size_t)j->sg;
  uint8_t* out = (uint8_t*)(uintptr_t)j->dst + (size_t)g * npan * ps;
  const int32_t kend = MIN(k0 + kc, K);
  int32_t p = p0;
  /* Row-major sources, two whole panels at a time: 16 bytes of rows k and k + 1 give both panels'
     16 bytes of the k pair (a load, a shuffle and a store per 16 bytes, not per 8). */
  if (sn == 1)
    for (; p + 2 <= p0 + np && p * NR + 2 * NR <= N; p += 2) {
      uint8_t* o = out + (size_t)p * ps + (size_t)k0 * NR;
      const uint8_t* r = w + (size_t)(p * NR) + (size_t)k0 * sk;
      int32_t k = k0;
      for (; k + 2 <= kend; k += 2, o += 2 * NR, r += 2 * sk) {
        const v128_t a = wasm_v128_load(r), b = wasm_v128_load(r + sk);
        wasm_v128_store(o, wasm_i64x2_shuffle(a, b, 0, 2));
        wasm_v128_store(o + ps, wasm_i64x2_shuffle(a, b, 1, 3));
      }
      for (; k < k0 + kc; k++, o += NR, r += sk) {
        const v128_t a = k < K ? wasm_v128_load(r) : wasm_i8x16_splat(0);
        wasm_v128_store64_lane(o, a, 0);
        wasm_v128_store64_lane(o + ps, a, 1);
      }
    }
  for (; p < p0 + np; p++) {
    uint8_t* o = out + (size_t)p * ps + (size_t)k0 * NR;
    const uint8_t* r = w + (size_t)(p * NR) * sn + (size_t)k0 * sk;
    int32_t k = k0;
    if (sn == 1 && p * NR + NR <= N)
      for (; k < kend; k++, o += NR, r += sk) wasm_v128_store64_lane(o, wasm_v128_load64_zero(r), 0);
    for (; k < k0 + kc; k++, o += NR, r += sk)
      for (int32_t q = 0; q < NR; q++) o[q] = p * NR + q < N && k < K ? r[(size_t)q * sn] : 0;
  }
}

/* x16:p8 panels (bf16 / f16 codes copied as stored, K x 8 uint16 each, no K padding). Row-major sources
   with whole panels: k outer, so each 64-byte strip of a source row is read once and its 16-byte pieces go
   to the tile's panels (panel-outer reads re-fetched every strip line once per panel: 2.1-2.6x a copy). */
static void tile_x16(const pack_job_t* j, int32_t g, int32_t p0, int32_t np, int32_t k0, int32_t kc) {
  const int32_t npan = cdiv(j->N, NR), N = j->N; /* locals: stores may alias the job */
  const size_t sk = (size_t)j->sk, sn = (size_t)j->sn, ps = (size_t)j->ps;
  const uint16_t* w = (const uint16_t*)(uintptr_t)j->src + (size_t)g * (size_t)j->sg;
  uint8_t* out = (uint8_t*)(uintptr_t)j->dst + (size_t)g * npan * ps + (size_t)k0 * NR * 2;
  int32_t p = p0;
  if (sn == 1 && np == PB_X16 && (p0 + PB_X16) * NR <= N) {
    const uint16_t* r = w + (size_t)(p0 * NR) + (size_t)k0 * sk;
    uint8_t* o = out + (size_t)p0 * ps;
    for (int32_t k = 0; k < kc; k++, o += NR * 2, r += sk) {
      const v128_t a = wasm_v128_load(r), b = wasm_v128_load(r + NR), c = wasm_v128_load(r + 2 * NR), d = wasm_v128_load(r + 3 * NR);
      wasm_v128_store(o, a);
      wasm_v128_store(o + ps, b);
      wasm_v128_store(o + 2 * ps, c);
      wasm_v128_store(o + 3 * ps, d);
    }
    p += PB_X16;
  }
  for (; p < p0 + np; p++) {
    uint16_t* o = (uint16_t*)(out + (size_t)p * ps);
    const uint16_t* r = w + (size_t)(p * NR) * sn + (size_t)k0 * sk;
    if (sn == 1 && p * NR + NR <= N)
      for (int32_t k = 0; k < kc; k++, o += NR, r += sk) wasm_v128_store(o, wasm_v128_load(r));
    else
      for (int32_t k = 0; k < kc; k++, o += NR, r += sk)
        for (int32_t q = 0; q < NR; q++) o[q] = p * NR + q < N ? r[(size_t)q * sn] : 0;
  }
}

/* 16 bytes of rows k (b) and k + 1 (c) of a row-major 4-bit source (32 codes each, even n in the low
   nibbles) as the k pair's bytes of 4 panels: lo = panels 0-1, hi = panels 2-3, 8 bytes each. */
static inline void x4_pair(v128_t b, v128_t c, v128_t* lo, v128_t* hi) {
  const v128_t m = wasm_i8x16_splat(0x0f);
  /* even columns: low nibbles of b | low nibbles of c << 4; odd: high nibbles of b | those of c */
  const v128_t e = wasm_v128_or(wasm_v128_and(b, m), wasm_i16x8_shl(wasm_v128_and(c, m), 4));
  const v128_t od = wasm_v128_or(wasm_v128_and(wasm_u16x8_shr(b, 4), m), wasm_v128_andnot(c, m));
  *lo = wasm_i8x16_shuffle(e, od, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  *hi = wasm_i8x16_shuffle(e, od, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
}

/* x4:p8k2 panels: k-pairs of rows k0 .. k0 + kc (k0, kc even); byte q of pair t = code(2t, q) |
   code(2t + 1, q) << 4. Row-major 4-bit sources (sn = 1, rows on whole bytes) take 4 panels per step:
   16 bytes of rows k and k + 1 (32 codes each, even n in the low nibbles) give the 4 panels' 32 bytes. */
static void tile_x4(const pack_job_t* j, int32_t g, int32_t p0, int32_t np, int32_t k0, int32_t kc) {
  const int32_t npan = cdiv(j->N, NR), K = j->K, N = j->N; /* locals: byte stores may alias the job */
  const size_t ps = (size_t)j->ps, sk = (size_t)j->sk;
  const uint8_t* w = (const uint8_t*)(uintptr_t)j->src;
  const int rowbytes = j->sn == 1 && j->sk % 2 == 0 && j->sg % 2 == 0;
  int32_t p = p0;
  if (rowbytes)
    for (; p + 4 <= p0 + np && p * NR + 4 * NR <= N; p += 4) {
      uint8_t* o = (uint8_t*)(uintptr_t)j->dst + ((size_t)g * npan + p) * ps + (size_t)(k0 / 2) * NR;
      const uint8_t* r = w + ((size_t)g * (size_t)j->sg + (size_t)(p * NR)) / 2 + (size_t)k0 * sk / 2;
      int32_t k = k0;
      /* two k pairs (four rows) per step: each panel's 16 bytes of them in one store */
      for (; k + 4 <= k0 + kc && k + 4 <= K; k += 4, o += 2 * NR, r += 2 * sk) {
        v128_t lo0, hi0, lo1, hi1;
        x4_pair(wasm_v128_load(r), wasm_v128_load(r + sk / 2), &lo0, &hi0);
        x4_pair(wasm_v128_load(r + sk), wasm_v128_load(r + sk + sk / 2), &lo1, &hi1);
        wasm_v128_store(o, wasm_i64x2_shuffle(lo0, lo1, 0, 2));
        wasm_v128_store(o + ps, wasm_i64x2_shuffle(lo0, lo1, 1, 3));
        wasm_v128_store(o + 2 * ps, wasm_i64x2_shuffle(hi0, hi1, 0, 2));
        wasm_v128_store(o + 3 * ps, wasm_i64x2_shuffle(hi0, hi1, 1, 3));
      }
      for (; k < k0 + kc; k += 2, o += NR, r += sk) {
        v128_t lo, hi; /* k < K: k even, below Kp */
        x4_pair(wasm_v128_load(r), k + 1 < K ? wasm_v128_load(r + sk / 2) : wasm_i8x16_splat(0), &lo, &hi);
        wasm_v128_store64_lane(o, lo, 0);
        wasm_v128_store64_lane(o + ps, lo, 1);
        wasm_v128_store64_lane(o + 2 * ps, hi, 0);
        wasm_v128_store64_lane(o + 3 * ps, hi, 1);
      }
    }
  for (; p < p0 + np; p++) {
    uint8_t* o = (uint8_t*)(uintptr_t)j->dst + ((size_t)g * npan + p) * (size_t)j->ps + (size_t)(k0 / 2) * NR;
    for (int32_t k = k0; k < k0 + kc; k += 2, o += NR)
      for (int32_t q = 0; q < NR; q++) {
        const int32_t n = p * NR + q;
        const size_t i = (size_t)g * (size_t)j->sg + (size_t)k * (size_t)j->sk + (size_t)n * (size_t)j->sn;
        const uint32_t lo = n < j->N && k < j->K ? nibble(w, i) : 0, hi = n < j->N && k + 1 < j->K ? nibble(w, i + (size_t)j->sk) : 0;
        o[q] = (uint8_t)(lo | hi << 4);
      }
  }
}

int run_pack_weights(op_head_t* h) {
  pack_job_t* j = (pack_job_t*)h;
  int done = 0;
  if (j->fmt == PACK_COPY) { /* N bytes, tiles of COPY_TILE */
    for (int32_t t; (int64_t)(t = op_next_tile(h)) * COPY_TILE < j->N; done++) {
      const int32_t b0 = t * COPY_TILE, n = MIN(COPY_TILE, j->N - b0);
      __builtin_memcpy((char*)(uintptr_t)j->dst + b0, (const char*)(uintptr_t)j->src + b0, (size_t)n);
    }
    return done;
  }
  const int32_t npan = cdiv(j->N, NR), Kp = j->fmt == PACK_F32 || j->fmt == PACK_X16 ? j->K : (j->K + 1) & ~1;
  const int32_t kb = j->fmt == PACK_F32 ? KB_F32 : j->fmt == PACK_X8 ? KB_X8 : j->fmt == PACK_X16 ? KB_X16 : KB_X4; /* even (x4 pairs) */
  const int32_t pbs = j->fmt == PACK_F32 ? PB_F32 : j->fmt == PACK_X8 ? PB_X8 : j->fmt == PACK_X16 ? PB_X16 : PB_X4;
  const int32_t pblocks = cdiv(npan, pbs), kblocks = MAX(cdiv(Kp, kb), 1), per_g = pblocks * kblocks;
  for (int32_t t; (t = op_next_tile(h)) < j->G * per_g; done++) {
    /* K blocks outer, panel blocks inner (K above KB): consecutive tiles take the strips of one band of rows. */
    const int32_t g = t / per_g, r = t % per_g, kk = r / pblocks, pb = r % pblocks;
    const int32_t p0 = pb * pbs, np = MIN(pbs, npan - p0), k0 = kk * kb, kc = MIN(kb, Kp - k0);
    if (j->fmt == PACK_F32) tile_f32(j, g, p0, np, k0, kc);
    else if (j->fmt == PACK_X8) tile_x8(j, g, p0, np, k0, kc);
    else if (j->fmt == PACK_X16) tile_x16(j, g, p0, np, k0, kc);
    else tile_x4(j, g, p0, np, k0, kc);
    if ((j->fmt == PACK_X8 || j->fmt == PACK_X4) && k0 + kc == Kp) { /* the codes' zero padding to 16 bytes, inside the panel */
      const size_t cb = (size_t)Kp * (j->fmt == PACK_X4 ? NR / 2 : NR);
      for (int32_t p = p0; p < p0 + np; p++) {
        uint8_t* o = (uint8_t*)(uintptr_t)j->dst + ((size_t)g * npan + p) * (size_t)j->ps;
        for (size_t b = cb; b < ((cb + 15) & ~(size_t)15) && b < (size_t)j->ps; b++) o[b] = 0;
        if (j->qsrc) panel_values(j, g, p, o);
      }
    }
  }
  return done;
}
