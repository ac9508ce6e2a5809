/* The grouped GEMM driver run by every worker: validate the runtime offsets (before touching any row),
   turn them into a tile space (group x N-block x M-block), take tiles from one atomic counter, and run
   each tile with K blocking on the f32 microkernel (path F32) or through the fused paths
   (gemm-fused.c). Every tile is computed by exactly one worker with the same accumulation order
   whatever the thread count, so results are bitwise reproducible. */
#include "common.h"
#include "job.h"
#include "ukernel.h"
#include "driver.h"
#include "lowp.h"
#include "tile_io.h"
#include "op_job.h"
#include "dglu.h"

INLINE size_t esz(int dt) { return dt == DT_F32 ? 4 : 2; }

#ifndef ROW_CHUNK_MAX
#define ROW_CHUNK_MAX 128
#endif

static void set_error(job_t* j, int code, int32_t idx, int32_t a, int32_t b) {
  j->err_index = idx;
  j->err_a = a;
  j->err_b = b;
  __atomic_store_n(&j->status, code, __ATOMIC_SEQ_CST);
}

/* Copies the group-defining buffer into private scratch and checks it; only worker 0 reports (all
   workers reach the same verdict). Offsets modes: G+1 offsets. Pointer mode: G row counts. */
static int load_groups(job_t* j, int32_t* o, int tid) {
  const int32_t* src = (const int32_t*)(uintptr_t)j->offs;
  const int G = j->G;
  int code = ERR_NONE;
  int32_t idx = 0, a = 0, b = 0;
  if (j->group_mode == GROUPS_POINTERS) {
    const group_rec_t* t = (const group_rec_t*)(uintptr_t)j->groups;
    for (int i = 0; i < G; i++) o[i] = src[i];
    for (int i = 0; !code && i < G; i++) {
      if (o[i] < 0) { code = ERR_DIMS_NEGATIVE; idx = i; a = o[i]; }
      else if ((uint32_t)o[i] > t[i].max_rows) { code = ERR_DIMS_CAPACITY; idx = i; a = o[i]; b = (int32_t)t[i].max_rows; }
    }
    if (code && tid == 0) set_error(j, code, idx, a, b);
    return code;
  }
  if (j->group_mode == GROUPS_UNIFORM) { /* batched format: valid rows per batch, at most M each */
    const int32_t* c = (const int32_t*)(uintptr_t)j->counts;
    for (int i = 0; i < G; i++) o[i] = c[i];
    for (int i = 0; !code && i < G; i++) {
      if (o[i] < 0) { code = ERR_DIMS_NEGATIVE; idx = i; a = o[i]; }
      else if (o[i] > j->M) { code = ERR_DIMS_CAPACITY; idx = i; a = o[i]; b = j->M; }
    }
    if (code && tid == 0) set_error(j, code, idx, a, b);
    return code;
  }
  for (int i = 0; i <= G; i++) o[i] = src[i];
  if (o[0] < 0 || (o[0] != 0 && !j->zero_fill)) { code = ERR_OFFS_FIRST; a = o[0]; }
  for (int i = 1; !code && i <= G; i++)
    if (o[i] < o[i - 1]) { code = ERR_OFFS_DECREASING; idx = i; a = o[i]; b = o[i - 1]; }
  if (!code && o[G] > j->total) { code = ERR_OFFS_TOTAL; idx = G; a = o[G]; b = j->total; }
  if (!code && j->sizes) {
    const int32_t* sz = (const int32_t*)(uintptr_t)j->sizes;
    for (int i = 0; !code && i < G; i++)
      if (o[i + 1] - o[i] != sz[i]) { code = ERR_OFFS_SIZES; idx = i; a = o[i + 1] - o[i]; b = sz[i]; }
  }
  if (!code && j->offs2 && j->offs2 != j->offs) {
    const int32_t* o2 = (const int32_t*)(uintptr_t)j->offs2;
    for (int i = 0; !code && i <= G; i++)
      if (o2[i] != o[i]) { code = ERR_OFFS_MISMATCH; idx = i; a = o2[i]; b = o[i]; }
  }
  if (!code && j->expert_of) {
    const int32_t* e = (const int32_t*)(uintptr_t)j->expert_of;
    for (int i = 0; !code && i < G; i++)
      if (e[i] < 0 || e[i] >= j->experts) { code = ERR_EXPERT_MAP; idx = i; a = e[i]; b = j->experts; }
  }
  if (code && tid == 0) set_error(j, code, idx, a, b);
  return code;
}

