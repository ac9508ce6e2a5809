/* Per-row (per-token) dynamic int8 quantization, symmetric: s = amax / 127 rounded to f32 (1 for a row
   of zeros), q = RNE(x / s) computed in f64 and saturated to [-127, 127] (the division in f64 makes the
   result identical to quant.perTokenInt8 on the host). Rows in tiles of 8; every row belongs to one tile.
   With a grouped src the row count is offs[G], read and checked here (0 <= offs[G] <= rows). A row with a
   NaN or infinity is reported (the job fails) and left unwritten; other rows may have been written. */
#include "op_job.h"
#include "common.h"

typedef struct quant_rows_job {
  op_head_t h;
  /* 32 */ uint32_t src, dst, scales, offs;
  /* 48 */ int32_t rows, cols, src_ld, dst_ld;
  /* 64 */ int32_t src_dt, G, pad0, pad1;
} quant_rows_job_t;
_Static_assert(sizeof(quant_rows_job_t) == 80, "quant_rows_job_t layout changed: update quantize.ts");

enum { ERR_QROWS_OFFS = 101, ERR_QROWS_NONFINITE = 102 };

static float load_src(const quant_rows_job_t* j, const char* row, int32_t k) {
  return j->src_dt == 0 ? ((const float*)row)[k] : j->src_dt == 1 ? bf16_to_f32(((const uint16_t*)row)[k]) : f16_to_f32(((const uint16_t*)row)[k]);
}

/* max that keeps a NaN from either side: a row with one NaN must be reported, not quantized. */
static float nan_max(float a, float b) { return a != a || b > a || b != b ? (a != a ? a : b) : a; }

int run_quant_rows_s8(op_head_t* h) {
  quant_rows_job_t* j = (quant_rows_job_t*)h;
  int32_t rows = j->rows;
  if (j->offs) {
    const int32_t n = ((const int32_t*)(uintptr_t)j->offs)[j->G];
    if (n < 0 || n > j->rows) { op_error(h, ERR_QROWS_OFFS, j->G, n, j->rows); return 0; }
    rows = n;
  }
  const size_t esz = j->src_dt == 0 ? 4 : 2;
  int done = 0;
  for (int32_t t; (t = op_next_tile(h)) * 8 < rows; done++) {
    for (int32_t r = t * 8; r < MIN(rows, t * 8 + 8); r++) {
      const char* x = (const char*)(uintptr_t)j->src + (size_t)r * (size_t)j->src_ld * esz;
      int8_t* q = (int8_t*)(uintptr_t)j->dst + (size_t)r * (size_t)j->dst_ld;
      float amax = 0.0f;
      if (j->src_dt == 0) {
        v128_t m = wasm_f32x4_splat(0.0f);
        int32_t k = 0;
        for (; k + 4 <= j->cols; k += 4) m = wasm_f32x4_max(m, wasm_f32x4_abs(wasm_v128_load((const float*)x + k)));
        /* lanes reduced with f32x4.max, which keeps a NaN (a scalar a > b ? a : b would drop it) */
        m = wasm_f32x4_max(m, wasm_i32x4_shuffle(m, m, 2, 3, 0, 1));
        m = wasm_f32x4_max(m, wasm_i32x4_shuffle(m, m, 1, 0, 3, 2));
        amax = wasm_f32x4_extract_lane(m, 0);
        for (; k < j->cols; k++) amax = nan_max(amax, __builtin_fabsf(((const float*)x)[k]));
      } else {
        for (int32_t k = 0; k < j->cols; k++) amax = nan_max(amax, __builtin_fabsf(load_src(j, x, k)));
      }
      if (!(amax <= 3.40282347e38f)) { /* NaN or inf: no scale represents the row */
        op_error(h, ERR_QROWS_NONFINITE, r, 0, 0);
        continue;
      }
      const float s = amax > 0.0f ? amax / 127.0f : 1.0f;
      ((float*)(uintptr_t)j->scales)[r] = s;
      const double inv = (double)s;
      for (int32_t k = 0; k < j->cols; k++) {
        double v = __builtin_rint((double)load_src(j, x, k) / inv);
        v = v > 127.0 ? 127.0 : v < -128.0 ? -128.0 : v;
        q[k] = (int8_t)(int32_t)v;
      }
    }
  }
  return done;
}
