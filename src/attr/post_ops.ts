import { check } from '../common/status.js';
import { checkOptionKeys, optionKeys } from '../common/option_keys.js';
import { MemoryDesc } from '../memory/desc.js';
import type { DataType } from '../common/data_type.js';
import { GLU_LAYOUTS, isBinaryAlg, isEltwiseAlg, isGluAlg, type BinaryAlg, type EltwiseAlg, type GluAlg, type GluLayout } from './eltwise.js';
import { gluParams } from './glu_options.js';

export type PostOp =
  | { readonly kind: 'eltwise'; readonly alg: EltwiseAlg; readonly alpha: number; readonly beta: number }
  | { readonly kind: 'sum'; readonly scale: number }
  /** `x = x (mul|add) src1`, src1 passed at execution as `ARG.ATTR_MULTIPLE_POST_OP(i) | ARG.SRC_1` (i = position in the chain). */
  | { readonly kind: 'binary'; readonly alg: BinaryAlg; readonly src1: MemoryDesc }
  /** Fused GLU, always first: N GEMM columns -> N/2 destination columns. */
  | { readonly kind: 'glu'; readonly alg: GluAlg; readonly layout: GluLayout; readonly alpha: number; readonly limit: number }
  /**
   * GLU backward (rfcs/0002 section 10), the only post-op: the GEMM's N columns are the diff of a GLU
   * output; dst (2N columns, `layout`) receives d(gate, up), read against the saved forward input
   * `ARG.ATTR_MULTIPLE_POST_OP(i) | ARG.SRC_1`; with `prob`, the GLU output was scaled by a per-row
   * `ARG.ATTR_MULTIPLE_POST_OP(i) | ARG.GLU_PROB` and `| ARG.GLU_DIFF_PROB` accumulates its gradient.
   */
  | {
    readonly kind: 'glu_backward'; readonly alg: GluAlg; readonly layout: GluLayout; readonly alpha: number; readonly limit: number;
    readonly prob: boolean; readonly srcDataType: DataType; readonly groupAlpha: boolean; readonly groupBeta: boolean;
  };

/** Options of {@link PostOps.appendGluBackward}. */
export interface GluBackwardOptions {
  /** The forward scaled the GLU output by a per-row routing probability: take it, and accumulate dprob. */
  readonly prob?: boolean;
  /** Data type of the saved forward GLU input h13 (`ARG.ATTR_MULTIPLE_POST_OP(0) | ARG.SRC_1`): f32 (default), bf16 or f16. */
  readonly srcDataType?: DataType;
  /**
   * cuDNN's discrete grouped GEMM dSwiGLU per-group alpha: `ARG.ATTR_MULTIPLE_POST_OP(0) | ARG.GLU_ALPHA`
   * `[E]` f32; the GEMM result of a row of expert e is multiplied by alpha[e]^2 (cuDNN's
   * `ref = alpha_g^2 · sum_k A · B`) before the GLU derivative. Grouped rows only. Default false.
   */
  readonly groupAlpha?: boolean;
  /**
   * cuDNN's per-group beta: `| ARG.GLU_BETA` `[E]` f32; the saved gate and up of expert e's rows are
   * multiplied by beta[e] before the GLU derivative (cuDNN's `gate = beta_g · C_gate`, `up = beta_g · C_up`;
   * d(gate), d(up) and dprob are those of the scaled values). Grouped rows only. Default false.
   */
  readonly groupBeta?: boolean;
}

const GLU_BACKWARD_POST_OP_KEYS = optionKeys<GluBackwardOptions>({ prob: true, srcDataType: true, groupAlpha: true, groupBeta: true });

/** An ordered chain of post-ops applied to the accumulator after bias (oneDNN `post_ops`). */
export class PostOps {
  private readonly ops: PostOp[] = [];

  /** dst = alg(dst, alpha, beta) (oneDNN's alpha / beta meanings: see eltwiseScalar, attr/eltwise.ts). */
  appendEltwise(alg: EltwiseAlg, alpha = 0, beta = 0): this {
    check(isEltwiseAlg(alg), `post_ops.appendEltwise: unknown algorithm '${String(alg)}'`);
    check(Number.isFinite(alpha) && Number.isFinite(beta), 'post_ops.appendEltwise: alpha and beta must be finite');
    check(alg !== 'eltwise_soft_relu' || alpha !== 0, 'post_ops.appendEltwise: eltwise_soft_relu divides by alpha, which must not be 0');
    this.ops.push(Object.freeze({ kind: 'eltwise', alg, alpha, beta }));
    return this;
  }

  /** dst = scale * dst_before + result (accumulate into the existing destination). */
  appendSum(scale = 1): this {
    check(Number.isFinite(scale), 'post_ops.appendSum: scale must be finite');
    check(!this.ops.some((o) => o.kind === 'sum'), 'post_ops.appendSum: at most one sum post-op');
    this.ops.push(Object.freeze({ kind: 'sum', scale }));
    return this;
  }