/* Bytes of one dst element (the kernels' dst types are whole bytes). */
INLINE size_t dst_bytes(int dt) {
  return dt == DT_F32 || dt == DT_S32 ? 4 : dt == DT_BF16 || dt == DT_F16 ? 2 : 1;
}

/* zero_fill: dst rows in no group, [0, offs[0]) and [offs[G], M), all dst columns set to 0. */
static void zero_ungrouped_rows(const job_t* j, const int32_t* o) {
  char* dst = (char*)(uintptr_t)j->dst;
  const size_t es = dst_bytes(j->dt_dst);
  const int32_t cols = j->glu_alg ? j->N / 2 : (j->n_po > 0 && j->po[0].kind == PO_DGLU) ? 2 * j->N : j->N;
  for (int part = 0; part < 2; part++) {
    const int32_t r0 = part ? o[j->G] : 0, r1 = part ? j->M : o[0];
    for (int32_t r = r0; r < r1; r++) {
      if (j->d_1 == 1) {
        __builtin_memset(dst + (size_t)r * (size_t)j->d_0 * es, 0, (size_t)cols * es);
      } else {
        for (int32_t n = 0; n < cols; n++) __builtin_memset(dst + ((size_t)r * (size_t)j->d_0 + (size_t)n * (size_t)j->d_1) * es, 0, es);
      }
    }
  }
}

const float zero_row[ZERO_ELEMS];

/* Validates the MoE row maps of the routed rows [0, offs[G]) before any row is read or written (every
   worker reaches the same verdict; worker 0 reports): token indices in range, slots in range, padding
   rows without a slot, and in scatter mode no dst row written twice (a bitmap in `seen`). */
static int check_row_maps(job_t* j, const int32_t* o, uint8_t* seen, int tid) {
  const int32_t rows = j->group_mode == GROUPS_OFFSETS ? o[j->G] : 0;
  const int32_t* ti = (const int32_t*)(uintptr_t)j->tok_idx;
  const int32_t* ks = (const int32_t*)(uintptr_t)j->tok_ks;
  const int32_t k = j->scatter_k;
  const int32_t tokens = k ? j->dst_rows / k : j->src_rows;
  int code = ERR_NONE;
  int32_t idx = 0, a = 0, b = 0;
  if (k) __builtin_memset(seen, 0, (size_t)j->seen_bytes);
  for (int32_t r = 0; !code && r < rows; r++) {
    const int32_t t = ti[r];
    if (t < -1 || t >= tokens || (j->gather && t >= j->src_rows)) { code = ERR_ROW_INDEX; idx = r; a = t; b = j->gather ? MIN(tokens, j->src_rows) : tokens; }
    else if (k && t < 0 && ks[r] != -1) { code = ERR_ROW_SLOT; idx = r; a = ks[r]; b = -1; }
    else if (k && t >= 0 && (ks[r] < 0 || ks[r] >= k)) { code = ERR_ROW_SLOT; idx = r; a = ks[r]; b = k; }
    else if (k && t >= 0) {
      const int32_t d = t * k + ks[r];
      if (seen[d >> 3] & (1u << (d & 7))) { code = ERR_ROW_DUPLICATE; idx = r; a = t; b = ks[r]; }
      seen[d >> 3] |= (uint8_t)(1u << (d & 7));
    }
  }
  if (code && tid == 0) set_error(j, code, idx, a, b);
  return code;
}

/* The group's bias for columns [n0, n0 + nc) as f32 into out, zero padded to whole panels. */
static const float* load_bias_block(const job_t* j, const group_view_t* v, int32_t n0, int32_t nc, float* out) {
  for (int32_t n = 0; n < cdiv(nc, NR) * NR; n++)
    out[n] = n < nc ? load_elem(v->bias, j->b_dt, v->bias_off + (size_t)(n0 + n) * j->b_n) : 0.0f;
  return out;
}

