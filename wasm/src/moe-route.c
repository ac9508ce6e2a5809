/* MoE routing (op job KIND_MOE_ROUTE): router logits [T, E] -> top-k expert ids [T, k] (s32) and
   routing weights [T, k] (f32). Semantics in rfcs/0003-moe-routing.md; the layout of the struct is
   mirrored in src/primitives/moe/routing/wasm_routing.ts.

   Every worker first checks all runtime data (logits, correction bias) in the same order, so either
   every worker finds the same first bad value and nothing is written, or all of them go on to the
   tiles. A tile is `tile` consecutive tokens; each token's arithmetic is fixed (vector lanes summed
   in one order), so the output bits do not depend on which worker ran it. */
#include "op_job.h"
#include "vmath.h"

typedef struct moe_route_job {
  op_head_t h;
  /* 32 */ uint32_t src;
  int32_t T, E, k;
  /* 48 */ int32_t s_t, s_e, dt, scoring;     /* element strides of src; dt 0 f32 1 bf16 2 f16; 0 softmax 1 sigmoid */
  /* 64 */ int32_t renorm, groups, kgroup, gmode; /* gmode 0: group max, 1: sum of the group's top 2 */
  /* 80 */ uint32_t bias, ids, weights;         /* bias 0: no correction bias */
  float scale;
  /* 96 */ uint32_t scratch;
  int32_t scratch_stride, tile;
  float renorm_eps;                           /* renorm: weights / (sum + renorm_eps); a sum + eps <= 0 gives 0 */
} moe_route_job_t;
_Static_assert(sizeof(moe_route_job_t) == 112, "moe_route_job_t: update src/primitives/moe/routing/wasm_routing.ts");

/* Status codes (mirrored in src/primitives/moe/routing/runtime_data.ts). err_index = token, err_a = expert. */
enum { ROUTE_NAN = 110, ROUTE_POS_INF = 111, ROUTE_NO_FINITE = 112, ROUTE_BIAS = 113 };
enum { SCORE_SOFTMAX = 0, SCORE_SIGMOID = 1 };

#define F_INF __builtin_inff()

INLINE const char* row_ptr(const moe_route_job_t* j, int32_t t) {
  return (const char*)(uintptr_t)j->src + (size_t)t * (size_t)j->s_t * (j->dt == 0 ? 4u : 2u);
}

/* Contiguous f32 row: 1 if it may break a rule (a NaN; with softmax a +inf, or no logit above -inf).
   ok: every lane so far is below +inf (softmax) or a number (sigmoid); any: some lane above -inf. */
static int f32_row_suspect(const float* p, int32_t E, int softmax) {
  const v128_t inf = VF(F_INF), ninf = VF(-F_INF);
  v128_t ok = wasm_i32x4_splat(-1), any = wasm_i32x4_splat(0);
  int32_t e = 0;
  if (softmax) {
    for (; e + 4 <= E; e += 4) {
      const v128_t x = wasm_v128_load(p + e);
      ok = wasm_v128_and(ok, wasm_f32x4_lt(x, inf));
      any = wasm_v128_or(any, wasm_f32x4_gt(x, ninf));
    }
  } else {
    for (; e + 4 <= E; e += 4) {
      const v128_t x = wasm_v128_load(p + e);
      ok = wasm_v128_and(ok, wasm_f32x4_eq(x, x));
    }
  }
  int s = !wasm_i32x4_all_true(ok), a = wasm_v128_any_true(any);
  for (; e < E; e++) {
    const float x = p[e];
    s |= softmax ? !(x < F_INF) : x != x;
    a |= x > -F_INF;
  }
  return s || (softmax && !a);
}

/* Reports the first rule broken by row t (scalar, any type and stride); returns 1 if one was. */
static int row_error(moe_route_job_t* j, int32_t t, int softmax) {
  const char* p = row_ptr(j, t);
  int any = 0;
  for (int32_t e = 0; e < j->E; e++) {
    const float x = load_elem(p, j->dt, (size_t)e * (size_t)j->s_e);
    if (x != x) { op_error(&j->h, ROUTE_NAN, t, e, 0); return 1; }
    if (softmax && x == F_INF) { op_error(&j->h, ROUTE_POS_INF, t, e, 0); return 1; }
    any |= x > -F_INF;
  }
  if (softmax && !any) { op_error(&j->h, ROUTE_NO_FINITE, t, 0, 0); return 1; }
  return 0;
}

