/** Execution argument ids. Values match oneDNN's `DNNL_ARG_*` where oneDNN has them. */
export const ARG = {
  SRC: 1,
  SRC_0: 1,
  SRC_1: 2,
  DST: 17,
  DST_0: 17,
  FROM: 1,
  TO: 17,
  WEIGHTS: 33,
  WEIGHTS_0: 33,
  /** Second weights (oneDNN `DNNL_ARG_WEIGHTS_1`): an MoE layer's w2. */
  WEIGHTS_1: 34,
  BIAS: 41,
  /** Backward (oneDNN values): gradients of src, dst, weights, bias. */
  DIFF_SRC: 129,
  DIFF_DST: 145,
  DIFF_WEIGHTS: 161,
  DIFF_BIAS: 169,
  /** Gradient of the second weights (oneDNN `DNNL_ARG_DIFF_WEIGHTS_1`): an MoE layer's d(w2). */
  DIFF_WEIGHTS_1: 162,
  /** MoE (not oneDNN ids): `[T, k]` s32 expert ids of each token's k slots (routing output, dispatch input). */
  MOE_TOPK_IDS: 200,
  /** `[T, k]` f32 routing weights. */
  MOE_TOPK_WEIGHTS: 201,
  /** `[R]` s32 token of each routed (expert-sorted) row, cuDNN's TokenIndex; -1 marks a padding row. */
  MOE_TOKEN_INDEX: 202,
  /** `[R]` s32 k-slot of each routed row, cuDNN's TokenKs. */
  MOE_TOKEN_KS: 203,
  /** `[T, k]` s32 routed row of each (token, slot), the inverse of TOKEN_INDEX/TOKEN_KS; -1 = not routed here. */
  MOE_ROW_OF: 204,
  /** `[E]` s32 global -> local expert id (expert parallel), -1 = expert not on this rank. */
  MOE_EXPERT_MAP: 205,
  /** `[E]` f32 score-correction bias of routing (changes which experts are selected, not the weights). */
  MOE_CORRECTION_BIAS: 206,
  /** `[E]` s32 valid rows per expert of the batched format (vLLM expert_num_tokens). */
  MOE_EXPERT_NUM_TOKENS: 207,
  /** `[T, E]` router logits of an MoE layer. */
  MOE_ROUTER_LOGITS: 208,
  /** `[G, K]` bias of an MoE layer's w2 (ARG.BIAS is w13's `[G, 2I]`). */
  MOE_W2_BIAS: 209,
  /** Shared expert of an MoE layer: w13 `[K, 2Is]` and w2 `[Is, K]`. */
  MOE_SHARED_W13: 210,
  MOE_SHARED_W2: 211,
  /** Shared expert with separate projections (checkpoint layout): gate_proj and up_proj `[K, Is]` each (w2 is down_proj). */
  MOE_SHARED_GATE_PROJ: 241,
  MOE_SHARED_UP_PROJ: 242,
  /** Qwen2-MoE `shared_expert_gate` `[K, 1]`: the shared expert's output is scaled by sigmoid(x · it). */
  MOE_SHARED_EXPERT_GATE: 240,
  /** MoE layer backward: `[T, E]` f32 gradient of the router logits. */
  MOE_DIFF_ROUTER_LOGITS: 212,
  /** MoE layer backward: `[G, K]` f32 gradient of the w2 bias. */
  MOE_DIFF_W2_BIAS: 213,
  /** Backward of routing / combine: `[T, k]` f32 gradient of the routing weights. */
  MOE_DIFF_TOPK_WEIGHTS: 220,
  /**
   * GLU backward (rfcs/0002 section 10): `[rows, 1]` f32 routing probability that scaled each row of a
   * GLU output, and its gradient (accumulated). Standalone `glu_backward` takes them as is; the matmul
   * post-op as `ARG.ATTR_MULTIPLE_POST_OP(0) | ARG.GLU_PROB` / `| ARG.GLU_DIFF_PROB`.
   */
  GLU_PROB: 230,
  GLU_DIFF_PROB: 231,
  /** cuDNN dSwiGLU per-group scales of the matmul glu_backward post-op: `| ARG.GLU_ALPHA` (output), `| ARG.GLU_BETA` (input), `[E]` f32. */
  GLU_ALPHA: 232,
  GLU_BETA: 233,
  /** Proposal #3: `ARG.MULTIPLE_SRC + i` is expert i's src (i < 1024). */
  MULTIPLE_SRC: 1024,
  MULTIPLE_DST: 2048,
  /** Proposal #3: `ARG.MULTIPLE_WEIGHTS + i` is expert i's weights (i < 1024; not a oneDNN id). */
  MULTIPLE_WEIGHTS: 3072,
  /** Proposal #3: the `[G]` int32 buffer of rows per expert (not a oneDNN id). */
  RUNTIME_DIMS: 90,
  ATTR_SCALES: 4096,
  ATTR_ZERO_POINTS: 8192,
  /** Proposal #2: `ARG.ATTR_GROUPED_OFFSETS | ARG.SRC` carries the G+1 offsets (not a oneDNN id). */
  ATTR_GROUPED_OFFSETS: 1 << 22,
  /** `ARG.ATTR_MULTIPLE_POST_OP(i) | ARG.SRC_1`: the second input of binary post-op i. */
  ATTR_MULTIPLE_POST_OP: (idx: number): number => 32768 * (idx + 1),
} as const;

