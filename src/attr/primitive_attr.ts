import { PostOps } from './post_ops.js';

/**
 * Primitive attributes (oneDNN `primitive_attr`). This release carries post-ops; scales, zero points
 * and grouped offsets (Proposal #2) arrive with their issues and are rejected as `unimplemented`
 * by primitives until then.
 */
export class PrimitiveAttr {
  postOps = new PostOps();

  setPostOps(ops: PostOps): this {
    this.postOps = ops;
    return this;
  }

  get isDefault(): boolean {
    return this.postOps.length === 0;
  }

  toString(): string {
    return this.postOps.length ? `attr-post-ops:${this.postOps.toString()}` : '';
  }
}
