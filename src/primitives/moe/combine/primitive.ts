import { check } from '../../../common/status.js';
import { Lifetime, type Executor } from '../../../runtime/lifetime.js';
import { countObject } from '../../../common/census.js';
import type { Stream } from '../../../runtime/stream.js';
import { ARG } from '../../args.js';
import { checkNoOverlap, memArg, noArg, type ExecArgs } from '../exec_args.js';
import { combineImplList, type CombineArgs } from './impls.js';
import type { PrimitiveDesc } from './pd.js';

const FN = 'moe.combine.execute';

/** `new moe.combine.Primitive(pd).execute(strm, { [ARG.SRC], [ARG.MOE_ROW_OF], [ARG.MOE_TOPK_WEIGHTS]?, [ARG.DST] })`. */
export class Primitive {
  readonly pd: PrimitiveDesc;
  private readonly exec: Executor<CombineArgs>;
  private readonly life: Lifetime;

  constructor(pd: PrimitiveDesc) {
    countObject('primitive');
    this.pd = pd;
    const impl = combineImplList.find((i) => i.reject(pd.problem, pd.engine) === undefined)!;
    const exec = impl.task(pd.problem, pd.engine);
    this.exec = exec;
    this.life = new Lifetime(this, { release: () => exec.destroy() });
  }

  /** Gives the primitive's engine memory back (deferred while its work is in flight); execute then throws. */
  destroy(): void {
    this.life.destroy();
  }

  [Symbol.dispose](): void {
    this.destroy();
  }

  execute(stream: Stream, args: ExecArgs): void {
    const p = this.pd.problem, eng = this.pd.engine;
    check(!this.life.destroyed, `${FN}: primitive used after destroy()`);
    check(stream.engine === eng, `${FN}: stream belongs to another engine`);
    if (!p.weights) noArg(FN, args, ARG.MOE_TOPK_WEIGHTS, 'the pd is not weighted');
    const a: CombineArgs = {
      src: memArg(FN, eng, args, ARG.SRC, p.src),
      rowOf: memArg(FN, eng, args, ARG.MOE_ROW_OF, p.rowOf),
      weights: p.weights ? memArg(FN, eng, args, ARG.MOE_TOPK_WEIGHTS, p.weights) : undefined,
      dst: memArg(FN, eng, args, ARG.DST, p.dst),
    };
    checkNoOverlap(FN, [[a.dst, ARG.DST]], [[a.src, ARG.SRC], [a.rowOf, ARG.MOE_ROW_OF], [a.weights, ARG.MOE_TOPK_WEIGHTS]]);
    stream.enqueue(this.exec.run(a));
  }
}
