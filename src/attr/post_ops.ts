import { check } from '../common/status.js';
import { isEltwiseAlg, type EltwiseAlg } from './eltwise.js';

export type PostOp =
  | { readonly kind: 'eltwise'; readonly alg: EltwiseAlg; readonly alpha: number; readonly beta: number }
  | { readonly kind: 'sum'; readonly scale: number };

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

  get length(): number {
    return this.ops.length;
  }

  get entries(): readonly PostOp[] {
    return this.ops;
  }

  toString(): string {
    return this.ops.map((o) => (o.kind === 'sum' ? `sum:${o.scale}` : `${o.alg}:${o.alpha}:${o.beta}`)).join('+');
  }
}
