/* Jobs that are not GEMMs (MoE routing, dispatch, combine, backward helpers, ...). They share job_t's
   first 32 bytes (kind, status and error fields, the shared tile counter, the thread count) so that
   run_job can dispatch on `kind`; the rest of each struct is the op's own, mirrored in TypeScript
   through src/kernels/op_job.ts. Every op follows the driver's rules: check runtime data before
   writing anything, take tiles from `tile_next`, give each output element to exactly one tile, so
   results do not depend on the thread count. */
#pragma once
#include "common.h"

typedef struct op_head {
  /* 0 */ int32_t kind, reserved, status, err_index;
  /* 16 */ int32_t err_a, err_b, tile_next, nthreads;
} op_head_t;
_Static_assert(sizeof(op_head_t) == 32, "op_head_t must mirror job_t's first 32 bytes");

/* Kinds >= KIND_OP_FIRST are op jobs (job.h has the GEMM kinds 1 and 2). One entry per op. */
enum {
  KIND_OP_FIRST = 16,
  KIND_OP_FILL = 16, /* test op: fills n int32 with a value, in tiles of 1024 (op-jobs.c) */
  KIND_MOE_DISPATCH = 18, /* MoE dispatch / permute (moe-dispatch.c) */
  KIND_MOE_COMBINE = 19, /* MoE combine / weight-and-reduce (moe-combine.c) */
  KIND_QUANT_ROWS_S8 = 24, /* per-row dynamic int8 quantization (quant-rows-s8.c) */
  KIND_MOE_ROUTE = 17, /* MoE routing: logits -> top-k ids and weights (moe-route.c) */
  KIND_MOE_ROUTE_BWD = 40, /* routing backward: d(topk_weights) -> d(logits) (moe-route.c) */
  KIND_MOE_COMBINE_BWD = 41, /* combine backward: d(out) -> d(expert rows), d(topk_weights) (moe-combine.c) */
  KIND_MOE_ACTIVATION = 51, /* the GLU between an MoE layer's GEMMs as a stage of its own (moe-activation.c) */
  KIND_MATMUL_BWD_BIAS = 42, /* grouped matmul backward: diff_bias = per-group row sums of diff_dst (matmul-bwd-bias.c) */
  KIND_GLU_BWD = 45, /* GLU backward: h13, diff -> d(h13), dprob (glu-bwd.c) */
  KIND_DGLU_REDUCE = 46, /* dprob of a GEMM with the PO_DGLU epilogue: chunk sums -> dprob (glu-bwd.c) */
  KIND_PACK_WEIGHTS = 52, /* reorders into packed weights (f32:p8 / p8t, x8:p8, x4:p8k2), a plain copy (pack-weights.c) */
};

/* Op status codes start at 100 (job.h's ERR_* are the GEMM's offsets errors). */
enum { ERR_OP_UNKNOWN_KIND = 100 };

/* Reports a runtime-data error once (the first reporter wins; the others keep the first verdict). */
INLINE void op_error(op_head_t* h, int32_t code, int32_t idx, int32_t a, int32_t b) {
  int32_t expected = 0;
  if (__atomic_compare_exchange_n(&h->status, &expected, -1, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
    h->err_index = idx;
    h->err_a = a;
    h->err_b = b;
    __atomic_store_n(&h->status, code, __ATOMIC_SEQ_CST);
  }
}

INLINE int32_t op_next_tile(op_head_t* h) { return __atomic_fetch_add(&h->tile_next, 1, __ATOMIC_RELAXED); }

/* op-jobs.c: runs an op job on one worker (tid); returns the tiles it ran. */
int run_op_job(op_head_t* h, int tid);
