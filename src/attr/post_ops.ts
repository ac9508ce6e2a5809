import { check } from '../common/status.js';
import { MemoryDesc } from '../memory/desc.js';
import {
  GLU_LAYOUTS, isBinaryAlg, isEltwiseAlg, isGluAlg, type BinaryAlg, type EltwiseAlg, type GluAlg, type GluLayout,
} from './eltwise.js';

export type PostOp =
  | { readonly kind: 'eltwise'; readonly alg: EltwiseAlg; readonly alpha: number; readonly beta: number }
  | { readonly kind: 'sum'; readonly scale: number }
  /** `x = x (mul|add) src1`, src1 passed at execution as `ARG.ATTR_MULTIPLE_POST_OP(i) | ARG.SRC_1` (i = position in the chain). */
  | { readonly kind: 'binary'; readonly alg: BinaryAlg; readonly src1: MemoryDesc }
  /** Fused GLU, always first: N GEMM columns -> N/2 destination columns. */
  | { readonly kind: 'glu'; readonly alg: GluAlg; readonly layout: GluLayout; readonly alpha: number; readonly limit: number };

/** Default alpha of each GLU (the sigmoid's slope): 1 for swiglu (SiLU), 1.702 for GPT-OSS's swiglu_oai. */
const GLU_ALPHA: Record<GluAlg, number> = { glu_swiglu: 1, glu_geglu_erf: 0, glu_geglu_tanh: 0, glu_swiglu_oai: 1.702 };
/** Default limit (swiglu_oai only). */
const GLU_LIMIT = 7;

/** An ordered chain of post-ops applied to the accumulator after bias (oneDNN `post_ops`). */
export class PostOps {
  private readonly ops: PostOp[] = [];

  /** dst = alg(dst, alpha, beta). */
  appendEltwise(alg: EltwiseAlg, alpha = 0, beta = 0): this {
    check(isEltwiseAlg(alg), `post_ops.appendEltwise: unknown algorithm '${String(alg)}'`);
    check(Number.isFinite(alpha) && Number.isFinite(beta), 'post_ops.appendEltwise: alpha and beta must be finite');
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
    check(alpha === undefined || alg === 'glu_swiglu' || alg === 'glu_swiglu_oai', `post_ops.appendGlu: alpha applies to glu_swiglu and glu_swiglu_oai only, not ${alg}`);
    check(limit === undefined || alg === 'glu_swiglu_oai', `post_ops.appendGlu: limit applies to glu_swiglu_oai only, not ${alg}`);
    check(alpha === undefined || Number.isFinite(alpha), 'post_ops.appendGlu: alpha must be finite');
    check(limit === undefined || (Number.isFinite(limit) && limit > 0), 'post_ops.appendGlu: limit must be finite and positive');
    this.ops.push(Object.freeze({ kind: 'glu', alg, layout, alpha: alpha ?? GLU_ALPHA[alg], limit: limit ?? (alg === 'glu_swiglu_oai' ? GLU_LIMIT : 0) }));
    return this;
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
    case 'glu': return o.alg === 'glu_swiglu_oai' ? `${o.alg}:${o.layout}:${o.alpha}:${o.limit}` : o.alg === 'glu_swiglu' ? `${o.alg}:${o.layout}:${o.alpha}` : `${o.alg}:${o.layout}`;
  }
}
