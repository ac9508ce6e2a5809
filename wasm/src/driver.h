/* Shared between the driver (gemm-driver.c: groups, tile space, the fast f32 path) and the fused
   paths (gemm-fused.c: any data type, scales, zero points, GLU, binary/eltwise/sum chains). */
#pragma once
#include "common.h"
#include "job.h"

INLINE int32_t cdiv(int32_t a, int32_t b) { return (a + b - 1) / b; }

/* A matrix operand of one group: element (i, j) is element off + i * s0 + j * s1 of base (type dt).
   A: (row, k); B: (k, n); C: (row, n). Elements, not bytes: 4-bit types have no byte address. */
typedef struct operand {
  const char* base;
  size_t off;
  int32_t s0, s1;
  int dt;
} operand_t;

/* Per-worker scratch (layout mirrored by scratchBytes() in src/runtime/job_layout.ts):
   offsets | a: (MB + MR) x max(KCF, kc_packed) f32 | b: KCF x NBC f32 | c: MB x NBC f32 | vec: 8 x NBC + 4 x MB f32,
   with NBC = NB + 16 (two GLU segments, each padded to a panel) and KCF = scratch_kcf(). */
typedef struct scratch {
  float* a;
  float* b;
  float* c;
  float* bias; /* NBC (fast path: NB) */
  float* vec;  /* the fused epilogue's per-column and per-row vectors (bias is its first NBC) */
  /* Which A block `a` holds (a_block_cached): consecutive tiles of a group share it, so packing is
     skipped. Reset per run_job call: the job's operands may have changed since the last one. */
  const char* a_base;
  const int32_t* a_rows;
  size_t a_off;
  int32_t a_g, a_m0, a_mc, a_k0, a_kc, a_ld;
  /* Whether the A block's row also sits in s16_dq_1x16w4's quad layout past its micro-panel (gemm-fused.c). */
  int32_t a_quad;
  /* Plain weights packed once per N-block (job.wcache_k): panels [nb/8][Kg][8] f32, and which block
     they hold (reset per run_job call, like the A block). */
  float* wcache;
  const char* w_base;
  size_t w_off;
  int32_t w_g, w_n0, w_nc, w_kg;
} scratch_t;

INLINE int32_t scratch_nbc(const job_t* j) { return j->nb + 16; }
/* KC in f32 units: the integer path's int16 A and B blocks with KC = 2x take the room of f32 ones. */
INLINE int32_t scratch_kcf(const job_t* j) { return j->path == PATH_INT ? j->kc / 2 : j->kc; }

/* Carves one worker's scratch starting at base; returns the bytes it spans. */
INLINE size_t scratch_setup(const job_t* j, char* base, scratch_t* s) {
  const size_t offs_bytes = ((size_t)(j->G + 1) * 4 + 63) & ~(size_t)63;
  const size_t nbc = (size_t)scratch_nbc(j), kcf = (size_t)scratch_kcf(j), mb = (size_t)j->mb;
  const size_t kca = MAX(kcf, (size_t)j->kc_packed);
  s->a = (float*)(base + offs_bytes);
  s->b = s->a + (mb + MR) * kca; /* + MR rows: the integer path's 3-row panels round mb up */
  s->c = s->b + kcf * nbc;
  s->bias = s->c + mb * nbc;
  s->vec = s->bias;
  s->a_base = 0;
  s->a_quad = 0;
  s->wcache = s->vec + 8 * nbc + 4 * mb;
  s->w_base = 0;
  return offs_bytes + 4 * ((mb + MR) * kca + kcf * nbc + mb * nbc + 8 * nbc + 4 * mb + (size_t)(j->wcache_k ? j->wcache_k + 4 : 0) * (size_t)j->nb);
}

/* The K block of a tile of mc rows that reads its weights straight from packed panels (`direct`;
   otherwise they are packed per tile into a kc x NB block and kc stays). Panels sit [panel][K][8]: a
   K block reads a piece of every panel of the tile, K x 32 bytes apart; at K = 2048 that is 64 KiB,
   the way size of a 1 MiB 16-way L2, so with kc = 256 the 16 pieces of 8 KiB all land in the same L2
   sets and evict each other (MoE shapes 20% slower, with the weights in cache or not). So K is taken
   whole, or in as few equal blocks as the A block (mb x kc_packed f32, per_f32 elements per f32)
   allows. Blocks stay even: the kernels take k in pairs, so results do not depend on the blocking,
   and an odd last block padded to a whole pair still fits its micro-panel (stride MR x KC). */