/* Checks all runtime data, logits token by token then the bias; 1 if something was reported. */
static int check_inputs(moe_route_job_t* j) {
  const int softmax = j->scoring == SCORE_SOFTMAX;
  const int fast = j->dt == 0 && j->s_e == 1;
  for (int32_t t = 0; t < j->T; t++) {
    if (fast && !f32_row_suspect((const float*)row_ptr(j, t), j->E, softmax)) continue;
    if (row_error(j, t, softmax)) return 1;
  }
  if (j->bias) {
    const float* b = (const float*)(uintptr_t)j->bias;
    for (int32_t e = 0; e < j->E; e++) {
      const float d = b[e] - b[e]; /* NaN for NaN and +-inf */
      if (d != d) { op_error(&j->h, ROUTE_BIAS, 0, e, 0); return 1; }
    }
  }
  return 0;
}

/* A top-n list in descending value, ties lower index first: candidates must arrive in ascending index. */
typedef struct topn {
  float* v;
  int32_t* i;
  int32_t n, cap;
} topn_t;

INLINE void topn_push(topn_t* l, float x, int32_t idx) {
  int32_t p;
  if (l->n == l->cap) {
    if (!(x > l->v[l->cap - 1])) return;
    p = l->cap - 1;
  } else {
    p = l->n++;
  }
  while (p > 0 && l->v[p - 1] < x) {
    l->v[p] = l->v[p - 1];
    l->i[p] = l->i[p - 1];
    p--;
  }
  l->v[p] = x;
  l->i[p] = idx;
}

/* Pushes x[from..to) in ascending index. Once the list is full, four candidates at a time are skipped
   when none beats the current last entry: the same result as pushing each, far fewer branches. */
INLINE void topn_scan(topn_t* l, const float* x, int32_t from, int32_t to) {
  int32_t e = from;
  for (; e < to && l->n < l->cap; e++) topn_push(l, x[e], e);
  for (; e + 4 <= to; e += 4) {
    if (!wasm_v128_any_true(wasm_f32x4_gt(wasm_v128_load(x + e), VF(l->v[l->cap - 1])))) continue;
    for (int32_t q = e; q < e + 4; q++) topn_push(l, x[q], q);
  }
  for (; e < to; e++) topn_push(l, x[e], e);
}

typedef struct route_scratch {
  float *score, *sel, *topv, *gtopv;
  int32_t *topi, *gtopi, *gmask;
} route_scratch_t;

/* Layout of one worker's scratch; the byte count is computed by wasm_routing.ts (scratchBytes). */
static route_scratch_t scratch_of(const moe_route_job_t* j, int tid) {
  const int32_t E4 = (j->E + 3) & ~3, G4 = (j->groups + 3) & ~3, k4 = (j->k + 3) & ~3;
  float* f = (float*)(uintptr_t)(j->scratch + (uint32_t)tid * (uint32_t)j->scratch_stride);
  route_scratch_t s;
  s.score = f;
  s.sel = f + E4;
  s.gmask = (int32_t*)(s.sel + E4);
  s.gtopv = (float*)(s.gmask + G4);
  s.gtopi = (int32_t*)(s.gtopv + G4);
  s.topv = (float*)(s.gtopi + G4);
  s.topi = (int32_t*)(s.topv + k4);
  return s;
}

/* score[0..E) = softmax or sigmoid of row t; lanes E..E4 hold harmless padding. */
static void scores_of(const moe_route_job_t* j, int32_t t, float* sc) {
  const int32_t E = j->E, E4 = (E + 3) & ~3;
  const char* p = row_ptr(j, t);
  if (j->dt == 0 && j->s_e == 1) {
    const float* r = (const float*)p;
    int32_t e = 0;
    for (; e + 4 <= E; e += 4) wasm_v128_store(sc + e, wasm_v128_load(r + e));
    for (; e < E; e++) sc[e] = r[e];
  } else {
    for (int32_t e = 0; e < E; e++) sc[e] = load_elem(p, j->dt, (size_t)e * (size_t)j->s_e);
  }
  for (int32_t e = E; e < E4; e++) sc[e] = -F_INF; /* exp -> 0: adds nothing to the sum */
  if (j->scoring == SCORE_SIGMOID) {
    for (int32_t e = 0; e < E4; e += 4) wasm_v128_store(sc + e, v_logistic(wasm_v128_load(sc + e)));
    return;
  }
  v128_t vm = VF(-F_INF);
  for (int32_t e = 0; e < E4; e += 4) vm = wasm_f32x4_pmax(vm, wasm_v128_load(sc + e)); /* no NaN here */
  const float m = MAX(MAX(wasm_f32x4_extract_lane(vm, 0), wasm_f32x4_extract_lane(vm, 1)),
                      MAX(wasm_f32x4_extract_lane(vm, 2), wasm_f32x4_extract_lane(vm, 3)));
  const v128_t mv = VF(m);
  v128_t acc = VF(0.0f);
  for (int32_t e = 0; e < E4; e += 4) {
    const v128_t x = v_exp(VSUB(wasm_v128_load(sc + e), mv));
    wasm_v128_store(sc + e, x);
    acc = VADD(acc, x);
  }
  const float s = (wasm_f32x4_extract_lane(acc, 0) + wasm_f32x4_extract_lane(acc, 1)) +
                  (wasm_f32x4_extract_lane(acc, 2) + wasm_f32x4_extract_lane(acc, 3));
  const v128_t sv = VF(s);
  for (int32_t e = 0; e < E4; e += 4) wasm_v128_store(sc + e, wasm_f32x4_div(wasm_v128_load(sc + e), sv));
}

