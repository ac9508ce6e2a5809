import { DnnlError, check } from '../../common/status.js';
import { getVerbose, now, verboseLine } from '../../common/verbose.js';
import type { MemoryDesc } from '../../memory/desc.js';
import { Memory } from '../../memory/memory.js';
import type { Stream } from '../../runtime/stream.js';
import { ARG, argName } from '../args.js';
import type { GroupedGemmArgs } from './impl_list.js';
import type { PrimitiveDesc } from './pd.js';
import { countObject } from '../../common/census.js';

/**
 * Proposal #3 primitive. `execute(strm, args)` takes `ARG.MULTIPLE_SRC + i`, `ARG.MULTIPLE_WEIGHTS + i`,
 * `ARG.MULTIPLE_DST + i` for every expert and `ARG.RUNTIME_DIMS` (`[G]` s32 rows per expert).
 * Row counts are read and checked when the work runs (against each expert's allocation), like offsets.
 */
export class Primitive {
  readonly pd: PrimitiveDesc;
  private readonly executor: { task(args: GroupedGemmArgs): () => void | Promise<void> };

  constructor(pd: PrimitiveDesc) {
    countObject('primitive');
    this.pd = pd;
    this.executor = pd.impl.createExecutor(pd.problem, pd.engine);
  }

  execute(stream: Stream, args: Readonly<Record<number, Memory | undefined>>): void {
    const p = this.pd.problem;
    check(stream.engine === this.pd.engine, 'grouped_gemm.execute: stream belongs to another engine');
    const get = (id: number, md: MemoryDesc): Memory => {
      const m = args[id];
      const name = argName(id);
      if (m === undefined) throw new DnnlError('invalid_arguments', `grouped_gemm.execute: missing argument ${name}`);
      check(m instanceof Memory && !m.isFreed, `grouped_gemm.execute: ${name} must be a live Memory object`);
      check(m.engine === this.pd.engine, `grouped_gemm.execute: ${name} belongs to another engine`);
      check(m.desc.equals(md), `grouped_gemm.execute: ${name} descriptor ${m.desc} does not match the primitive's ${md}`);
      check(m.engine.heap.owningBlock(m.handles[0], 0) !== undefined, `grouped_gemm.execute: ${name} is no longer a live allocation of the engine`);
      return m;
    };
    const a: GroupedGemmArgs = {
      src: p.experts.map((e, i) => get(ARG.MULTIPLE_SRC + i, e.src)),
      weights: p.experts.map((e, i) => get(ARG.MULTIPLE_WEIGHTS + i, e.weights)),
      dst: p.experts.map((e, i) => get(ARG.MULTIPLE_DST + i, e.dst)),
      runtimeDims: get(ARG.RUNTIME_DIMS, p.runtimeDims),
    };
    const task = this.executor.task(a);
    if (getVerbose() < 1) {
      stream.enqueue(task);
      return;
    }
    stream.enqueue(() => {
      const t0 = now();
      const line = (): void => {
        const m = Array.from((a.runtimeDims.values as Int32Array).subarray(0, 64)).join('+');
        verboseLine('exec', ['grouped_gemm', this.pd.implInfo, 'undef', this.pd.mdsString(), p.attr.toString(), `groups:${m}${p.G > 64 ? '+...' : ''}`, `g${p.G}`, (now() - t0).toFixed(4)]);
      };
      const r = task();
      if (r) return r.then(line);
      line();
    });
  }
}