INLINE int32_t k_block(const job_t* j, int direct, int32_t mc, int32_t Kg, int32_t per_f32, int32_t mr) {
  const int64_t room = (int64_t)j->mb * j->kc_packed * per_f32;
  if (!direct || room <= (int64_t)j->mb * j->kc) return j->kc;
  const int32_t rows = cdiv(mc, mr) * mr;
  const int32_t cap = (int32_t)((room / rows) & ~(int64_t)1);
  if (Kg <= cap) return (MAX(Kg, 1) + 1) & ~1;
  return (cdiv(Kg, cdiv(Kg, cap)) + 1) & ~1;
}

/* A blocks are micro-panels of mr rows of 32-bit lanes (f32 with mr = MR; int16 k-pairs with mr =
   MR_INT): rows mr p.. at a + p * mr * ld, element (i, k) at [k * mr + i % mr]. */
INLINE size_t panel_index(int32_t i, int32_t k, size_t ld, int32_t mr) {
  return (size_t)(i / mr) * (size_t)mr * ld + (size_t)k * (size_t)mr + (size_t)(i % mr);
}

/* Stores n lanes of row i (x[0..n)) into that layout. */
INLINE void put_row_panel(void* a, size_t ld, int32_t mr, int32_t i, const void* x, int32_t n) {
  uint32_t* o = (uint32_t*)a + panel_index(i, 0, ld, mr);
  for (int32_t k = 0; k < n; k++) __builtin_memcpy(o + (size_t)k * mr, (const uint32_t*)x + k, 4);
}

/* Four rows of 32-bit data (f32, or int16 k-pairs) given by their addresses into one micro-panel, four
   k at a time (4x4 transposes). */
INLINE void put_panel4_rows(void* out, const uint32_t* x0, const uint32_t* x1, const uint32_t* x2, const uint32_t* x3,
                            int32_t kc) {
  uint32_t* o = (uint32_t*)out;
  int32_t k = 0;
  for (; k + 4 <= kc; k += 4) {
    const v128_t r0 = wasm_v128_load(x0 + k), r1 = wasm_v128_load(x1 + k);
    const v128_t r2 = wasm_v128_load(x2 + k), r3 = wasm_v128_load(x3 + k);
    const v128_t t0 = wasm_i32x4_shuffle(r0, r1, 0, 4, 1, 5), t1 = wasm_i32x4_shuffle(r2, r3, 0, 4, 1, 5);
    const v128_t t2 = wasm_i32x4_shuffle(r0, r1, 2, 6, 3, 7), t3 = wasm_i32x4_shuffle(r2, r3, 2, 6, 3, 7);
    wasm_v128_store(o + (size_t)k * MR, wasm_i64x2_shuffle(t0, t1, 0, 2));
    wasm_v128_store(o + (size_t)(k + 1) * MR, wasm_i64x2_shuffle(t0, t1, 1, 3));
    wasm_v128_store(o + (size_t)(k + 2) * MR, wasm_i64x2_shuffle(t2, t3, 0, 2));
    wasm_v128_store(o + (size_t)(k + 3) * MR, wasm_i64x2_shuffle(t2, t3, 1, 3));
  }
  for (; k < kc; k++) {
    o[(size_t)k * MR + 0] = x0[k];
    o[(size_t)k * MR + 1] = x1[k];
    o[(size_t)k * MR + 2] = x2[k];
    o[(size_t)k * MR + 3] = x3[k];
  }
}

/* Rows i..i+3 of 32-bit data with row stride ld into one micro-panel. */
INLINE void put_panel4(void* out, const void* in, size_t ld, int32_t kc) {
  const uint32_t* x = (const uint32_t*)in;
  put_panel4_rows(out, x, x + ld, x + 2 * ld, x + 3 * ld, kc);
}

