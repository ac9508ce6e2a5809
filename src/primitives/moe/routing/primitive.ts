import { DnnlError, check } from '../../../common/status.js';
import { created } from '../../../runtime/live_engine.js';
import { Lifetime } from '../../../runtime/lifetime.js';
import { getVerbose, now, verboseLine } from '../../../common/verbose.js';
import { RUNTIME_SIZE_VAL, type MemoryDesc } from '../../../memory/desc.js';
import { Memory } from '../../../memory/memory.js';
import { GpuMemory } from '../../../memory/gpu_memory.js';
import type { Stream, StreamTask } from '../../../runtime/stream.js';
import { ARG, argName } from '../../args.js';
import type { AnyMemory, ExecArgs } from '../../exec_args.js';
import type { GpuRoutingImpl, RoutingArgs, RoutingImpl } from './impl.js';
import type { PrimitiveDesc } from './pd.js';
import { problemString } from './problem.js';

export type { ExecArgs };

const FN = 'moe.routing.execute';

/** Bytes [start, end) of a memory's values. */
function span(m: Memory): [number, number] {
  return [m.handles[0], m.handles[0] + m.desc.getSize(0)];
}

function overlaps(a: AnyMemory, b: AnyMemory): boolean {
  // gpu: one GPUBuffer cannot be bound for reading and writing in one dispatch.
  if (a instanceof GpuMemory || b instanceof GpuMemory) return a.handles[0] === b.handles[0];
  const [a0, a1] = span(a), [b0, b1] = span(b);
  return a0 < b1 && b0 < a1;
}

/**
 * The routing primitive: `new moe.routing.Primitive(pd).execute(strm, { [ARG.SRC]: logits,
 * [ARG.MOE_TOPK_IDS]: ids, [ARG.MOE_TOPK_WEIGHTS]: weights, [ARG.MOE_CORRECTION_BIAS]?: bias })`.
 */
export class Primitive {
  readonly pd: PrimitiveDesc;
  private readonly executor: { task(args: RoutingArgs<AnyMemory>): StreamTask; destroy?(): void };
  private readonly life: Lifetime;

  constructor(pd: PrimitiveDesc) {
    created('primitive', pd.engine);
    this.pd = pd;
    // Each engine kind's impl takes its own memory kind; `arg()` checks every memory's engine.
    const eng = pd.engine;
    const executor = (eng.kind === 'gpu' ? (pd.impl as GpuRoutingImpl).createExecutor(pd.problem, eng) : (pd.impl as RoutingImpl).createExecutor(pd.problem, eng)) as
      { task(args: RoutingArgs<AnyMemory>): StreamTask; destroy?(): void };
    this.executor = executor;
    this.life = new Lifetime(this, { release: () => executor.destroy?.() });
  }

  /** Gives the primitive's engine memory back (deferred while its work is in flight); execute then throws. */
  destroy(): void {
    this.life.destroy();
  }

  [Symbol.dispose](): void {
    this.destroy();
  }

  /**
   * Enqueues the routing on `stream`. Argument errors throw here; bad logits / bias values and an
   * invalid custom-function result are raised by `stream.wait()`, with nothing written. Inputs are
   * read when the work runs: do not rewrite them before `wait()`.
   */
  execute(stream: Stream, args: ExecArgs): void {
    const task = this.executor.task(this.resolve(stream, args));
    if (getVerbose() < 1) {
      stream.enqueue(task, args);
      return;
    }
    stream.enqueue(() => {
      const t0 = now();
      const line = (): void => verboseLine('exec', ['moe_routing', this.pd.implInfo, 'undef', this.pd.mdsString(), '', '', problemString(this.pd.problem), (now() - t0).toFixed(4)]);
      const r = task();
      if (r) return r.then(line);
      line();
    }, args);
  }

  /** @internal execute's checks: the arguments resolved, or the error execute throws (moe.layer's fused route + dispatch records them itself). */
  resolve(stream: Stream, args: ExecArgs): RoutingArgs<AnyMemory> {
    const p = this.pd.problem;
    if (this.life.destroyed) check(false, `${FN}: primitive used after destroy()`);
    if (stream.engine !== this.pd.engine) check(false, `${FN}: stream belongs to another engine`);
    const a: RoutingArgs<AnyMemory> = {
      src: this.arg(args, ARG.SRC, p.src),
      topkIds: this.arg(args, ARG.MOE_TOPK_IDS, p.topkIds),
      topkWeights: this.arg(args, ARG.MOE_TOPK_WEIGHTS, p.topkWeights),
      correctionBias: p.correctionBias ? this.arg(args, ARG.MOE_CORRECTION_BIAS, p.correctionBias) : undefined,
    };
    if (p.correctionBias === undefined && args[ARG.MOE_CORRECTION_BIAS] !== undefined) check(false, `${FN}: ARG.MOE_CORRECTION_BIAS was given but the pd was created without correctionBias`);
    const inputs: [AnyMemory | undefined, string][] = [[a.src, 'ARG.SRC'], [a.correctionBias, 'ARG.MOE_CORRECTION_BIAS']];
    for (const [out, name] of [[a.topkIds, 'ARG.MOE_TOPK_IDS'], [a.topkWeights, 'ARG.MOE_TOPK_WEIGHTS']] as const) {
      for (const [m, other] of inputs) if (m && overlaps(out, m)) check(false, `${FN}: ${name} values overlap ${other} values`);
    }
    if (overlaps(a.topkIds, a.topkWeights)) check(false, `${FN}: ARG.MOE_TOPK_IDS values overlap ARG.MOE_TOPK_WEIGHTS values`);
    return a;
  }

  private arg(args: ExecArgs, id: number, md: MemoryDesc): AnyMemory {
    const m = args[id];
    const name = argName(id);
    if (m === undefined) throw new DnnlError('invalid_arguments', `${FN}: missing argument ${name}`);
    if (!(m instanceof Memory || m instanceof GpuMemory)) check(false, `${FN}: ${name} must be a Memory object`);
    if (m.isFreed) check(false, `${FN}: ${name} was freed`);
    if (m.engine !== this.pd.engine) check(false, `${FN}: ${name} belongs to another engine`);
    // Not `check`: the message renders both descriptors, too slow to build on every call.
    if (!m.desc.equals(md)) throw new DnnlError('invalid_arguments', `${FN}: ${name} descriptor ${m.desc} does not match the primitive's ${md}`);
    if (m instanceof GpuMemory) return m;
    const n = m.desc.getSize(0);
    if (m.engine.heap.owningBlock(m.handles[0], n === RUNTIME_SIZE_VAL ? 0 : n) === undefined) check(false, `${FN}: ${name} buffer is no longer a live allocation of the engine`);
    return m;
  }
}
