import { DnnlError, check } from '../../common/status.js';
import { Lifetime, type Executor } from '../../runtime/lifetime.js';
import { countObject } from '../../common/census.js';
import type { MemoryDesc } from '../../memory/desc.js';
import { Memory } from '../../memory/memory.js';
import type { Stream } from '../../runtime/stream.js';
import { ARG, argName } from '../args.js';
import type { DynamicQuantArgs } from './impls.js';
import type { PrimitiveDesc } from './pd.js';

/** `execute(strm, { [ARG.SRC]: x, [ARG.DST]: q, [ARG.ATTR_SCALES | ARG.DST]: scales })`. */
export class Primitive {
  readonly pd: PrimitiveDesc;
  private readonly exec: Executor<DynamicQuantArgs>;
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

  execute(stream: Stream, args: Readonly<Record<number, Memory | undefined>>): void {
    check(!this.life.destroyed, `${'dynamic_quant.execute'}: primitive used after destroy()`);
    check(stream.engine === this.pd.engine, 'dynamic_quant.execute: stream belongs to another engine');
    const p = this.pd.problem;
    const arg = (id: number, md: MemoryDesc): Memory => {
      const m = args[id];
      if (m === undefined) throw new DnnlError('invalid_arguments', `dynamic_quant.execute: missing argument ${argName(id)}`);
      check(m instanceof Memory && !m.isFreed, `dynamic_quant.execute: ${argName(id)} must be a live Memory object`);
      check(m.engine === this.pd.engine, `dynamic_quant.execute: ${argName(id)} belongs to another engine`);
      check(m.desc.equals(md), `dynamic_quant.execute: ${argName(id)} descriptor ${m.desc} does not match the primitive's ${md}`);
      return m;
    };
    stream.enqueue(this.exec.run({ src: arg(ARG.SRC, p.src), dst: arg(ARG.DST, p.dst), scales: arg(ARG.ATTR_SCALES | ARG.DST, p.scales) }));
  }
}
