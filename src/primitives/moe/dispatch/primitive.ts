import type { Stream } from '../../../runtime/stream.js';
import { OpPrimitive } from '../../op_primitive.js';
import { ARG } from '../../args.js';
import { checkNoOverlap, memArg, noArg, type ExecArgs } from '../../exec_args.js';
import { dispatchImplList, type DispatchArgs } from './impls.js';
import type { PrimitiveDesc } from './pd.js';

const FN = 'moe.dispatch.execute';

/**
 * `new moe.dispatch.Primitive(pd).execute(strm, { [ARG.MOE_TOPK_IDS]: ids, [ARG.SRC]?: hidden,
 * [ARG.MOE_EXPERT_MAP]?: map, [ARG.DST]: routed / offsets, [ARG.MOE_TOKEN_INDEX], [ARG.MOE_TOKEN_KS],
 * [ARG.MOE_ROW_OF], [ARG.MOE_EXPERT_NUM_TOKENS]? })`: one op job on the engine's workers.
 */
export class Primitive extends OpPrimitive<PrimitiveDesc, DispatchArgs> {
  constructor(pd: PrimitiveDesc) {
    super(pd, dispatchImplList.find((i) => i.reject(pd.problem, pd.engine) === undefined)!.task(pd.problem, pd.engine));
  }

  execute(stream: Stream, args: ExecArgs): void {
    const p = this.pd.problem, eng = this.pd.engine;
    this.begin(FN, stream);
    if (!p.hidden) noArg(FN, args, ARG.SRC, 'the pd was created without hidden (index-only dispatch)');
    if (!p.expertMapMd) noArg(FN, args, ARG.MOE_EXPERT_MAP, 'the pd was created without expertMap');
    const a: DispatchArgs = {
      ids: memArg(FN, eng, args, ARG.MOE_TOPK_IDS, p.ids),
      hidden: p.hidden ? memArg(FN, eng, args, ARG.SRC, p.hidden) : undefined,
      expertMap: p.expertMapMd ? memArg(FN, eng, args, ARG.MOE_EXPERT_MAP, p.expertMapMd) : undefined,
      dst: p.dst ? memArg(FN, eng, args, ARG.DST, p.dst) : undefined,
      tokenIndex: memArg(FN, eng, args, ARG.MOE_TOKEN_INDEX, p.tokenIndex),
      tokenKs: memArg(FN, eng, args, ARG.MOE_TOKEN_KS, p.tokenKs),
      rowOf: memArg(FN, eng, args, ARG.MOE_ROW_OF, p.rowOf),
      counts: p.counts ? memArg(FN, eng, args, ARG.MOE_EXPERT_NUM_TOKENS, p.counts) : undefined,
    };
    const all: [typeof a.ids | undefined, number][] = [[a.ids, ARG.MOE_TOPK_IDS], [a.hidden, ARG.SRC], [a.expertMap, ARG.MOE_EXPERT_MAP], [a.dst, ARG.DST],
      [a.tokenIndex, ARG.MOE_TOKEN_INDEX], [a.tokenKs, ARG.MOE_TOKEN_KS], [a.rowOf, ARG.MOE_ROW_OF], [a.counts, ARG.MOE_EXPERT_NUM_TOKENS]];
    checkNoOverlap(FN, all.slice(3), all);
    this.enqueue(stream, a);
  }
}