/* The tile's A block [m0, m0 + mc) x [k0, k0 + kc) into s->a as 4-row micro-panels of stride lda: the
   kernel then reads one A stream, and rows of the user's matrix, K floats apart, no longer alias the
   same L1 sets. Skipped when the worker's previous tile left exactly this block. */
static void load_a_block(const job_t* j, scratch_t* s, const group_view_t* v, int32_t m0, int32_t mc, int32_t k0,
                         int32_t kc, size_t lda) {
  const operand_t A = v->A;
  if (a_block_cached(s, v->grp, v->tix, A.base, A.off, m0, mc, k0, kc, (int32_t)lda)) {
    /* the previous tile of this worker left exactly this block in s->a */
  } else if (A.dt == DT_F32 && A.s1 == 1) {
#define AROW(i) (a_row_elem(j, v, m0 + (i)) == SIZE_MAX ? (const uint32_t*)zero_row \
               : (const uint32_t*)A.base + a_row_elem(j, v, m0 + (i)) + k0)
    int32_t i = 0;
    for (; i + MR <= mc; i += MR) put_panel4_rows(s->a + (size_t)i * lda, AROW(i), AROW(i + 1), AROW(i + 2), AROW(i + 3), kc);
    for (; i < mc; i++) put_row_panel(s->a, lda, MR, i, AROW(i), kc);
#undef AROW
  } else if (A.dt == DT_F32 && A.s0 == 1 && !j->gather) {
    /* Transposed A (weight gradient: A = src^T, so A's rows are src's columns): four rows of a
       micro-panel at one k are four adjacent floats of one src row, a single v128 copy. */
    const float* at = (const float*)A.base + A.off + (size_t)m0;
    int32_t i = 0;
    for (; i + MR <= mc; i += MR) {
      float* o = s->a + (size_t)i * lda;
      for (int32_t k = 0; k < kc; k++) wasm_v128_store(o + (size_t)k * MR, wasm_v128_load(at + (size_t)(k0 + k) * A.s1 + i));
    }
    for (; i < mc; i++)
      for (int32_t k = 0; k < kc; k++) s->a[panel_index(i, k, lda, MR)] = at[(size_t)(k0 + k) * A.s1 + i];
  } else {
    for (int32_t i = 0; i < mc; i++) {
      const size_t arow = a_row_elem(j, v, m0 + i);
      for (int32_t k = 0; k < kc; k++)
        s->a[panel_index(i, k, lda, MR)] = arow == SIZE_MAX ? 0.0f : load_elem(A.base, A.dt, arow + (size_t)(k0 + k) * A.s1);
    }
  }
}

/* x16:p8 weights, 1-2 rows (decode): columns [n0, n0 + nc) over [k0, k0 + kc) of the panels into C (+)=, the
   codes converted in registers; at the last K block (epi) the in-register epilogue of f32_gemm_4x8 follows as a
   call of no k on the stored sums: f32 values stored and reloaded, so the bits are those of one call. */
static void x16_tile_rows(const group_view_t* v, int32_t mc, int32_t n0, int32_t nc, int32_t k0, int32_t kc, const float* a,
                          float* c, size_t ldc, int accumulate, epilogue_t* epi, const float* biasv) {
  const int32_t npan = cdiv(nc, NR);
  for (int32_t p = 0, np; p < npan; p += np) {
    np = mc == 1 && p + 1 < npan ? 2 : 1;
    const int32_t ncp = MIN(NR * np, nc - p * NR);
    const uint16_t* pw = (const uint16_t*)((const uint8_t*)v->wpacked + (size_t)(n0 / NR + p) * v->wps) + (size_t)k0 * NR;
    if (np == 2) f32_gemm_1x16wx16(NR, (size_t)(ncp - NR), (size_t)k0, (size_t)kc, a, pw, v->wps, c + p * NR, accumulate, v->B.dt);
    else f32_gemm_2x8wx16((size_t)mc, (size_t)ncp, (size_t)k0, (size_t)kc, a, pw, c + p * NR, ldc, accumulate, v->B.dt);
  }
  if (!epi || (!biasv && !epi->n_elt)) return;
  for (int32_t p = 0; p < npan; p++) {
    epi->bias = biasv ? biasv + p * NR : 0;
    f32_gemm_4x8((size_t)mc, (size_t)MIN(NR, nc - p * NR), 0, a, a, c + p * NR, ldc, 1, epi);
  }
}

