import type { Stream } from '../../../runtime/stream.js';
import { OpPrimitive } from '../../op_primitive.js';
import { ARG, argName } from '../../args.js';
import { check } from '../../../common/status.js';
import { checkNoOverlap, memArg, noArg, type AnyMemory, type ExecArgs } from '../../exec_args.js';
import type { Executor } from '../../../runtime/lifetime.js';
import type { DispatchArgs, DispatchImpl, GpuDispatchImpl } from './impls.js';
import type { PrimitiveDesc } from './pd.js';

const FN = 'moe.dispatch.execute';

/**
 * `new moe.dispatch.Primitive(pd).execute(strm, { [ARG.MOE_TOPK_IDS]: ids, [ARG.SRC]?: hidden,
 * [ARG.MOE_EXPERT_MAP]?: map, [ARG.DST]: routed / offsets, [ARG.MOE_TOKEN_INDEX], [ARG.MOE_TOKEN_KS],
 * [ARG.MOE_ROW_OF], [ARG.MOE_EXPERT_NUM_TOKENS]? })`: one op job on the cpu engine's workers, or the
 * device passes of the gpu impl.
 */
export class Primitive extends OpPrimitive<PrimitiveDesc, DispatchArgs<AnyMemory>> {
  constructor(pd: PrimitiveDesc) {
    // Each engine kind's impl takes its own memory kind; memArg checks every memory's engine.
    const eng = pd.engine;
    super(pd, (eng.kind === 'gpu' ? (pd.impl as GpuDispatchImpl).task(pd.problem, eng) : (pd.impl as DispatchImpl).task(pd.problem, eng)) as Executor<DispatchArgs<AnyMemory>>);
  }

  execute(stream: Stream, args: ExecArgs): void {
    this.enqueue(stream, this.resolve(stream, args));
  }

  /** @internal execute's checks: the arguments resolved, or the error execute throws (moe.layer's fused route + dispatch records them itself). */
  resolve(stream: Stream, args: ExecArgs): DispatchArgs<AnyMemory> {
    const p = this.pd.problem, eng = this.pd.engine;
    this.begin(FN, stream);
    if (!p.hidden) noArg(FN, args, ARG.SRC, 'the pd was created without hidden (index-only dispatch)');
    if (!p.expertMapMd) noArg(FN, args, ARG.MOE_EXPERT_MAP, 'the pd was created without expertMap');
    const a: DispatchArgs<AnyMemory> = {
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
    // One memory object given as two outputs (checkNoOverlap compares distinct objects only): a race on
    // the cpu engine, an invalid binding on the gpu engine.
    const outs = all.slice(3).filter(([m]) => m !== undefined);
    outs.forEach(([m, id], i) => outs.slice(0, i).forEach(([o, oid]) => check(m !== o, `${FN}: ${argName(oid)} values overlap ${argName(id)} values`)));
    return a;
  }
}