/* Group score from the selection scores of its experts: the max, or the sum of the top two. */
INLINE float group_score(const float* x, int32_t n, int mode) {
  float a = -F_INF, b = -F_INF;
  for (int32_t e = 0; e < n; e++) {
    const float v = x[e];
    if (v > a) { b = a; a = v; }
    else if (v > b) b = v;
  }
  return mode == 0 ? a : a + b;
}

static void route_token(const moe_route_job_t* j, int32_t t, const route_scratch_t* s) {
  const int32_t E = j->E, k = j->k;
  float* sc = s->score;
  scores_of(j, t, sc);
  const float* sel = sc;
  if (j->bias) {
    const float* b = (const float*)(uintptr_t)j->bias;
    int32_t e = 0;
    for (; e + 4 <= E; e += 4) wasm_v128_store(s->sel + e, VADD(wasm_v128_load(sc + e), wasm_v128_load(b + e)));
    for (; e < E; e++) s->sel[e] = sc[e] + b[e];
    sel = s->sel;
  }
  topn_t top = { s->topv, s->topi, 0, k };
  if (j->groups > 1) {
    const int32_t G = j->groups, per = E / G;
    topn_t gt = { s->gtopv, s->gtopi, 0, j->kgroup };
    for (int32_t g = 0; g < G; g++) topn_push(&gt, group_score(sel + g * per, per, j->gmode), g);
    for (int32_t g = 0; g < G; g++) s->gmask[g] = 0;
    for (int32_t q = 0; q < gt.n; q++) s->gmask[gt.i[q]] = 1;
    for (int32_t g = 0; g < G; g++)
      if (s->gmask[g]) topn_scan(&top, sel, g * per, (g + 1) * per);
  } else {
    topn_scan(&top, sel, 0, E);
  }
  /* Weights: the (uncorrected) scores of the chosen experts, summed in slot order. */
  float sum = 0.0f;
  for (int32_t q = 0; q < k; q++) {
    s->topv[q] = sc[s->topi[q]];
    sum += s->topv[q];
  }
  int32_t* ids = (int32_t*)(uintptr_t)j->ids + (size_t)t * (size_t)k;
  float* w = (float*)(uintptr_t)j->weights + (size_t)t * (size_t)k;
  const float den = sum + j->renorm_eps;
  for (int32_t q = 0; q < k; q++) {
    float x = s->topv[q];
    if (j->renorm) x = den > 0.0f ? x / den : 0.0f;
    ids[q] = s->topi[q];
    w[q] = x * j->scale;
  }
}

int run_moe_route(op_head_t* h, int tid) {
  moe_route_job_t* j = (moe_route_job_t*)h;
  if (check_inputs(j)) return 0;
  const route_scratch_t s = scratch_of(j, tid);
  const int32_t tile = j->tile, ntiles = (j->T + tile - 1) / tile;
  int done = 0;
  for (int32_t q; (q = op_next_tile(h)) < ntiles; done++)
    for (int32_t t = q * tile; t < MIN(j->T, q * tile + tile); t++) route_token(j, t, &s);
  return done;
}

/* ---- Routing backward (op job KIND_MOE_ROUTE_BWD): d(topk_weights) [T, k] -> d(logits) [T, E] f32.
   The forward job's fields describe the logits and the scoring (groups and bias play no part: the
   selection is piecewise constant, its gradient is zero); `ids` are the forward's topk_ids and
   `weights` the incoming d(topk_weights). Per token, with raw_q = score[id_q], S = sum_q raw_q:
     g_q = scale * dw_q;  D = S + renorm_eps;  draw_q = renorm ? (D > 0 ? (g_q - sum_p g_p * raw_p / D) / D : 0) : g_q
     softmax: dlogit_e = score_e * (draw(e) - sum_q draw_q * raw_q)   (draw(e) = 0 if e not chosen)
     sigmoid: dlogit_e = draw(e) * score_e * (1 - score_e)
   Sums run in slot order; every worker validates the ids (range, no expert twice) before anyone writes. */
