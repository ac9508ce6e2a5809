/* Per-row (per-token) dynamic int8 quantization, symmetric: s = amax / 127 rounded to f32 (1 for a row
   of zeros), q = RNE(x / s) computed in f64 and saturated to [-127, 127] (the division in f64 makes the
   result identical to quant.perTokenInt8 on the host). Rows in tiles of 8; every row belongs to one tile.
   With a grouped src the row count is offs[G], read and checked here (0 <= offs[G] <= rows). A row with a
   NaN or infinity is reported (the job fails) and left unwritten; other rows may have been written.
   With `runs` (nruns > 0; grouped_gemm, Proposal #3: experts in buffers of their own) the rows come as runs of
   their own src / dst / scales / cols / strides, tiled from tile0 on (the host lays them out); src, dst, scales,
   rows, cols, src_ld, dst_ld and offs are then unused, and a bad row reports its run in err_a. */
#include "op_job.h"
#include "common.h"

typedef struct quant_rows_job {
  op_head_t h;
  /* 32 */ uint32_t src, dst, scales, offs;
  /* 48 */ int32_t rows, cols, src_ld, dst_ld;
  /* 64 */ int32_t src_dt, G;
  /* 72 */ uint32_t runs;
  /* 76 */ int32_t nruns;
} quant_rows_job_t;
_Static_assert(sizeof(quant_rows_job_t) == 80, "quant_rows_job_t layout changed: update quantize.ts");

/* One run of rows (32 bytes; wasm_grouped_gemm_dq.ts writes them). */
typedef struct quant_run {
  uint32_t src, dst, scales;
  int32_t rows, cols, src_ld, dst_ld, tile0;
} quant_run_t;
_Static_assert(sizeof(quant_run_t) == 32, "quant_run_t layout changed: update wasm_grouped_gemm_dq.ts");

enum { ERR_QROWS_OFFS = 101, ERR_QROWS_NONFINITE = 102 };

static float load_src(int32_t src_dt, const char* row, int32_t k) {
  return src_dt == 0 ? ((const float*)row)[k] : src_dt == 1 ? bf16_to_f32(((const uint16_t*)row)[k]) : f16_to_f32(((const uint16_t*)row)[k]);
}

/* max that keeps a NaN from either side: a row with one NaN must be reported, not quantized. */
static float nan_max(float a, float b) { return a != a || b > a || b != b ? (a != a ? a : b) : a; }

