import { check } from '../../../common/status.js';
import { countObject } from '../../../common/census.js';
import { Lifetime, type Executor } from '../../../runtime/lifetime.js';
import type { Stream } from '../../../runtime/stream.js';
import { ARG } from '../../args.js';
import { checkNoOverlap, memArg, type ExecArgs } from '../exec_args.js';
import type { ActivationArgs } from './impls.js';
import type { PrimitiveDesc } from './pd.js';

const FN = 'moe.activation.execute';

/** `new moe.activation.Primitive(pd).execute(strm, { [ARG.SRC]: h, [ARG.DST]: act })`. */
export class Primitive {
  readonly pd: PrimitiveDesc;
  private readonly exec: Executor<ActivationArgs>;
  private readonly life: Lifetime;

  constructor(pd: PrimitiveDesc) {
    countObject('primitive');
    this.pd = pd;
    const exec = pd.impl.task(pd.problem, pd.engine);
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
    const pd = this.pd, eng = pd.engine;
    check(!this.life.destroyed, `${FN}: primitive used after destroy()`);
    check(stream.engine === eng, `${FN}: stream belongs to another engine`);
    const a: ActivationArgs = { src: memArg(FN, eng, args, ARG.SRC, pd.problem.src), dst: memArg(FN, eng, args, ARG.DST, pd.problem.dst) };
    checkNoOverlap(FN, [[a.dst, ARG.DST]], [[a.src, ARG.SRC]]);
    stream.enqueue(this.exec.run(a));
  }
}
