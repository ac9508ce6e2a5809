/* GLU backward (rfcs/0002 section 10), shared by the standalone op job (glu-bwd.c, KIND_GLU_BWD) and
   the matmul epilogue post-op PO_DGLU (gemm-fused.c): both call the same inline functions on the same
   4-column vectors, so they give the same bits.

   Forward (the fused GLU of gemm-fused.c): out = act(gate) * up, times prob[row] when the router
   weight is applied to the GLU output (cuDNN's dSwiGLU seed). Backward, per element with d = diff:
     dp     = d * prob                      (prob = 1 without prob)
     d_up   = dp * act(gate)                (swiglu_oai: zero where |up| > limit)
     d_gate = (dp * up') * act'(gate)       (up' = up, or clamp(up) + 1 for swiglu_oai; zero where gate > limit)
     dprob += sum_n (act(gate) * up') * d   (per row; see the fixed order below)
   act / act' per algorithm (s = logistic):
     swiglu(a):   act = g s(ag),        act' = s (1 + a g (1 - s))
     geglu_erf:   act = g Phi(g),       act' = Phi(g) + g phi(g)
     geglu_tanh:  act = g s(2y),        act' = s + g 2 s (1 - s) c (1 + 3 * 0.044715 g^2), y = c (g + 0.044715 g^3)
     swiglu_oai:  act = gc s(a gc),     gc = min(g, limit), up' = clamp(up, -limit, limit) + 1
   act is computed by exactly the forward's operations (vmath.h), so dprob uses the forward's values.

   dprob order (independent of tiling and threads): columns are taken in chunks of DGLU_CHUNK = 64; a
   chunk's terms are summed as f32x4 lanes in column order from zero, then (l0 + l1) + (l2 + l3); the
   chunk sums are added in chunk order from the first, and the row total is added to dprob once. */
#pragma once
#include "common.h"
#include "job.h"
#include "vmath.h"

#define DGLU_CHUNK 64

typedef struct dglu_par {
  int alg, layout;
  float alpha, limit;
  int32_t N; /* diff (GLU output) columns; h13 has 2N */
} dglu_par_t;

/* h13 columns of the gate of diff column n (the up column is gate + dglu_up_delta). */
INLINE int32_t dglu_gate_col(const dglu_par_t* k, int32_t n) {
  if (k->layout == GLU_HALVES) return n;
  if (k->layout == GLU_INTERLEAVED) return 2 * n;
  return 64 * (n / 32) + n % 32;
}
INLINE int32_t dglu_up_delta(const dglu_par_t* k) {
  return k->layout == GLU_HALVES ? k->N : k->layout == GLU_INTERLEAVED ? 1 : 32;
}

/* gate and up of diff columns n .. n + cnt - 1 (n % 4 == 0, cnt <= 4; absent lanes 0) of one h13 row. */
INLINE void dglu_load(const dglu_par_t* k, const char* base, int dt, size_t row, int32_t s1, int32_t n, int32_t cnt,
                      v128_t* g, v128_t* u) {
  const int32_t gc = dglu_gate_col(k, n), du = dglu_up_delta(k);
  if (dt == DT_F32 && s1 == 1 && cnt == 4) {
    const float* p = (const float*)base + row + gc;
    if (k->layout == GLU_INTERLEAVED) {
      const v128_t lo = wasm_v128_load(p), hi = wasm_v128_load(p + 4);
      *g = wasm_i32x4_shuffle(lo, hi, 0, 2, 4, 6);
      *u = wasm_i32x4_shuffle(lo, hi, 1, 3, 5, 7);
    } else {
      *g = wasm_v128_load(p);
      *u = wasm_v128_load(p + du);
    }
    return;
  }
  if (dt == DT_BF16 && s1 == 1 && cnt == 4) {
    const uint16_t* p = (const uint16_t*)base + row + gc;
    if (k->layout == GLU_INTERLEAVED) { /* lane l: gate_l | up_l << 16 */
      const v128_t x = wasm_v128_load(p);
      *g = wasm_i32x4_shl(x, 16);
      *u = wasm_v128_and(x, wasm_i32x4_splat((int32_t)0xffff0000));
    } else {
      *g = wasm_i32x4_shl(wasm_u32x4_load16x4(p), 16);
      *u = wasm_i32x4_shl(wasm_u32x4_load16x4(p + du), 16);
    }
    return;
  }
  float tg[4] = { 0.0f, 0.0f, 0.0f, 0.0f }, tu[4] = { 0.0f, 0.0f, 0.0f, 0.0f };
  for (int32_t l = 0; l < cnt; l++) {
    const int32_t c = dglu_gate_col(k, n + l);
    tg[l] = load_elem(base, dt, row + (size_t)c * (size_t)s1);
    tu[l] = load_elem(base, dt, row + (size_t)(c + du) * (size_t)s1);
  }
  *g = wasm_v128_load(tg);
  *u = wasm_v128_load(tu);
}