/* Row r of one src (x) to s8 (q) with its scale; 0, or 1 when the row has a NaN or an infinity (left unwritten). */
static int quant_row(int32_t src_dt, const char* x, int8_t* q, float* scale, int32_t cols) {
  float amax = 0.0f;
  if (src_dt == 0) {
    v128_t m = wasm_f32x4_splat(0.0f);
    int32_t k = 0;
    for (; k + 4 <= cols; k += 4) m = wasm_f32x4_max(m, wasm_f32x4_abs(wasm_v128_load((const float*)x + k)));
    /* lanes reduced with f32x4.max, which keeps a NaN (a scalar a > b ? a : b would drop it) */
    m = wasm_f32x4_max(m, wasm_i32x4_shuffle(m, m, 2, 3, 0, 1));
    m = wasm_f32x4_max(m, wasm_i32x4_shuffle(m, m, 1, 0, 3, 2));
    amax = wasm_f32x4_extract_lane(m, 0);
    for (; k < cols; k++) amax = nan_max(amax, __builtin_fabsf(((const float*)x)[k]));
  } else {
    for (int32_t k = 0; k < cols; k++) amax = nan_max(amax, __builtin_fabsf(load_src(src_dt, x, k)));
  }
  if (!(amax <= 3.40282347e38f)) return 1; /* NaN or inf: no scale represents the row */
  const float s = amax > 0.0f ? amax / 127.0f : 1.0f;
  *scale = s;
  const double inv = (double)s;
  int32_t k = 0;
  if (src_dt == 0) { /* 8 f32 at a time: the same f64 division, rounding and clamp, two lanes per op */
    const v128_t d = wasm_f64x2_splat(inv), hi = wasm_f64x2_splat(127.0), lo = wasm_f64x2_splat(-128.0);
    /* pmin(v, hi) = hi < v ? hi : v and pmax(v, lo) = v < lo ? lo : v keep a NaN (0 / 0 when s underflows to 0),
       which the saturating conversion makes 0, as the scalar loop's conversion does */
#define Q2(v) wasm_i32x4_trunc_sat_f64x2_zero(wasm_f64x2_pmax(wasm_f64x2_pmin(wasm_f64x2_nearest(wasm_f64x2_div((v), d)), hi), lo))
#define Q4(v) wasm_i32x4_shuffle(Q2(wasm_f64x2_promote_low_f32x4(v)), Q2(wasm_f64x2_promote_low_f32x4(wasm_i32x4_shuffle((v), (v), 2, 3, 2, 3))), 0, 1, 4, 5)
    for (; k + 8 <= cols; k += 8) {
      const v128_t a = wasm_v128_load((const float*)x + k), b = wasm_v128_load((const float*)x + k + 4);
      const v128_t h = wasm_i16x8_narrow_i32x4(Q4(a), Q4(b));
      wasm_v128_store64_lane(q + k, wasm_i8x16_narrow_i16x8(h, h), 0);
    }
#undef Q4
#undef Q2
  }
  for (; k < cols; k++) {
    double v = __builtin_rint((double)load_src(src_dt, x, k) / inv);
    v = v > 127.0 ? 127.0 : v < -128.0 ? -128.0 : v;
    q[k] = (int8_t)(int32_t)v;
  }
  return 0;
}

int run_quant_rows_s8(op_head_t* h) {
  quant_rows_job_t* j = (quant_rows_job_t*)h;
  const size_t esz = j->src_dt == 0 ? 4 : 2;
  int done = 0;
  if (j->nruns > 0) {
    const quant_run_t* runs = (const quant_run_t*)(uintptr_t)j->runs;
    const quant_run_t* last = &runs[j->nruns - 1];
    const int32_t tiles = last->tile0 + (last->rows + 7) / 8;
    int32_t k = 0; /* tiles come in increasing order per thread: the run search moves forward */
    for (int32_t t; (t = op_next_tile(h)) < tiles; done++) {
      while (k + 1 < j->nruns && runs[k + 1].tile0 <= t) k++;
      const quant_run_t* u = &runs[k];
      const int32_t r0 = (t - u->tile0) * 8;
      for (int32_t r = r0; r < MIN(u->rows, r0 + 8); r++) {
        const char* x = (const char*)(uintptr_t)u->src + (size_t)r * (size_t)u->src_ld * esz;
        int8_t* q = (int8_t*)(uintptr_t)u->dst + (size_t)r * (size_t)u->dst_ld;
        if (quant_row(j->src_dt, x, q, (float*)(uintptr_t)u->scales + r, u->cols)) op_error(h, ERR_QROWS_NONFINITE, r, k, 0);
      }
    }
    return done;
  }
  int32_t rows = j->rows;
  if (j->offs) {
    const int32_t n = ((const int32_t*)(uintptr_t)j->offs)[j->G];
    if (n < 0 || n > j->rows) { op_error(h, ERR_QROWS_OFFS, j->G, n, j->rows); return 0; }
    rows = n;
  }
  for (int32_t t; (t = op_next_tile(h)) * 8 < rows; done++) {
    for (int32_t r = t * 8; r < MIN(rows, t * 8 + 8); r++) {
      const char* x = (const char*)(uintptr_t)j->src + (size_t)r * (size_t)j->src_ld * esz;
      int8_t* q = (int8_t*)(uintptr_t)j->dst + (size_t)r * (size_t)j->dst_ld;
      if (quant_row(j->src_dt, x, q, (float*)(uintptr_t)j->scales + r, j->cols)) op_error(h, ERR_QROWS_NONFINITE, r, 0, 0);
    }
  }
  return done;
}