typedef struct moe_route_bwd_job {
  moe_route_job_t f;
  /* 112 */ uint32_t dsrc;
  int32_t pad[3];
} moe_route_bwd_job_t;
_Static_assert(sizeof(moe_route_bwd_job_t) == 128, "moe_route_bwd_job_t: update src/primitives/moe/routing/wasm_routing_backward.ts");

enum { ROUTE_BWD_ID_RANGE = 114, ROUTE_BWD_ID_TWICE = 115 };

/* Ids in [0, E), no expert twice in a token (marks in the worker's scratch, cleared after each token). */
static int check_ids(moe_route_bwd_job_t* b, int32_t* mark) {
  const moe_route_job_t* j = &b->f;
  const int32_t* ids = (const int32_t*)(uintptr_t)j->ids;
  for (int32_t e = 0; e < j->E; e++) mark[e] = 0;
  for (int32_t t = 0; t < j->T; t++) {
    const int32_t* r = ids + (size_t)t * (size_t)j->k;
    int bad = 0;
    for (int32_t q = 0; q < j->k && !bad; q++) {
      if (r[q] < 0 || r[q] >= j->E) { op_error(&b->f.h, ROUTE_BWD_ID_RANGE, t, q, r[q]); bad = 1; }
      else if (mark[r[q]]) { op_error(&b->f.h, ROUTE_BWD_ID_TWICE, t, q, r[q]); bad = 1; }
      else mark[r[q]] = 1;
    }
    for (int32_t q = 0; q < j->k; q++) if (r[q] >= 0 && r[q] < j->E) mark[r[q]] = 0;
    if (bad) return 1;
  }
  return 0;
}

static void route_token_bwd(const moe_route_bwd_job_t* b, int32_t t, const route_scratch_t* s) {
  const moe_route_job_t* j = &b->f;
  const int32_t E = j->E, k = j->k;
  float* sc = s->score;
  scores_of(j, t, sc);
  const int32_t* id = (const int32_t*)(uintptr_t)j->ids + (size_t)t * (size_t)k;
  const float* dw = (const float*)(uintptr_t)j->weights + (size_t)t * (size_t)k;
  float* draw = s->topv;
  float sum = 0.0f;
  for (int32_t q = 0; q < k; q++) sum += sc[id[q]];
  if (j->renorm) {
    const float den = sum + j->renorm_eps;
    float dot = 0.0f;
    for (int32_t q = 0; q < k; q++) dot += (j->scale * dw[q]) * (den > 0.0f ? sc[id[q]] / den : 0.0f);
    for (int32_t q = 0; q < k; q++) draw[q] = den > 0.0f ? ((j->scale * dw[q]) - dot) / den : 0.0f;
  } else {
    for (int32_t q = 0; q < k; q++) draw[q] = j->scale * dw[q];
  }
  float* out = (float*)(uintptr_t)b->dsrc + (size_t)t * (size_t)E;
  if (j->scoring == SCORE_SIGMOID) {
    int32_t e = 0;
    for (; e + 4 <= E; e += 4) wasm_v128_store(out + e, VF(0.0f));
    for (; e < E; e++) out[e] = 0.0f;
    for (int32_t q = 0; q < k; q++) out[id[q]] = draw[q] * (sc[id[q]] * (1.0f - sc[id[q]]));
    return;
  }
  float c = 0.0f;
  for (int32_t q = 0; q < k; q++) c += draw[q] * sc[id[q]];
  const v128_t nc = VF(-c);
  int32_t e = 0;
  for (; e + 4 <= E; e += 4) wasm_v128_store(out + e, wasm_f32x4_mul(wasm_v128_load(sc + e), nc));
  for (; e < E; e++) out[e] = sc[e] * -c;
  for (int32_t q = 0; q < k; q++) out[id[q]] = sc[id[q]] * (draw[q] - c);
}

int run_moe_route_bwd(op_head_t* h, int tid) {
  moe_route_bwd_job_t* b = (moe_route_bwd_job_t*)h;
  const route_scratch_t s = scratch_of(&b->f, tid);
  if (check_inputs(&b->f) || check_ids(b, (int32_t*)s.sel)) return 0;
  const int32_t tile = b->f.tile, ntiles = (b->f.T + tile - 1) / tile;
  int done = 0;
  for (int32_t q; (q = op_next_tile(h)) < ntiles; done++)
    for (int32_t t = q * tile; t < MIN(b->f.T, q * tile + tile); t++) route_token_bwd(b, t, &s);
  return done;
}
