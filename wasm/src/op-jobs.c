/* Dispatch of the op jobs (op_job.h) by kind. Each op lives in its own file and adds one case here. */
#include "op_job.h"

typedef struct fill_job {
  op_head_t h;
  /* 32 */ uint32_t ptr;
  int32_t n, value, pad;
} fill_job_t;

static int run_fill(fill_job_t* j) {
  int done = 0;
  int32_t* p = (int32_t*)(uintptr_t)j->ptr;
  if (j->n < 0) { op_error(&j->h, 1, 0, j->n, 0); return 0; }
  for (int32_t t; (t = op_next_tile(&j->h)) * 1024 < j->n; done++)
    for (int32_t i = t * 1024; i < MIN(j->n, t * 1024 + 1024); i++) p[i] = j->value;
  return done;
}

int run_quant_rows_s8(op_head_t* h);
int run_moe_route(op_head_t* h, int tid);

int run_moe_dispatch(op_head_t* h, int tid);
int run_moe_combine(op_head_t* h);
int run_moe_route_bwd(op_head_t* h, int tid);
int run_moe_combine_bwd(op_head_t* h);
int run_moe_activation(op_head_t* h);
int run_matmul_bwd_bias(op_head_t* h);
int run_glu_bwd(op_head_t* h);
int run_dglu_reduce(op_head_t* h);
int run_pack_weights(op_head_t* h);

int run_op_job(op_head_t* h, int tid) {
  switch (h->kind) {
    case KIND_OP_FILL: return run_fill((fill_job_t*)h);
    case KIND_MOE_DISPATCH: return run_moe_dispatch(h, tid);
    case KIND_MOE_COMBINE: return run_moe_combine(h);
    case KIND_QUANT_ROWS_S8: return run_quant_rows_s8(h);
    case KIND_MOE_ROUTE: return run_moe_route(h, tid);
    case KIND_MOE_ROUTE_BWD: return run_moe_route_bwd(h, tid);
    case KIND_MOE_COMBINE_BWD: return run_moe_combine_bwd(h);
    case KIND_MOE_ACTIVATION: return run_moe_activation(h);
    case KIND_MATMUL_BWD_BIAS: return run_matmul_bwd_bias(h);
    case KIND_GLU_BWD: return run_glu_bwd(h);
    case KIND_DGLU_REDUCE: return run_dglu_reduce(h);
    case KIND_PACK_WEIGHTS: return run_pack_weights(h);
    default: op_error(h, ERR_OP_UNKNOWN_KIND, 0, h->kind, 0); return 0;
  }
}
