/* Entry points for tests only: the epilogue's vector math and the element codecs, applied to arrays,
   so that test/fused_kernels.test.ts can compare them with double-precision truth. */
#include "common.h"
#include "job.h"
#include "lowp.h"
#include "vmath.h"
#include "driver.h"

/* Bytes of one worker's scratch the driver carves for this job (must not exceed job.scratch_stride). */
EXPORT(check_scratch_bytes) int32_t check_scratch_bytes(const job_t* j) {
  scratch_t s;
  return (int32_t)scratch_setup(j, 0, &s) + j->seen_bytes; /* + the scatter duplicate bitmap */
}

/* out[i] = eltwise alg (job codes 1..20; 100 = erf) of in[i]; n a multiple of 4. */
EXPORT(check_eltwise) void check_eltwise(int32_t alg, float alpha, float beta, const float* in, float* out, int32_t n) {
  for (int32_t i = 0; i < n; i += 4) {
    const v128_t x = wasm_v128_load(in + i);
    wasm_v128_store(out + i, alg == 100 ? v_erf(x) : v_eltwise(x, alg, alpha, beta));
  }
}

/* out[i] = element i of a buffer of type dt, decoded. */
EXPORT(check_decode) void check_decode(int32_t dt, const void* in, float* out, int32_t n) {
  for (int32_t i = 0; i < n; i++) out[i] = load_any(in, dt, (size_t)i);
}

/* Element i of a dst buffer of type dt = in[i], encoded (round to nearest even, saturating). */
EXPORT(check_encode) void check_encode(int32_t dt, const float* in, void* out, int32_t n) {
  for (int32_t i = 0; i < n; i++) store_any(out, dt, (size_t)i, in[i]);
}