/* One GEMM tile of the fast f32 path: C[m0 : m0+mc, n0 : n0+nc], operands f32/bf16/f16. */
static void run_tile(const job_t* j, scratch_t* s, const group_view_t* v, int32_t m0, int32_t mc, int32_t n0,
                     int32_t nc) {
  operand_t B = v->B, C = v->C;
  /* Plain weights: the N-block packed once (cached across this worker's M-blocks), then read as panels. */
  const float* wcache = plain_wcache(j, s, v, n0, nc);
  /* x16:p8 (bf16 / f16 codes): 1-2 row tiles convert them in registers (f32_gemm_2x8wx16 / 1x16wx16, K
     whole as on f32 panels), taller ones convert each K block's panels into s->b, then run as plain */
  const int x16 = v->wfmt == WEI_X16_P8, x16_rows = x16 && mc <= TOUCH_MIN_ROWS;
  const float* wpacked = wcache ? wcache : x16 ? 0 : (const float*)v->wpacked;
  const int32_t Kfull = wcache ? v->Kg : v->Kfull, Kg = v->Kg;
  const int32_t pan0 = wcache ? 0 : n0 / NR; /* the cache holds the tile's panels only */
  const int32_t NB = j->nb;
  const int32_t KC = k_block(j, wpacked != 0 || x16_rows, mc, Kg, 1, MR);
  B.base += B.off * esz(B.dt);
  /* Rows go through a_row_elem / c_row_elem (MoE gather / scatter); C rows past the tile are never written. */
  const int dglu = j->n_po > 0 && j->po[0].kind == PO_DGLU; /* GLU backward epilogue (glu-bwd.c) */
  const int direct_c = C.dt == DT_F32 && C.s1 == 1 && !j->scatter_k && !dglu;
  float* c = direct_c ? (float*)C.base + C.off + (size_t)m0 * C.s0 + n0 : s->c;
  const size_t ldc = direct_c ? (size_t)C.s0 : (size_t)NB;
  const int32_t npan = cdiv(nc, NR);
  int accumulate = 0;

  if (j->has_sum) { /* dst = sum_scale * dst_before + (acc + bias), then the element-wise ops */
    for (int32_t i = 0; i < mc; i++) {
      const size_t crow = c_row_elem(j, v, m0 + i);
      for (int32_t n = 0; n < nc; n++)
        c[i * ldc + n] = crow == SIZE_MAX ? 0.0f : j->sum_scale * load_elem(C.base, C.dt, crow + (size_t)(n0 + n) * C.s1);
    }
    accumulate = 1;
  }
  const float* biasv = v->bias ? load_bias_block(j, v, n0, nc, s->bias) : 0;
  epilogue_t epi = { 0, j->n_elt, j->elt_alg, j->elt_alpha, j->elt_beta };

  for (int32_t k0 = 0; k0 < Kg || k0 == 0; k0 += KC) {
    const int32_t kc = MIN(KC, Kg - k0);
    const int last = k0 + KC >= Kg;
    const size_t lda = (size_t)KC;
    load_a_block(j, s, v, m0, mc, k0, kc, lda);
    const float* a = s->a;
    const float* bp;
    size_t panel_stride;
    if (x16_rows) {
      x16_tile_rows(v, mc, n0, nc, k0, kc, a, c, ldc, accumulate, last ? &epi : 0, biasv);
      accumulate = 1;
      continue;
    }
    if (x16) {
      for (int32_t p = 0; p < npan; p++)
        decode_wx16((const uint16_t*)((const uint8_t*)v->wpacked + (size_t)(n0 / NR + p) * v->wps) + (size_t)k0 * NR, (size_t)kc,
                    B.dt, s->b + (size_t)p * (size_t)kc * NR);
      bp = s->b;
      panel_stride = (size_t)kc * NR;
    } else if (wpacked) {
      panel_stride = wcache ? wcache_stride(Kg) : (size_t)Kfull * NR;
      bp = wpacked + (size_t)pan0 * panel_stride + (size_t)k0 * NR;
    } else if (B.dt == DT_F32 && B.s1 == 1) {
      /* Row-major f32 B (the weight gradient's diff_dst rows): eight columns are one 32-byte copy. */
      const float* bb = (const float*)B.base;
      for (int32_t p = 0; p < npan; p++) {
        const int32_t w = MIN(NR, nc - p * NR);
        for (int32_t k = 0; k < kc; k++) {
          const float* x = bb + (size_t)(k0 + k) * B.s0 + (size_t)(n0 + p * NR);
          float* o = s->b + ((size_t)p * kc + k) * NR;
          if (w == NR) {
            wasm_v128_store(o, wasm_v128_load(x));
            wasm_v128_store(o + 4, wasm_v128_load(x + 4));
          } else
            for (int32_t q = 0; q < NR; q++) o[q] = q < w ? x[q] : 0.0f;
        }
      }
      bp = s->b;
      panel_stride = (size_t)kc * NR;
    } else {
      pack_plain_block(v, k0, kc, n0, nc, s->b);
      bp = s->b;
      panel_stride = (size_t)kc * NR;
    }
    if (j->kind == KIND_GROUPED_K && !wpacked) {
      /* Variable K (weight gradients): micro-rows outer, panels inner, so each call continues the
         same 4 dst rows and the tile's stores run as 4 sequential streams instead of 64 interleaved
         ones (the output, not the short contraction, is what these tiles are bound by). Every
         element is still computed by one call over the same k: the bits do not change. */
      for (int32_t i = 0; i < mc; i += MR)
        for (int32_t p = 0; p < npan; p++) {
          epi.bias = biasv ? biasv + p * NR : 0;
          f32_gemm_4x8((size_t)MIN(MR, mc - i), (size_t)MIN(NR, nc - p * NR), (size_t)kc, a + i * lda,
                       bp + p * panel_stride, c + i * ldc + p * NR, ldc, accumulate, last ? &epi : 0);
        }
    } else
    for (int32_t p = 0; p < npan; p++) {
      epi.bias = biasv ? biasv + p * NR : 0;
      const int32_t ncp = MIN(NR, nc - p * NR);
      if (wpacked && !wcache && mc > TOUCH_MIN_ROWS) touch_range(bp + p * panel_stride, (size_t)kc * NR * sizeof(float));
      for (int32_t i = 0; i < mc; i += MR)
        f32_gemm_4x8((size_t)MIN(MR, mc - i), (size_t)ncp, (size_t)kc, a + i * lda, bp + p * panel_stride,
                     c + i * ldc + p * NR, ldc, accumulate, last ? &epi : 0);
    }
    accumulate = 1;
  }
  if (dglu)
    dglu_tile(j, v, m0, mc, n0, nc, c, (int32_t)ldc);
  else if (!direct_c)
    for (int32_t i = 0; i < mc; i++) {
      const size_t crow = c_row_elem(j, v, m0 + i);
      if (crow == SIZE_MAX) continue;
      for (int32_t n = 0; n < nc; n++) store_elem((char*)C.base, C.dt, crow + (size_t)(n0 + n) * C.s1, c[i * ldc + n]);
    }
}

