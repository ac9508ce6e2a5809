/* The forward GLU act(gate) * up on 4 columns, shared by the fused GEMM epilogue (gemm-fused.c) and the
   MoE activation stage (moe-activation.c) so that both give the same bits. */
#pragma once
#include "common.h"
#include "job.h"
#include "vmath.h"

INLINE v128_t glu4(int32_t alg, float alpha, float limit, v128_t g, v128_t u) {
  switch (alg) {
    case GLU_SWIGLU: return VMUL(VMUL(g, v_logistic(VMUL(g, VF(alpha)))), u);
    case GLU_GEGLU_ERF: return VMUL(v_gelu_erf(g), u);
    case GLU_GEGLU_TANH: return VMUL(v_gelu_tanh(g), u);
    default: { /* swiglu_oai (GPT-OSS): gate clamped from above, up on both sides */
      const v128_t lim = VF(limit);
      const v128_t gc = wasm_f32x4_min(g, lim);
      const v128_t uc = wasm_f32x4_min(lim, wasm_f32x4_max(wasm_f32x4_neg(lim), u));
      return VMUL(VMUL(gc, v_logistic(VMUL(gc, VF(alpha)))), VADD(uc, VF(1.0f)));
    }
  }
}