/* Everything a tile needs to know about its group. */
typedef struct group_view {
  operand_t A, B, C;
  const void* wpacked; /* packed weights of this group, or 0 */
  int wfmt;            /* their format: WEI_F32_P8, WEI_X8_P8, WEI_X4_P8K2 or WEI_X16_P8 (WEI_PLAIN when wpacked is 0) */
  size_t wps;          /* x8 / x4 / x16 panels: bytes from one panel to the next (codes, embedded scales / zero points) */
  uint32_t wso, wzo;   /* byte offsets in a panel of the embedded scales / zero points (lowp_view_geom) */
  const char* bias;    /* bias buffer and this group's element offset */
  size_t bias_off;
  int32_t rows, Kg, Kfull, N;
  int32_t g;   /* expert index: weights, bias, their scales / zero points (= grp without an expert map) */
  int32_t grp; /* group index (dense batched: batch index): src / dst scales, zero points, binary src1 */
  int32_t r0; /* absolute row of the group's row 0 (scales, binary src1) */
  int32_t k0; /* absolute k of the group's k 0 (variable-K groups) */
  const int32_t* tix; /* MoE row maps from the group's row 0 (job.tok_idx + r0), or 0 */
  const int32_t* tks;
} group_view_t;

/* Zeros that a padding row of a gather reads (ZERO_ELEMS elements of any type, 4-bit included). */
#define ZERO_ELEMS 2048
extern const float zero_row[ZERO_ELEMS];

/* Row of src's logical tensor that routed row m of the group reads: the routed row itself, or in gather
   mode its token (-1: a padding row, which reads zeros). Scales and zero points of src use this row. */
INLINE int32_t src_row(const job_t* j, const group_view_t* v, int32_t m) { return j->gather ? v->tix[m] : v->r0 + m; }

/* Row of dst's logical tensor that routed row m writes: itself, or in scatter mode token * topk + slot
   (-1: a padding row, not written). Dst scales / zero points and binary post-op inputs use this row. */
INLINE int32_t dst_row(const job_t* j, const group_view_t* v, int32_t m) {
  if (!j->scatter_k) return v->r0 + m;
  const int32_t t = v->tix[m];
  return t < 0 ? -1 : t * j->scatter_k + v->tks[m];
}

/* Element offset of src row m's first element in A (A.off holds the group's row 0, or with a gather
   only the group's batch offset); SIZE_MAX for a padding row. */
INLINE size_t a_row_elem(const job_t* j, const group_view_t* v, int32_t m) {
  if (!j->gather) return v->A.off + (size_t)m * (size_t)v->A.s0;
  const int32_t r = v->tix[m];
  return r < 0 ? SIZE_MAX : v->A.off + (size_t)r * (size_t)v->A.s0;
}

/* Element offset of dst row m in C (same conventions); SIZE_MAX for a row not written. */
INLINE size_t c_row_elem(const job_t* j, const group_view_t* v, int32_t m) {
  if (!j->scatter_k) return v->C.off + (size_t)m * (size_t)v->C.s0;
  const int32_t r = dst_row(j, v, m);
  return r < 0 ? SIZE_MAX : v->C.off + (size_t)r * (size_t)v->C.s0;
}

/* The fused paths' tile: C[m0 : m0 + mc] x dst columns [n0, n0 + nc) (GEMM columns: twice as many with a GLU). */
void run_tile_fused(const job_t* j, scratch_t* s, const group_view_t* v, int32_t m0, int32_t mc, int32_t n0,
                    int32_t nc);

/* Plain float weights (f32/bf16/f16) of the tile's N-block [n0, n0 + nc) packed K whole into the
   worker's cache as panels [ceil(nc/8)][Kg][8] (pack-plain-f32.c), or 0 when the job has no cache,
   the weights are packed already or Kg does not fit. */
const float* plain_wcache(const job_t* j, scratch_t* s, const group_view_t* v, int32_t n0, int32_t nc);
/* Panel stride of that cache in floats: K x 8 plus 128 bytes, so that the packing's 16 store streams
   (one per panel) do not all map to the same L1/L2 sets (64 KiB apart at K = 2048; MoE-B abc 0.75 ->
   see README). The cache holds (wcache_k + 4) x nb floats. */