/* Resolves group g: the only place where the three ways of defining groups differ. */
static void view_group(const job_t* j, const int32_t* o, int32_t g, group_view_t* v) {
  const char* src = (const char*)(uintptr_t)j->src;
  const char* wei = (const char*)(uintptr_t)j->wei;
  const char* dst = (const char*)(uintptr_t)j->dst;
  /* The expert whose weights, bias and weights scales / zero points group g uses (expert_of: validated
     in load_groups); src / dst scales, zero points and binary src1 stay at the group (v->grp). */
  const int32_t e = j->expert_of ? ((const int32_t*)(uintptr_t)j->expert_of)[g] : g;
  v->bias = j->bias ? (const char*)(uintptr_t)j->bias : 0;
  v->bias_off = (size_t)e * j->b_g;
  v->N = j->N;
  v->g = e;
  v->grp = g;
  v->r0 = 0;
  v->k0 = 0;
  v->tix = v->tks = 0;
  if (j->group_mode == GROUPS_POINTERS && j->kind == KIND_GROUPED_K) {
    /* P#3 weight gradient: expert g's runtime rows are the contraction. A = src_g^T (K x rows: column
       stride s_0), B = diff_dst_g (rows x N: w_k, w_n), C = its own diff_weights (K x N, row stride d_0). */
    const group_rec_t* t = (const group_rec_t*)(uintptr_t)j->groups + g;
    v->rows = t->K;
    v->Kg = v->Kfull = o[g];
    v->N = t->N;
    v->A = (operand_t){ (const char*)(uintptr_t)t->src, 0, 1, t->s_0, j->dt_src };
    v->B = (operand_t){ (const char*)(uintptr_t)t->wei, 0, t->w_k, t->w_n, j->dt_wei };
    v->C = (operand_t){ (const char*)(uintptr_t)t->dst, 0, t->d_0, 1, j->dt_dst };
    v->wpacked = 0;
    v->wfmt = WEI_PLAIN;
    return;
  }
  if (j->group_mode == GROUPS_POINTERS) {
    const group_rec_t* t = (const group_rec_t*)(uintptr_t)j->groups + g;
    v->rows = o[g];
    v->Kg = v->Kfull = t->K;
    v->N = t->N;
    v->A = (operand_t){ (const char*)(uintptr_t)t->src, 0, t->s_0, 1, j->dt_src };
    v->B = (operand_t){ (const char*)(uintptr_t)t->wei, 0, t->w_k, t->w_n, j->dt_wei };
    v->C = (operand_t){ (const char*)(uintptr_t)t->dst, 0, t->d_0, 1, j->dt_dst };
    v->wpacked = t->wei_packed ? (const void*)(uintptr_t)t->wei : 0;
    v->wfmt = t->wei_packed;
    if (v->wfmt >= WEI_X8_P8) lowp_view_geom(j, v);
    return;
  }
  if (j->kind == KIND_GROUPED_M) {
    const int32_t r0 = j->group_mode == GROUPS_OFFSETS ? o[g] : 0;
    v->r0 = r0;
    v->rows = j->group_mode == GROUPS_OFFSETS ? o[g + 1] - o[g] : j->counts ? o[g] : j->M;
    v->Kg = v->Kfull = j->K;
    /* With a gather (scatter) the row maps give src (dst) rows: the operand keeps only the batch offset. */
    v->A = (operand_t){ src, (size_t)g * j->s_g + (j->gather ? 0 : (size_t)r0 * j->s_0), j->s_0, j->s_1, j->dt_src };
    v->B = (operand_t){ wei, (size_t)e * j->w_g, j->w_k, j->w_n, j->dt_wei };
    v->C = (operand_t){ dst, (size_t)g * j->d_g + (j->scatter_k ? 0 : (size_t)r0 * j->d_0), j->d_0, j->d_1, j->dt_dst };
    v->tix = j->tok_idx ? (const int32_t*)(uintptr_t)j->tok_idx + r0 : 0;
    v->tks = j->tok_ks ? (const int32_t*)(uintptr_t)j->tok_ks + r0 : 0;
  } else {
    const int32_t k0 = j->group_mode == GROUPS_OFFSETS ? o[g] : g * j->K;
    v->k0 = k0;
    v->rows = j->M;
    v->Kg = v->Kfull = j->group_mode == GROUPS_OFFSETS ? o[g + 1] - o[g] : j->K;
    v->A = (operand_t){ src, (size_t)k0 * j->s_1, j->s_0, j->s_1, j->dt_src };
    v->B = (operand_t){ wei, (size_t)k0 * j->w_k, j->w_k, j->w_n, j->dt_wei };
    v->C = (operand_t){ dst, (size_t)g * j->d_g, j->d_0, j->d_1, j->dt_dst };
  }
  /* Packed weights: w_g counts floats (f32:p8) or bytes (x8 / x4 / x16). */
  v->wpacked = j->wei_packed == WEI_F32_P8 ? (const void*)((const float*)wei + (size_t)e * j->w_g)
             : j->wei_packed >= WEI_X8_P8 ? (const void*)(wei + (size_t)e * j->w_g) : 0; /* w_g in bytes */
  v->wfmt = j->wei_packed;
  if (v->wfmt >= WEI_X8_P8) lowp_view_geom(j, v);
}

