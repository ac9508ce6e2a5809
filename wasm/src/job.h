/* The job a primitive posts to the workers: one struct in the shared heap, read by every worker.
   The layout is mirrored field by field in src/runtime/job_layout.ts: change both together. */
#pragma once
#include <stdint.h>

enum { KIND_GROUPED_M = 1, KIND_GROUPED_K = 2 };
/* Element types. The fast f32 path reads only the first three; the others are decoded by the fused
   paths (wasm/src/lowp.h). 4-bit types: element i is the low (even i) or high nibble of byte i/2. */
enum {
  DT_F32 = 0, DT_BF16 = 1, DT_F16 = 2, DT_S8 = 3, DT_U8 = 4, DT_S4 = 5, DT_U4 = 6,
  DT_F8_E4M3 = 7, DT_F8_E5M2 = 8, DT_F4_E2M1 = 9, DT_S32 = 10, DT_E8M0 = 11,
};
/* Compute paths. F32: the original kernel, epilogue (bias, eltwise 1..5, leading sum) in registers.
   F32_FUSED: f32 microkernel into a scratch C tile, then the generic per-tile epilogue; operands of
   any type are decoded in packing, zero points and K-varying scales folded there. INT: s8/u8 src x
   s8/u8/s4/u4 weights widened to int16, exact int32 accumulation, the same epilogue. */
enum { PATH_F32 = 0, PATH_F32_FUSED = 1, PATH_INT = 2 };
/* wei_packed: 0 plain (strides w_k, w_n), 1 f32:p8 panels (f32 [ceil(N/8)][K][8] per group),
   3 x8:p8 (8-bit codes [ceil(N/8)][Kp][8] bytes per group), 4 x4:p8k2 (4-bit codes, k-pairs in one
   byte, [ceil(N/8)][Kp/2][8] bytes); Kp = K rounded up to even; wasm/src/gemm-lowp.c. The x8 / x4
   panels serve both the f32 x low-precision kernels and the integer path. (2 was the integer path's
   own int16 layout, gone since that path reads the code panels.) 5 x16:p8 (bf16 / f16 codes
   [ceil(N/8)][K][8] uint16 per group, no K padding; f32-gemm-2x8wx16-wasmsimd.c), read by the fast path
   (gemm-driver.c run_tile) and the fused f32 path (gemm-lowp.c), never by the integer path. */
enum { WEI_PLAIN = 0, WEI_F32_P8 = 1, WEI_X8_P8 = 3, WEI_X4_P8K2 = 4, WEI_X16_P8 = 5 };
/* How a job learns where each group lives: a canonical offsets buffer (P#1 grouped memory, P#2
   offsets attribute), uniform groups (dense and batched matmul: group g starts at g * group stride),
   or a table of per-group pointers with the rows of each group in a runtime-dims buffer (P#3). */
enum { GROUPS_OFFSETS = 0, GROUPS_UNIFORM = 1, GROUPS_POINTERS = 2 };

/* One entry of the P#3 pointer table (`job.groups`): expert g's own buffers and geometry. */
typedef struct group_rec {
  uint32_t src, wei, dst, max_rows; /* max_rows: rows that fit in both src and dst allocations */
  int32_t K, N, s_0, d_0;
  int32_t w_k, w_n, wei_packed, pad;
} group_rec_t;
_Static_assert(sizeof(group_rec_t) == 48, "group_rec_t layout changed: update grouped_gemm executor");
/* Eltwise codes: 1..5 are also in the fast path's in-register epilogue. */
enum {
  ELT_RELU = 1, ELT_LINEAR = 2, ELT_CLIP = 3, ELT_ABS = 4, ELT_SQUARE = 5, ELT_GELU_ERF = 6,
  ELT_GELU_TANH = 7, ELT_SWISH = 8, ELT_LOGISTIC = 9, ELT_TANH = 10, ELT_EXP = 11,
};
/* Fused post-op chain entries (job.po), after bias and the GLU. */
enum { PO_ELTWISE = 1, PO_SUM = 2, PO_BIN_ADD = 3, PO_BIN_MUL = 4, PO_DGLU = 5 /* GLU backward, the only post-op (dglu.h) */ };
enum { GLU_NONE = 0, GLU_SWIGLU = 1, GLU_GEGLU_ERF = 2, GLU_GEGLU_TANH = 3, GLU_SWIGLU_OAI = 4 };
enum { GLU_HALVES = 0, GLU_INTERLEAVED = 1, GLU_BLOCKS32 = 2 };
/* Scales and zero points (job.q). */
enum { Q_SRC_SCALE = 0, Q_WEI_SCALE = 1, Q_DST_SCALE = 2, Q_SRC_ZP = 3, Q_WEI_ZP = 4, Q_DST_ZP = 5, NQ = 6 };
enum {
  ERR_NONE = 0, ERR_OFFS_FIRST = 1, ERR_OFFS_DECREASING = 2, ERR_OFFS_TOTAL = 3,
  ERR_OFFS_MISMATCH = 4, ERR_OFFS_SIZES = 5, ERR_DIMS_NEGATIVE = 6, ERR_DIMS_CAPACITY = 7,
  /* MoE row maps (job.tok_idx / tok_ks): a token index outside [-1, src_rows) (gather) or [-1, T) (scatter),
     a k-slot outside [0, topk), a padding row with a slot, two routed rows scattered to one dst row. */
  ERR_ROW_INDEX = 8, ERR_ROW_SLOT = 9, ERR_ROW_DUPLICATE = 10,
  /* expert_of[g] outside [0, experts). */
  ERR_EXPERT_MAP = 11,
};
#define MAX_ELT 4
#define MAX_PO 8

