/* MoE dispatch (permute): top-k expert ids [T, k] -> routed rows sorted by local expert, stable
   (ascending token, then slot), as cuDNN's token_index / token_ks, their inverse row_of [T, k], the
   grouped offsets (or the batched format's counts), and optionally the permuted hidden rows.

   Every worker validates the ids and the expert map and computes the whole placement (O(T k + E)) in
   its private scratch, so no worker writes before all data is known good and no worker waits for
   another. Tile 0 writes the index outputs; tiles 1.. copy 16 routed rows of hidden each. */
#include "op_job.h"
#include "common.h"

typedef struct dispatch_job {
  op_head_t h;
  /* 32 */ uint32_t ids, hidden, dst, offs;
  /* 48 */ uint32_t token_index, token_ks, row_of, expert_map;
  /* 64 */ uint32_t counts, scratch; int32_t scratch_stride, T;
  /* 80 */ int32_t k, E, G, K;
  /* 96 */ int32_t hidden_ld, dst_ld, esz, block;
  /* 112 */ int32_t batched, cap, R, pad;
} dispatch_job_t;
_Static_assert(sizeof(dispatch_job_t) == 128, "dispatch_job_t layout changed: update src/primitives/moe/dispatch");

enum { ERR_DISPATCH_ID = 120, ERR_DISPATCH_DUP = 121, ERR_DISPATCH_MAP = 122, ERR_DISPATCH_CAP = 123 };
#define ROWS_PER_TILE 16

/* Validates and places; returns 0 on success (every worker reaches the same verdict). */
static int place(dispatch_job_t* j, int32_t* cnt, int32_t* start, int32_t* pos, int32_t* inv) {
  const int32_t* ids = (const int32_t*)(uintptr_t)j->ids;
  const int32_t* map = (const int32_t*)(uintptr_t)j->expert_map;
  const int32_t T = j->T, k = j->k, G = j->G, n = T * k;
  for (int32_t i = 0; i < n; i++) {
    const int32_t e = ids[i];
    if (e < 0 || e >= j->E) { op_error(&j->h, ERR_DISPATCH_ID, i, e, j->E); return 1; }
    /* Contiguous: an expert repeated in a token's slots gets one routed row per slot (vLLM, cuDNN);
       batched: one row per token and expert. */
    if (j->batched)
      for (int32_t s = i - i % k; s < i; s++)
        if (ids[s] == e) { op_error(&j->h, ERR_DISPATCH_DUP, i, e, s % k); return 1; }
  }
  if (map)
    for (int32_t e = 0; e < j->E; e++)
      if (map[e] < -1 || map[e] >= G) { op_error(&j->h, ERR_DISPATCH_MAP, e, map[e], G); return 1; }
  for (int32_t g = 0; g < G; g++) cnt[g] = 0;
  for (int32_t i = 0; i < n; i++) {
    const int32_t l = map ? map[ids[i]] : ids[i];
    if (l >= 0) cnt[l]++;
  }
  if (j->batched) {
    for (int32_t g = 0; g < G; g++)
      if (cnt[g] > j->cap) { op_error(&j->h, ERR_DISPATCH_CAP, g, cnt[g], j->cap); return 1; }
    for (int32_t g = 0; g < G; g++) start[g] = g * j->cap;
  } else {
    start[0] = 0;
    for (int32_t g = 0; g < G; g++) start[g + 1] = start[g] + (cnt[g] + j->block - 1) / j->block * j->block;
  }
  for (int32_t r = 0; r < j->R; r++) inv[r] = -1;
  /* cursors: reuse cnt as the next free row of each expert */
  for (int32_t g = 0; g < G; g++) cnt[g] = start[g];
  for (int32_t i = 0; i < n; i++) { /* i = t * k + s: ascending token, then slot */
    const int32_t l = map ? map[ids[i]] : ids[i];
    pos[i] = l >= 0 ? cnt[l]++ : -1;
    if (l >= 0) inv[pos[i]] = i;
  }
  for (int32_t g = 0; g < G; g++) cnt[g] -= start[g]; /* back to counts */
  return 0;
}

int run_moe_dispatch(op_head_t* h, int tid) {
  dispatch_job_t* j = (dispatch_job_t*)h;
  const int32_t G = j->G, n = j->T * j->k;
  int32_t* cnt = (int32_t*)(uintptr_t)(j->scratch + (uint32_t)tid * (uint32_t)j->scratch_stride);
  int32_t* start = cnt + G;
  int32_t* pos = start + G + 1;
  int32_t* inv = pos + n;
  if (place(j, cnt, start, pos, inv)) return 0;
  const int32_t used = j->batched ? j->R : start[G];
  const int32_t row_tiles = j->hidden ? (j->R + ROWS_PER_TILE - 1) / ROWS_PER_TILE : 0;
  int done = 0;
  for (int32_t t; (t = op_next_tile(h)) < 1 + row_tiles; done++) {
    if (t == 0) {
      int32_t* ti = (int32_t*)(uintptr_t)j->token_index;
      int32_t* ks = (int32_t*)(uintptr_t)j->token_ks;
      int32_t* ro = (int32_t*)(uintptr_t)j->row_of;
      for (int32_t r = 0; r < j->R; r++) {
        ti[r] = inv[r] >= 0 ? inv[r] / j->k : -1;
        ks[r] = inv[r] >= 0 ? inv[r] % j->k : -1;
      }
      for (int32_t i = 0; i < n; i++) ro[i] = pos[i];
      if (j->batched) {
        int32_t* c = (int32_t*)(uintptr_t)j->counts;
        for (int32_t g = 0; g < G; g++) c[g] = cnt[g];
      } else {
        int32_t* o = (int32_t*)(uintptr_t)j->offs;
        for (int32_t g = 0; g <= G; g++) o[g] = start[g];
      }
      continue;
    }
    const char* src = (const char*)(uintptr_t)j->hidden;
    char* dst = (char*)(uintptr_t)j->dst;
    const size_t row_bytes = (size_t)j->K * (size_t)j->esz;
    for (int32_t r = (t - 1) * ROWS_PER_TILE; r < MIN(j->R, t * ROWS_PER_TILE); r++) {
      char* out = dst + (size_t)r * (size_t)j->dst_ld * (size_t)j->esz;
      if (inv[r] >= 0) __builtin_memcpy(out, src + (size_t)(inv[r] / j->k) * (size_t)j->hidden_ld * (size_t)j->esz, row_bytes);
      else if (!j->batched && r < used) __builtin_memset(out, 0, row_bytes); /* alignment padding: zeros for the GEMM */
    }
  }
  return done;
}