/* Rows of a row-tile K chunk: as many whole weight rows as the plain-weights cache holds (even, so
   the kernels' k pairs never straddle chunks), at most kc (the A block's room); 0: not worth it. */
INLINE int32_t row_chunk(const job_t* j, int32_t N) {
  const int64_t room = ((int64_t)(j->wcache_k + 4) * j->nb / cdiv(N, NR) - 32) / NR; /* panels wcache_stride apart */
  const int32_t kr = (int32_t)MIN(room, (int64_t)MIN(j->kc, ROW_CHUNK_MAX)) & ~1;
  return kr >= 16 ? kr : 0;
}

/* Row tiles take groups of at most ROW_TILE_MAX rows, ROW_TILE_ROWS per tile (MoE-B / MoE-A at 64,
   128 and 192 were within 3% of each other; 128 kept). */
#ifndef ROW_TILE_MAX
#define ROW_TILE_MAX 128
#endif
#ifndef ROW_TILE_ROWS
#define ROW_TILE_ROWS 128
#endif
/* Rows of one row tile: ROW_TILE_ROWS, or what the A block's room (scratch_setup: (mb + MR) x kca
   floats) holds at the chunk's K. */
INLINE int32_t row_tile_rows(const job_t* j, int32_t N) {
  const int64_t kca = MAX(scratch_kcf(j), j->kc_packed);
  const int64_t room = (int64_t)(j->mb + MR) * kca / row_chunk(j, N);
  return (int32_t)MIN(room, ROW_TILE_ROWS) & ~(MR - 1);
}