  /**
   * dst = dst (mul | add) src1. `src1Md` describes the second input, passed at execution as
   * `ARG.ATTR_MULTIPLE_POST_OP(i) | ARG.SRC_1` where i is this post-op's position in the chain. Its
   * shape decides the broadcast (checked by the primitive descriptor; rfcs/0002 section 4).
   */
  appendBinary(alg: BinaryAlg, src1Md: MemoryDesc): this {
    check(isBinaryAlg(alg), `post_ops.appendBinary: unknown algorithm '${String(alg)}' (binary_mul, binary_add)`);
    check(src1Md instanceof MemoryDesc, 'post_ops.appendBinary: src1Md must be a memory descriptor');
    check(src1Md.format === 'blocked' || src1Md.format === 'grouped', `post_ops.appendBinary: src1Md must be a plain or grouped descriptor with a layout, got ${src1Md.format}`);
    this.ops.push(Object.freeze({ kind: 'binary', alg, src1: src1Md }));
    return this;
  }

  /**
   * Fused GLU (must be the first post-op): the GEMM's N columns hold gate and up in `layout`, the
   * destination has N/2 columns `act(gate) * up`. `alpha`: sigmoid slope of glu_swiglu (default 1)
   * and glu_swiglu_oai (default 1.702); `limit`: clamp of glu_swiglu_oai (default 7).
   */
  appendGlu(alg: GluAlg, layout: GluLayout, alpha?: number, limit?: number): this {
    check(isGluAlg(alg), `post_ops.appendGlu: unknown algorithm '${String(alg)}' (glu_swiglu, glu_geglu_erf, glu_geglu_tanh, glu_swiglu_oai)`);
    check(GLU_LAYOUTS.includes(layout), `post_ops.appendGlu: unknown layout '${String(layout)}' (halves, interleaved, blocks32)`);
    check(this.ops.length === 0, 'post_ops.appendGlu: glu must be the first post-op');
    this.ops.push(Object.freeze({ kind: 'glu', alg, layout, ...gluParams('post_ops.appendGlu', alg, alpha, limit) }));
    return this;
  }

  /**
   * GLU backward as the epilogue of the GEMM producing the diff of a GLU output (MoE: GEMM2's
   * `diff_src = diff_out x W2^T`, cuDNN's fused dSwiGLU / dGeGLU). Must be the only post-op. The GEMM
   * has N = I columns, dst has 2I: d(gate) and d(up) in the forward's `layout`. Execution arguments:
   * `ARG.ATTR_MULTIPLE_POST_OP(0) | ARG.SRC_1` the forward's GLU input h13 `[rows, 2I]`; with
   * `{ prob: true }` also `| ARG.GLU_PROB` (`[rows, 1]` f32, the forward's routing weight per row) and
   * `| ARG.GLU_DIFF_PROB` (`[rows, 1]` f32, accumulated: `dprob += sum_n diff * act(gate) * up`).
   * `alpha` / `limit` as {@link appendGlu}.
   */
  appendGluBackward(alg: GluAlg, layout: GluLayout, alpha?: number, limit?: number, options: GluBackwardOptions = {}): this {
    const fn = 'post_ops.appendGluBackward';
    check(isGluAlg(alg), `${fn}: unknown algorithm '${String(alg)}' (glu_swiglu, glu_geglu_erf, glu_geglu_tanh, glu_swiglu_oai)`);
    check(GLU_LAYOUTS.includes(layout), `${fn}: unknown layout '${String(layout)}' (halves, interleaved, blocks32)`);
    check(this.ops.length === 0, `${fn}: glu_backward must be the only post-op`);
    const params = gluParams(fn, alg, alpha, limit);
    check(typeof options === 'object' && options !== null, `${fn}: options must be an object`);
    checkOptionKeys(fn, options, GLU_BACKWARD_POST_OP_KEYS);
    const srcDataType = options.srcDataType ?? 'f32';
    check(srcDataType === 'f32' || srcDataType === 'bf16' || srcDataType === 'f16', `${fn}: srcDataType ${String(srcDataType)} is not supported (f32, bf16, f16)`);
    this.ops.push(Object.freeze({
      kind: 'glu_backward', alg, layout, ...params,
      prob: options.prob === true, srcDataType, groupAlpha: options.groupAlpha === true, groupBeta: options.groupBeta === true,
    }));
    return this;
  }

  /** The GLU backward post-op, if the chain is one. */
  get gluBackward(): Extract<PostOp, { kind: 'glu_backward' }> | undefined {
    const o = this.ops[0];
    return o?.kind === 'glu_backward' ? o : undefined;
  }

  get length(): number {
    return this.ops.length;
  }

  get entries(): readonly PostOp[] {
    return this.ops;
  }

  /** The GLU post-op, if the chain starts with one. */
  get glu(): Extract<PostOp, { kind: 'glu' }> | undefined {
    const o = this.ops[0];
    return o?.kind === 'glu' ? o : undefined;
  }

  toString(): string {
    return this.ops.map(opString).join('+');
  }
}

function opString(o: PostOp): string {
  switch (o.kind) {
    case 'sum': return `sum:${o.scale}`;
    case 'eltwise': return `${o.alg}:${o.alpha}:${o.beta}`;
    case 'binary': return `${o.alg}:${o.src1.dataType}:${o.src1.isGrouped ? 'grouped:' : ''}${o.src1.dims.map((d) => (d < 0 ? '*' : d)).join('x')}`;
    case 'glu_backward': return `${o.alg}_backward:${o.layout}:${o.alpha}:${o.limit}:${o.srcDataType}${o.prob ? ':prob' : ''}`;
    case 'glu': return o.alg === 'glu_swiglu_oai' ? `${o.alg}:${o.layout}:${o.alpha}:${o.limit}` : o.alg === 'glu_swiglu' ? `${o.alg}:${o.layout}:${o.alpha}` : `${o.alg}:${o.layout}`;
  }
}
