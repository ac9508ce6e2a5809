import { check, checkImpl } from '../common/status.js';
import { isDataType, type DataType } from '../common/data_type.js';
import { PostOps } from './post_ops.js';
import { countObject } from '../common/census.js';

/** Proposal #2: groups of an argument defined by offsets passed at execution. */
export interface GroupedOffsetsAttr {
  readonly arg: number;
  readonly groupCount: number;
  readonly offsetsDt: DataType;
}

/**
 * Primitive attributes (oneDNN `primitive_attr`): post-ops, and the grouped-offsets attribute of
 * RFC Proposal #2. Scales and zero points arrive with the quantization work.
 */
export class PrimitiveAttr {
  postOps = new PostOps();
  private grouped: GroupedOffsetsAttr | undefined;

  constructor() {
    countObject('attr');
  }

  setPostOps(ops: PostOps): this {
    this.postOps = ops;
    return this;
  }

  /**
   * Proposal #2: `arg` (ARG.SRC) is a plain `[total_M, K]` tensor whose rows form `groupCount` groups
   * delimited by G+1 offsets passed at execution as `ARG.ATTR_GROUPED_OFFSETS | arg`.
   */
  setGroupedOffsets(arg: number, groupCount: number, offsetsDt: DataType = 's32'): this {
    check(arg === 1, `attr.setGroupedOffsets: only ARG.SRC can carry grouped offsets, got arg ${arg}`);
    check(Number.isSafeInteger(groupCount) && groupCount >= 1 && groupCount <= 0x7fffffff, `attr.setGroupedOffsets: groupCount must be a positive int32, got ${groupCount}`);
    check(isDataType(offsetsDt), `attr.setGroupedOffsets: unknown offsets data type '${String(offsetsDt)}'`);
    checkImpl(offsetsDt === 's32', `attr.setGroupedOffsets: offsetsDt must be s32, got ${offsetsDt}`);
    this.grouped = Object.freeze({ arg, groupCount, offsetsDt });
    return this;
  }

  get groupedOffsets(): GroupedOffsetsAttr | undefined {
    return this.grouped;
  }

  get isDefault(): boolean {
    return this.postOps.length === 0 && !this.grouped;
  }

  toString(): string {
    const parts: string[] = [];
    if (this.grouped) parts.push(`attr-grouped-offsets:src:g${this.grouped.groupCount}:${this.grouped.offsetsDt}`);
    if (this.postOps.length) parts.push(`attr-post-ops:${this.postOps.toString()}`);
    return parts.join(' ');
  }
}