/* Where one scale / zero-point value lives: element
     g * st_g + row * st_r + (k / blk_k) * st_k + (n / blk_n) * st_n
   of ptr (type dt), with row the absolute row (offs[g] + m; m for uniform and pointer groups), k the
   absolute k (offs[g] + k for variable-K groups), n the weights column for weights and the dst
   column for dst. A zero stride broadcasts. ptr == 0: absent. table != 0: ptr holds G pointers, one
   per group (Proposal #3 per-expert memories), and st_g is not used.
   emb != 0 (weights only): the values are stored in the group's x8 / x4 panels (`+q` layouts,
   gemm-lowp.c), 8 per panel and K block; ptr, table, st_g, st_n are unused, st_k != 0 says they vary
   along K (blocks of blk_k), emb = 1 scales / 2 zero points (which section of the panel). */
typedef struct qarg {
  uint32_t ptr;
  int32_t table, dt, st_g;
  int32_t st_r, st_k, st_n, blk_k;
  int32_t blk_n, emb, pad1, pad2;
} qarg_t;
_Static_assert(sizeof(qarg_t) == 48, "qarg_t layout changed: update job_layout.ts");

/* One fused post-op. PO_ELTWISE: alg, alpha, beta. PO_SUM: x += alpha * dst_before. PO_BIN_*: the
   src1 element g * st_g + row * st_r + n * st_n of ptr (table: per-group pointers), n the dst column,
   of element type alg (DT_F32, DT_BF16, DT_F16, DT_S8, DT_U8, DT_S32). */
typedef struct post_op {
  int32_t kind, alg;
  float alpha, beta;
  uint32_t ptr;
  int32_t table, st_g, st_r;
  int32_t st_n, pad0, pad1, pad2;
} post_op_t;
_Static_assert(sizeof(post_op_t) == 48, "post_op_t layout changed: update job_layout.ts");

typedef struct job {
  /* 0 */ int32_t kind, group_mode, status, err_index;
  /* 16 */ int32_t err_a, err_b, tile_next, nthreads;
  /* 32 */ int32_t G, M, K, N;
  /* 48 */ uint32_t src, wei, dst, bias;
  /* 64 */ uint32_t offs, offs2, sizes, scratch;
  /* 80 */ int32_t scratch_stride, mb, nb, kc;
  /* 96: element strides. src (s_g, s_0, s_1) is [g][row][col]; wei (w_g, w_k, w_n); dst (d_g, d_0, d_1). */
  int32_t s_g, s_0, s_1, w_g;
  /* 112 */ int32_t w_k, w_n, d_g, d_0;
  /* 128 */ int32_t d_1, b_g, b_n, wei_packed;
  /* 144 */ int32_t dt_src, dt_wei, dt_dst, total;
  /* 160 */ int32_t n_elt, has_sum; float sum_scale; uint32_t groups;
  /* 176 */ int32_t elt_alg[MAX_ELT];
  /* 192 */ float elt_alpha[MAX_ELT];
  /* 208 */ float elt_beta[MAX_ELT];
  /* 224: the fused paths (rfcs/0002). nb is the tile's GEMM columns; with a GLU a tile writes nb/2
     dst columns. b_dt: bias type (f32/bf16/f16, all paths); n_po: entries of po. */
  int32_t path, b_dt, glu_alg, glu_layout;
  /* 240: kc_packed: the fast path's largest K block on packed weights (0: kc); the A block holds
     mb x max(kc, kc_packed) floats. */
  float glu_alpha, glu_limit; int32_t n_po, kc_packed;
  /* 256 */ qarg_t q[NQ];
  /* 544 */ post_op_t po[MAX_PO];
  /* 928: MoE row maps (cuDNN gather / scatter modes) and batched token counts.
     gather: A row m of the routed rows reads src row tok_idx[m] (< src_rows), -1 = a padding row that reads zeros.
     scatter_k > 0: routed row m writes dst row tok_idx[m] * scatter_k + tok_ks[m] (< dst_rows); -1 rows are not written.
     counts (uniform groups): group g has counts[g] <= M valid rows (vLLM batched format); the rest is never touched.
     seen: bytes of per-worker scratch past the GEMM's for the scatter duplicate check (one bit per dst row). */
  uint32_t tok_idx, tok_ks; int32_t gather, scatter_k;
  /* 944 */ int32_t src_rows, dst_rows; uint32_t counts; int32_t seen_bytes;
  /* 960: wcache_k: plain weights are packed once per N-block into a per-worker cache of wcache_k x nb
     floats (panels [nb/8][K][8]) when the group's K fits (0: per tile, K-blocked).
     zero_fill (grouped_m, offsets mode; cuDNN's none mode): offs[0] may be > 0, and dst rows in no
     group ([0, offs[0]) and [offs[G], M)) are written with zeros.
     expert_of (grouped_m, offsets mode): G s32 entries, group g runs expert expert_of[g] (< experts):
     its weights, bias and per-expert scales; 0: group g is expert g. */
  int32_t wcache_k, zero_fill; uint32_t expert_of; int32_t experts;
  /* 976: accum_mode (attr accumulation_mode, rfcs/0007): ACC_STRICT the kernels' fixed order (packed gives
     the bits of plain); ACC_RELAXED lets 1-2 row tiles of s8 / u8 / s4 / u4 codes run the reordered
     f32_gemm_1x16r* kernels (gemm-lowp.c). */
  int32_t accum_mode, pad_acc0, pad_acc1, pad_acc2;
  /* 992 */
} job_t;

enum { ACC_STRICT = 0, ACC_RELAXED = 1 };

_Static_assert(sizeof(job_t) == 992, "job_t layout changed: update job_layout.ts");