INLINE size_t wcache_stride(int32_t Kg) { return (size_t)Kg * NR + 32; }
/* Columns [n0, n0 + nc), k in [k0, k0 + kc) of the group's plain float weights as panels [ceil(nc/8)][kc][8]. */
void pack_plain_block(const group_view_t* v, int32_t k0, int32_t kc, int32_t n0, int32_t nc, float* out);
/* The same with panels ps floats apart (wcache_stride: a multiple of 4 KiB would put the packing's
   store streams in the same L1 sets) and no read-ahead: for whole weight rows (run_tile_rows). */
void pack_plain_panels(const group_view_t* v, int32_t k0, int32_t kc, int32_t n0, int32_t nc, size_t ps, float* out);

/* Packed low-precision weights (gemm-lowp.c): the tile segment's GEMM columns [sn, sn + sw) over
   k0 .. k0 + kc into C (ldc), decoded in the microkernels (f32_gemm_2x8w8 / w4) for 1-2 rows, or once
   per panel piece into `block` (256 x 8 floats) for f32_gemm_4x8 on taller tiles; zbuf / sbuf: 16
   floats of scratch each; k0 even. lowp_code_f32 / lowp_code_int: one weight (k, n) decoded (no zero
   point or scale). lowp_panel_bytes: bytes of one panel (K whole); the codes of k sit at k * 8 (x8) or
   (k / 2) * 8 (x4) inside it. */
void lowp_segment(const job_t* j, const group_view_t* v, int32_t sn, int32_t sw, const float* a, int32_t lda,
                  int32_t k0, int32_t kc, float* c, int32_t ldc, int first, int32_t mc, float* zbuf, float* sbuf,
                  float* block);
float lowp_code_f32(const group_view_t* v, int32_t k, int32_t n);
int32_t lowp_code_int(const group_view_t* v, int32_t k, int32_t n);
void lowp_emb_scales(float* out, const uint8_t* p, int dt, int32_t nblk, float times);
INLINE size_t lowp_panel_bytes(int wfmt, int32_t Kfull) {
  if (wfmt == WEI_X16_P8) return (size_t)Kfull * NR * 2; /* x16:p8: K unpadded (the kernels take a lone last k) */
  return (size_t)((Kfull + 1) & ~1) * (wfmt == WEI_X8_P8 ? NR : NR / 2);
}
/* Sets v->wps / wso / wzo of a group with x8 / x4 weights from its K and the job's embedded q args. */
void lowp_view_geom(const job_t* j, group_view_t* v);

INLINE int32_t dt_bits(int dt) {
  return dt == DT_F32 || dt == DT_S32 ? 32 : dt == DT_BF16 || dt == DT_F16 ? 16 : dt == DT_S4 || dt == DT_U4 || dt == DT_F4_E2M1 ? 4 : 8;
}

/* Weights scales / zero points embedded in the panels (q->emb): element index from v->wpacked (in
   q->dt elements, nibbles for 4-bit types) of the value for column n and (absolute) k. */
INLINE size_t emb_index(const qarg_t* q, const group_view_t* v, int32_t k, int32_t n) {
  const size_t byte = (size_t)(n / NR) * v->wps + (q->emb == 1 ? v->wso : v->wzo);
  return byte * 8 / (size_t)dt_bits(q->dt) + (q->st_k ? (size_t)(k / q->blk_k) * NR : 0) + (size_t)(n % NR);
}

/* Whether s->a already holds this A block (the worker's previous tile packed it); records it if not,
   assuming the caller packs it next. The group (v->grp, not its expert) is part of the key: groups may
   share src rows (P#3 experts given the same memory) but fold different src scales or zero points into
   the packed block. So is the group's row map (v->tix, from its first row): gathered groups share base
   and offset. */
INLINE int a_block_cached(scratch_t* s, int32_t g, const int32_t* rows, const char* base, size_t off, int32_t m0,
                          int32_t mc, int32_t k0, int32_t kc, int32_t ld) {
  if (s->a_base == base && s->a_g == g && s->a_rows == rows && s->a_off == off && s->a_m0 == m0 && s->a_mc == mc &&
      s->a_k0 == k0 && s->a_kc == kc && s->a_ld == ld)
    return 1;
  s->a_base = base;
  s->a_rows = rows;
  s->a_g = g;
  s->a_off = off;
  s->a_m0 = m0;
  s->a_mc = mc;
  s->a_k0 = k0;
  s->a_kc = kc;
  s->a_ld = ld;
  return 0;
}