/* Whether group v runs as row tiles (run_tile_rows): plain row-major f32 weights (`abc`) on the fast
   path, dst written in place, at most ROW_TILE_MAX rows (each row tile packs the whole expert again;
   past that, the once-per-call N-block cache costs less), and enough groups of work for the workers
   (`spread`: a row tile is all of N, so a lone small group would run on one worker). */
INLINE int row_tile(const job_t* j, const group_view_t* v, int spread) {
  const operand_t* B = &v->B;
  const operand_t* C = &v->C;
  return spread && v->N > 0 && j->path == PATH_F32 && j->wcache_k > 0 && !v->wpacked && B->dt == DT_F32 && B->s1 == 1 &&
         v->rows > 0 && v->rows <= ROW_TILE_MAX && v->Kg > 0 && j->kind != KIND_GROUPED_K && C->dt == DT_F32 && C->s1 == 1 &&
         !j->scatter_k && !j->has_sum && !(j->n_po > 0 && j->po[0].kind == PO_DGLU) && row_chunk(j, v->N) > 0 &&
         row_tile_rows(j, v->N) >= MR;
}

/* Whether the call has groups enough for row tiles: non-empty ones at least 4 per extra worker. */
INLINE int row_tiles_spread(const job_t* j, const int32_t* o) {
  if (j->group_mode != GROUPS_OFFSETS) return j->nthreads == 1 || j->G >= 4 * (j->nthreads - 1) + 1;
  int32_t busy = 0;
  for (int32_t g = 0; g < j->G; g++) busy += o[g + 1] > o[g];
  return busy >= 4 * (j->nthreads - 1) + 1;
}

/* Rows [m0, m0 + mc) of a group on plain row-major weights, all N at once, K in chunks of whole
   weight rows. Its tiles of N-blocks would each pack K rows of 512 bytes, every row in another page:
   no hardware prefetcher follows that, and packing ran at DRAM latency (MoE-B abc/packed 0.75). Whole
   rows are one sequential stream. Each element's chain is the same kernel's over the same k in order
   (chunks are even; partial sums are stored and reloaded as f32), so the bits equal the tiled run's. */