/* f32 -> bf16 of 4 lanes in the low 16 bits of each 32-bit lane: common.h's f32_to_bf16 (round to
   nearest even, NaN kept quiet) on vectors. */
INLINE v128_t dglu_bf16x4(v128_t x) {
  const v128_t r = wasm_u32x4_shr(wasm_i32x4_add(x, wasm_i32x4_add(wasm_i32x4_splat(0x7fff),
                                                                  wasm_v128_and(wasm_u32x4_shr(x, 16), wasm_i32x4_splat(1)))), 16);
  const v128_t nan = wasm_u32x4_gt(wasm_v128_and(x, wasm_i32x4_splat(0x7fffffff)), wasm_i32x4_splat(0x7f800000));
  return wasm_v128_bitselect(wasm_v128_or(wasm_u32x4_shr(x, 16), wasm_i32x4_splat(0x40)), r, nan);
}

/* Stores d_gate and d_up of diff columns n .. n + cnt - 1 into one d(h13) row (same layout). */
INLINE void dglu_store(const dglu_par_t* k, char* base, int dt, size_t row, int32_t s1, int32_t n, int32_t cnt,
                       v128_t dg, v128_t du) {
  const int32_t gc = dglu_gate_col(k, n), dd = dglu_up_delta(k);
  if (dt == DT_F32 && s1 == 1 && cnt == 4) {
    float* p = (float*)base + row + gc;
    if (k->layout == GLU_INTERLEAVED) {
      wasm_v128_store(p, wasm_i32x4_shuffle(dg, du, 0, 4, 1, 5));
      wasm_v128_store(p + 4, wasm_i32x4_shuffle(dg, du, 2, 6, 3, 7));
    } else {
      wasm_v128_store(p, dg);
      wasm_v128_store(p + dd, du);
    }
    return;
  }
  if (dt == DT_BF16 && s1 == 1 && cnt == 4) {
    uint16_t* p = (uint16_t*)base + row + gc;
    const v128_t bg = dglu_bf16x4(dg), bu = dglu_bf16x4(du);
    if (k->layout == GLU_INTERLEAVED) {
      wasm_v128_store(p, wasm_v128_or(bg, wasm_i32x4_shl(bu, 16)));
    } else {
      wasm_v128_store64_lane(p, wasm_u16x8_narrow_i32x4(bg, bg), 0);
      wasm_v128_store64_lane(p + dd, wasm_u16x8_narrow_i32x4(bu, bu), 0);
    }
    return;
  }
  float tg[4], tu[4];
  wasm_v128_store(tg, dg);
  wasm_v128_store(tu, du);
  for (int32_t l = 0; l < cnt; l++) {
    const int32_t c = dglu_gate_col(k, n + l);
    store_elem(base, dt, row + (size_t)c * (size_t)s1, tg[l]);
    store_elem(base, dt, row + (size_t)(c + dd) * (size_t)s1, tu[l]);
  }
}