export function argName(id: number): string {
  switch (id) {
    case ARG.SRC: return 'ARG.SRC';
    case ARG.SRC_1: return 'ARG.SRC_1';
    case ARG.DST: return 'ARG.DST';
    case ARG.WEIGHTS: return 'ARG.WEIGHTS';
    case ARG.BIAS: return 'ARG.BIAS';
    case ARG.DIFF_SRC: return 'ARG.DIFF_SRC';
    case ARG.DIFF_DST: return 'ARG.DIFF_DST';
    case ARG.DIFF_WEIGHTS: return 'ARG.DIFF_WEIGHTS';
    case ARG.DIFF_BIAS: return 'ARG.DIFF_BIAS';
    case ARG.DIFF_WEIGHTS_1: return 'ARG.DIFF_WEIGHTS_1';
    case ARG.MOE_DIFF_ROUTER_LOGITS: return 'ARG.MOE_DIFF_ROUTER_LOGITS';
    case ARG.MOE_DIFF_W2_BIAS: return 'ARG.MOE_DIFF_W2_BIAS';
    case ARG.MOE_TOPK_IDS: return 'ARG.MOE_TOPK_IDS';
    case ARG.MOE_TOPK_WEIGHTS: return 'ARG.MOE_TOPK_WEIGHTS';
    case ARG.MOE_TOKEN_INDEX: return 'ARG.MOE_TOKEN_INDEX';
    case ARG.MOE_TOKEN_KS: return 'ARG.MOE_TOKEN_KS';
    case ARG.MOE_ROW_OF: return 'ARG.MOE_ROW_OF';
    case ARG.MOE_EXPERT_MAP: return 'ARG.MOE_EXPERT_MAP';
    case ARG.MOE_CORRECTION_BIAS: return 'ARG.MOE_CORRECTION_BIAS';
    case ARG.MOE_EXPERT_NUM_TOKENS: return 'ARG.MOE_EXPERT_NUM_TOKENS';
    case ARG.MOE_ROUTER_LOGITS: return 'ARG.MOE_ROUTER_LOGITS';
    case ARG.MOE_W2_BIAS: return 'ARG.MOE_W2_BIAS';
    case ARG.MOE_SHARED_W13: return 'ARG.MOE_SHARED_W13';
    case ARG.MOE_SHARED_W2: return 'ARG.MOE_SHARED_W2';
    case ARG.MOE_SHARED_GATE_PROJ: return 'ARG.MOE_SHARED_GATE_PROJ';
    case ARG.MOE_SHARED_UP_PROJ: return 'ARG.MOE_SHARED_UP_PROJ';
    case ARG.MOE_SHARED_EXPERT_GATE: return 'ARG.MOE_SHARED_EXPERT_GATE';
    case ARG.MOE_DIFF_TOPK_WEIGHTS: return 'ARG.MOE_DIFF_TOPK_WEIGHTS';
    case ARG.GLU_PROB: return 'ARG.GLU_PROB';
    case ARG.GLU_DIFF_PROB: return 'ARG.GLU_DIFF_PROB';
    case ARG.GLU_ALPHA: return 'ARG.GLU_ALPHA';
    case ARG.GLU_BETA: return 'ARG.GLU_BETA';
    case ARG.WEIGHTS_1: return 'ARG.WEIGHTS_1';
    case ARG.RUNTIME_DIMS: return 'ARG.RUNTIME_DIMS';
    case ARG.ATTR_GROUPED_OFFSETS | ARG.SRC: return 'ARG.ATTR_GROUPED_OFFSETS | ARG.SRC';
    default:
      if (id >= ARG.MULTIPLE_SRC && id < ARG.MULTIPLE_DST) return `ARG.MULTIPLE_SRC + ${id - ARG.MULTIPLE_SRC}`;
      if (id >= ARG.MULTIPLE_DST && id < ARG.MULTIPLE_WEIGHTS) return `ARG.MULTIPLE_DST + ${id - ARG.MULTIPLE_DST}`;
      if (id >= ARG.MULTIPLE_WEIGHTS && id < ARG.ATTR_SCALES) return `ARG.MULTIPLE_WEIGHTS + ${id - ARG.MULTIPLE_WEIGHTS}`;
      if (id > ARG.ATTR_SCALES && id < ARG.ATTR_ZERO_POINTS) return `ARG.ATTR_SCALES | ${paren(argName(id - ARG.ATTR_SCALES))}`;
      if (id > ARG.ATTR_ZERO_POINTS && id < 2 * ARG.ATTR_ZERO_POINTS) return `ARG.ATTR_ZERO_POINTS | ${paren(argName(id - ARG.ATTR_ZERO_POINTS))}`;
      if (id > ARG.ATTR_MULTIPLE_POST_OP(0) && id < ARG.ATTR_GROUPED_OFFSETS && id % ARG.ATTR_MULTIPLE_POST_OP(0) !== 0) {
        const step = ARG.ATTR_MULTIPLE_POST_OP(0);
        return `ARG.ATTR_MULTIPLE_POST_OP(${Math.floor(id / step) - 1}) | ${paren(argName(id % step))}`;
      }
      return `arg ${id}`;
  }
}

/** `ARG.MULTIPLE_SRC + 3` -> `(ARG.MULTIPLE_SRC + 3)` inside an `|` expression. */
function paren(name: string): string {
  return name.includes(' + ') ? `(${name})` : name;
}