static void run_tile_rows(const job_t* j, scratch_t* s, const group_view_t* v, int32_t m0, int32_t mc) {
  const int32_t N = v->N, Kg = v->Kg, NB = j->nb;
  const int32_t kr = row_chunk(j, N);
  const operand_t C = v->C;
  const size_t ldc = (size_t)C.s0;
  float* c = (float*)C.base + C.off + (size_t)m0 * ldc;
  epilogue_t epi = { 0, j->n_elt, j->elt_alg, j->elt_alpha, j->elt_beta };
  s->w_base = 0; /* the N-block cache is overwritten */
  for (int32_t k0 = 0; k0 < Kg; k0 += kr) {
    const int32_t kc = MIN(kr, Kg - k0);
    const int last = k0 + kr >= Kg;
    load_a_block(j, s, v, m0, mc, k0, kc, (size_t)kr);
    pack_plain_panels(v, k0, kc, 0, N, wcache_stride(kc), s->wcache);
    for (int32_t n0 = 0; n0 < N; n0 += NB) {
      const int32_t nc = MIN(NB, N - n0), npan = cdiv(nc, NR);
      const float* biasv = last && v->bias ? load_bias_block(j, v, n0, nc, s->bias) : 0;
      for (int32_t p = 0; p < npan; p++) {
        epi.bias = biasv ? biasv + p * NR : 0;
        const float* bp = s->wcache + (size_t)(n0 / NR + p) * wcache_stride(kc);
        for (int32_t i = 0; i < mc; i += MR)
          f32_gemm_4x8((size_t)MIN(MR, mc - i), (size_t)MIN(NR, nc - p * NR), (size_t)kc, s->a + (size_t)i * (size_t)kr, bp,
                       c + (size_t)i * ldc + n0 + p * NR, ldc, k0 > 0, last ? &epi : 0);
      }
    }
  }
}

/* dst columns of a group: N, or N / 2 behind a GLU; a tile covers nb GEMM columns. */
INLINE int32_t view_cols(const job_t* j, const group_view_t* v) { return j->glu_alg ? v->N / 2 : v->N; }
INLINE int32_t tile_cols(const job_t* j) { return j->glu_alg ? j->nb / 2 : j->nb; }

INLINE int32_t view_tiles(const job_t* j, const group_view_t* v, int spread) {
  if (row_tile(j, v, spread)) return cdiv(v->rows, row_tile_rows(j, v->N));
  return cdiv(v->rows, j->mb) * cdiv(view_cols(j, v), tile_cols(j));
}

static void run_group_tile(const job_t* j, scratch_t* s, const group_view_t* v, int32_t t, int spread) {
  const int32_t mbn = cdiv(v->rows, j->mb), nbt = tile_cols(j);
  const int32_t m0 = (t % mbn) * j->mb, n0 = (t / mbn) * nbt;
  const int32_t mc = MIN(j->mb, v->rows - m0), nc = MIN(nbt, view_cols(j, v) - n0);
  if (j->path != PATH_F32) {
    run_tile_fused(j, s, v, m0, mc, n0, nc);
    return;
  }
  if (row_tile(j, v, spread)) {
    const int32_t rt = row_tile_rows(j, v->N);
    run_tile_rows(j, s, v, t * rt, MIN(rt, v->rows - t * rt));
    return;
  }
  run_tile(j, s, v, m0, mc, n0, nc);
}

EXPORT(run_job) int run_job(job_t* j, int tid) {
  if (j->kind >= KIND_OP_FIRST) return run_op_job((op_head_t*)j, tid);
  char* base = (char*)(uintptr_t)j->scratch + (size_t)tid * (size_t)j->scratch_stride;
  int32_t* o = (int32_t*)base;
  scratch_t s;
  const size_t used = scratch_setup(j, base, &s);
  if ((j->group_mode != GROUPS_UNIFORM || j->counts) && load_groups(j, o, tid)) return 0;
  if ((j->gather || j->scatter_k) && check_row_maps(j, o, (uint8_t*)base + used, tid)) return 0;
  if (j->zero_fill && tid == 0) zero_ungrouped_rows(j, o);
  /* Tiles are numbered group by group (N-block major, M-block minor, so consecutive tiles share a
     weight panel); each worker walks the groups forward as the shared counter grows. */
  const int spread = row_tiles_spread(j, o);
  int32_t g = 0, base_tile = 0;
  group_view_t v;
  if (j->G > 0) view_group(j, o, 0, &v);
  int32_t tiles_g = j->G > 0 ? view_tiles(j, &v, spread) : 0;
  int done = 0;
  for (;;) {
    const int32_t t = __atomic_fetch_add(&j->tile_next, 1, __ATOMIC_RELAXED);
    while (g < j->G && t >= base_tile + tiles_g) {
      base_tile += tiles_g;
      if (++g < j->G) {
        view_group(j, o, g, &v);
        tiles_g = view_tiles(j, &v, spread);
      }
    }
    if (g >= j->G) break;
    run_group_tile(j, &s, &v, t - base_tile, spread);
    done++;
  }
  return done;
}