/* The gradients of 4 columns; returns the dprob terms act(gate) * up' * d. */
INLINE v128_t dglu_math(const dglu_par_t* k, v128_t g, v128_t u, v128_t d, v128_t prob, v128_t* dg, v128_t* du) {
  const v128_t dp = VMUL(d, prob);
  const v128_t one = VF(1.0f);
  switch (k->alg) {
    case GLU_SWIGLU: {
      const v128_t ag = VMUL(g, VF(k->alpha));
      const v128_t s = v_logistic(ag);
      const v128_t a = VMUL(g, s);
      const v128_t da = VMUL(s, VADD(one, VMUL(ag, VSUB(one, s))));
      *du = VMUL(dp, a);
      *dg = VMUL(VMUL(dp, u), da);
      return VMUL(VMUL(a, u), d);
    }
    case GLU_GEGLU_ERF: { /* the bracket of v_gelu_erf: 2 Phi(g), with one exp for erfc and phi */
      const v128_t z = VMUL(g, VF(0.70710678118654752f));
      const v128_t az = v_abs(z);
      const v128_t small = VADD(one, VMUL(z, v_erf_small(z)));
      /* e = exp(-z^2): v_erfc_big's factor wherever its value is used (|z| >= 1, where pmax(|z|, 1)^2 = z^2
         bit for bit), and phi(g) = e / sqrt(2 pi) */
      const v128_t e = v_exp(wasm_f32x4_neg(VMUL(z, z)));
      const v128_t ec = VMUL(e, v_erfc_q(wasm_f32x4_pmax(az, one)));
      const v128_t br = wasm_v128_bitselect(small, wasm_v128_bitselect(ec, VSUB(VF(2.0f), ec), wasm_f32x4_lt(z, VF(0.0f))),
                                            wasm_f32x4_lt(az, one));
      const v128_t a = VMUL(VMUL(VF(0.5f), g), br); /* = v_gelu_erf(g) */
      const v128_t phi = VMUL(VF(0.3989422804014327f), e);
      const v128_t da = VADD(VMUL(VF(0.5f), br), VMUL(g, phi));
      *du = VMUL(dp, a);
      *dg = VMUL(VMUL(dp, u), da);
      return VMUL(VMUL(a, u), d);
    }
    case GLU_GEGLU_TANH: { /* v_gelu_tanh's steps */
      const v128_t g2 = VMUL(g, g);
      const v128_t y = VMUL(VF(0.7978845608028654f), VADD(g, VMUL(VF(0.044715f), VMUL(g2, g))));
      const v128_t s = v_logistic(VADD(y, y));
      const v128_t a = VMUL(g, s);
      const v128_t dy = VMUL(VF(0.7978845608028654f), VADD(one, VMUL(VF(0.134145f), g2)));
      const v128_t ds = VMUL(VMUL(VF(2.0f), VMUL(s, VSUB(one, s))), dy);
      const v128_t da = VADD(s, VMUL(g, ds));
      *du = VMUL(dp, a);
      *dg = VMUL(VMUL(dp, u), da);
      return VMUL(VMUL(a, u), d);
    }
    default: { /* swiglu_oai: the forward's clamps; no gradient through an active clamp */
      const v128_t lim = VF(k->limit);
      const v128_t gc = wasm_f32x4_min(g, lim);
      const v128_t uc = wasm_f32x4_min(lim, wasm_f32x4_max(wasm_f32x4_neg(lim), u));
      const v128_t ag = VMUL(gc, VF(k->alpha));
      const v128_t s = v_logistic(ag);
      const v128_t a = VMUL(gc, s);
      const v128_t u1 = VADD(uc, one);
      const v128_t da = VMUL(s, VADD(one, VMUL(ag, VSUB(one, s))));
      const v128_t gpass = wasm_f32x4_le(g, lim);
      const v128_t upass = wasm_v128_and(wasm_f32x4_ge(u, wasm_f32x4_neg(lim)), wasm_f32x4_le(u, lim));
      *du = wasm_v128_and(VMUL(dp, a), upass);
      *dg = wasm_v128_and(VMUL(VMUL(dp, u1), da), gpass);
      return VMUL(VMUL(a, u1), d);
    }
  }
}

INLINE float dglu_hsum(v128_t acc) {
  return (wasm_f32x4_extract_lane(acc, 0) + wasm_f32x4_extract_lane(acc, 1)) +
         (wasm_f32x4_extract_lane(acc, 2) + wasm_f32x4_extract_lane(acc, 3));
}

/* Is column group n .. n + 3 the last of its chunk (or of the row)? */
INLINE int dglu_chunk_end(int32_t n, int32_t N) { return ((n + 4) % DGLU_CHUNK) == 0 || n + 4 >= N; }

struct job;
struct group_view;
/* The PO_DGLU epilogue of a fused GEMM tile (glu-bwd.c): c holds the tile's f32 values (diff of the GLU
   output, scales and bias applied), rows m0 .. m0 + mc of the group, diff columns n0 .. n0 + nc. */
void dglu_tile(const struct job* j, const struct group_view* v, int32_t m0, int32_t mc, int32_t n0, int32_t nc,
               const float* c, int32_t ldc);
