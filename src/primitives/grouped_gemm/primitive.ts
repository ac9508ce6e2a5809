import { DnnlError, check } from '../../common/status.js';
import { checkPackedFilled } from '../../memory/packed_fill.js';
import { getVerbose, now, verboseLine } from '../../common/verbose.js';
import type { MemoryDesc } from '../../memory/desc.js';
import { Memory } from '../../memory/memory.js';
import type { Stream } from '../../runtime/stream.js';
import { ARG, argName } from '../args.js';
import type { GpuGroupedGemmImpl, GroupedGemmArgs, GroupedGemmExecutor, GroupedGemmImpl } from './impl_list.js';
import { GpuMemory } from '../../memory/gpu_memory.js';
import type { PrimitiveDesc } from './pd.js';
import { created } from '../../runtime/live_engine.js';
import { Lifetime } from '../../runtime/lifetime.js';
import { RUNTIME_SIZE_VAL } from '../../memory/desc.js';
import type { QuantArg } from '../../attr/fusion.js';
import { EXPERT_QUANT_ARG_ID } from './problem.js';
import { QUANT_ARGS } from '../../attr/fusion.js';

/** Memory objects of either engine kind (a cpu pd takes `Memory`, a gpu pd `GpuMemory`). */
type AnyMemory = Memory | GpuMemory;


/**
 * Proposal #3 primitive. `execute(strm, args)` takes `ARG.MULTIPLE_SRC + i`, `ARG.MULTIPLE_WEIGHTS + i`,
 * `ARG.MULTIPLE_DST + i` for every expert and `ARG.RUNTIME_DIMS` (`[G]` s32 rows per expert).
 * Row counts are read and checked when the work runs (against each expert's allocation), like offsets.
 * With scales / zero points (set on ARG.MULTIPLE_SRC / _WEIGHTS / _DST): `ARG.ATTR_SCALES | (ARG.MULTIPLE_SRC + i)`
 * etc. per expert; binary post-op src1: `ARG.ATTR_MULTIPLE_POST_OP(j) | ARG.SRC_1` (shared `[1, 1|N]`) or
 * `ARG.ATTR_MULTIPLE_POST_OP(j) | (ARG.MULTIPLE_SRC + i)` (per expert `[RUNTIME_DIM_VAL, 1|N]`).
 */
export class Primitive {
  readonly pd: PrimitiveDesc;
  private readonly executor: GroupedGemmExecutor<AnyMemory>;
  private readonly life: Lifetime;
  /** Per argument id, the last memory descriptor found equal to the expected one (the comparison is per expert, per execute). */
  private readonly matched = new Map<number, MemoryDesc>();
  /** Per kind, the scale / zero-point ids execute refuses (an operand the pd has not for that expert, or one the
   * packed weights hold): one loop of lookups (5 x G at :dq) before the per-argument checks, which run only
   * when one is given, to throw the first error in their order. */
  private readonly refused: Readonly<Record<'scales' | 'zeroPoints', Int32Array>>;
  /** Per kind, the arguments some expert has that operand of. */
  private readonly taken: Readonly<Record<'scales' | 'zeroPoints', readonly QuantArg[]>>;

  constructor(pd: PrimitiveDesc) {
    created('primitive', pd.engine);
    this.pd = pd;
    // Each engine kind's impl takes its own memory kind; `get()` checks every memory's engine, so the
    // executor only ever sees its kind.
    const eng = pd.engine;
    const executor = (eng.kind === 'gpu' ? (pd.impl as GpuGroupedGemmImpl).createExecutor(pd.problem, eng) : (pd.impl as GroupedGemmImpl).createExecutor(pd.problem, eng)) as GroupedGemmExecutor<AnyMemory>;
    this.executor = executor;
    const p = pd.problem;
    const refused = (base: number, kind: 'scales' | 'zeroPoints'): Int32Array => Int32Array.from(QUANT_ARGS.flatMap((arg) => {
      const packed = arg === 'weights' && p.experts.some((e) => e.fusion[kind][arg]) && p.experts[0].weights.packed?.quant?.[kind] !== undefined;
      return p.experts.flatMap((e, i) => (packed || !e.fusion[kind][arg] ? [base | (EXPERT_QUANT_ARG_ID[arg] + i)] : []));
    }));
    this.refused = { scales: refused(ARG.ATTR_SCALES, 'scales'), zeroPoints: refused(ARG.ATTR_ZERO_POINTS, 'zeroPoints') };
    const taken = (kind: 'scales' | 'zeroPoints'): QuantArg[] => QUANT_ARGS.filter((arg) => p.experts.some((e) => e.fusion[kind][arg]));
    this.taken = { scales: taken('scales'), zeroPoints: taken('zeroPoints') };
    this.life = new Lifetime(this, { release: () => executor.destroy?.() });
  }

  /** Gives the primitive's engine memory back (deferred while its work is in flight); execute then throws. */
  destroy(): void {
    this.life.destroy();
  }

  [Symbol.dispose](): void {
    this.destroy();
  }

  execute(stream: Stream, args: Readonly<Record<number, AnyMemory | undefined>>): void {
    const p = this.pd.problem;
    check(!this.life.destroyed, 'grouped_gemm.execute: primitive used after destroy()');
    check(stream.engine === this.pd.engine, 'grouped_gemm.execute: stream belongs to another engine');
    // Per argument of every expert, each execution: the argument's name is built only for a message.
    const get = (id: number, md: MemoryDesc): AnyMemory => {
      const m = args[id];
      if (m === undefined) throw new DnnlError('invalid_arguments', `grouped_gemm.execute: missing argument ${argName(id)}`);
      if (!((m instanceof Memory || m instanceof GpuMemory) && !m.isFreed)) check(false, `grouped_gemm.execute: ${argName(id)} must be a live Memory object`);
      if (m.engine !== this.pd.engine) check(false, `grouped_gemm.execute: ${argName(id)} belongs to another engine`);
      if (m.desc !== md && this.matched.get(id) !== m.desc) {
        if (!m.desc.equals(md)) check(false, `grouped_gemm.execute: ${argName(id)} descriptor ${m.desc} does not match the primitive's ${md}`);
        this.matched.set(id, m.desc); // descriptors are immutable: the next execute with this one skips the comparison
      }
      if (m instanceof GpuMemory) return m;
      const n = m.desc.getSize(0);
      if (m.engine.heap.owningBlock(m.handles[0], n === RUNTIME_SIZE_VAL ? 0 : n) === undefined) check(false, `grouped_gemm.execute: ${argName(id)} is no longer a live allocation of the engine`);
      if (m.desc.format === 'packed') checkPackedFilled('grouped_gemm.execute', () => argName(id), m);
      return m;
    };
    const quant = (base: number, kind: 'scales' | 'zeroPoints'): Partial<Record<QuantArg, (AnyMemory | undefined)[]>> => {
      const out: Partial<Record<QuantArg, (AnyMemory | undefined)[]>> = {};
      const ids = this.refused[kind];
      let given = false;
      for (let j = 0; j < ids.length && !given; j++) given = args[ids[j]] !== undefined;
      for (const arg of given ? QUANT_ARGS : this.taken[kind]) {
        // attr.setExpertScales may give some experts scales of an argument and not others. One the pd was
        // not told of would be ignored (a result off by the scale, silently): refused.
        if (given) p.experts.forEach((e, i) => {
          const id = base | (EXPERT_QUANT_ARG_ID[arg] + i);
          if (!e.fusion[kind][arg] && args[id] !== undefined) check(false, `grouped_gemm.execute: ${argName(id)} was given but the pd has no ${arg} ${kind === 'scales' ? 'scales' : 'zero points'} for expert ${i} (attr.${kind === 'scales' ? 'setScales' : 'setZeroPoints'} or setExpertScales at pd creation)`);
        });
        if (!p.experts.some((e) => e.fusion[kind][arg])) continue;
        if (arg === 'weights' && p.experts[0].weights.packed?.quant?.[kind]) {
          // Stored in the experts' packed weights (x8 / x4 +q): a second copy would be ignored, so refuse it.
          if (given) p.experts.forEach((_e, i) => {
            const id = base | (ARG.MULTIPLE_WEIGHTS + i);
            if (args[id] !== undefined) throw new DnnlError('invalid_arguments', `grouped_gemm.execute: ${argName(id)} must not be given: the weights' ${kind === 'scales' ? 'scales' : 'zero points'} are stored in the packed weights (${p.experts[i].weights.packed?.name}+q, filled by the reorder); to pass them at execution use plain weights or a packed descriptor without them`);
          });
          continue;
        }
        out[arg] = p.experts.map((e, i) => { const q = e.fusion[kind][arg]; return q ? get(base | (EXPERT_QUANT_ARG_ID[arg] + i), q.md) : undefined; });
      }
      return out;
    };
    const a: GroupedGemmArgs<AnyMemory> = {
      src: p.experts.map((e, i) => get(ARG.MULTIPLE_SRC + i, e.src)),
      weights: p.experts.map((e, i) => get(ARG.MULTIPLE_WEIGHTS + i, e.weights)),
      dst: p.experts.map((e, i) => get(ARG.MULTIPLE_DST + i, e.dst)),
      runtimeDims: get(ARG.RUNTIME_DIMS, p.runtimeDims),
      scales: quant(ARG.ATTR_SCALES, 'scales'),
      zeroPoints: quant(ARG.ATTR_ZERO_POINTS, 'zeroPoints'),
      binary: p.experts[0].fusion.binary.map((b, j) => {
        const id = ARG.ATTR_MULTIPLE_POST_OP(b.position);
        if (!b.perExpert) {
          const shared = get(id | ARG.SRC_1, b.md);
          return p.experts.map(() => shared);
        }
        return p.experts.map((e, i) => get(id | (ARG.MULTIPLE_SRC + i), e.fusion.binary[j].md));
      }),
    };
    // gpu: one GPUBuffer cannot be bound for reading and writing in one dispatch (expert i binds its
    // src, weights, dst and its fusion operands).
    a.dst.forEach((d, i) => {
      if (!(d instanceof GpuMemory)) return;
      const out = d.buffers[0];
      const clash = (m: AnyMemory | undefined, name: () => string): void => {
        if (m?.handles[0] === out) check(false, `grouped_gemm.execute: ${argName(ARG.MULTIPLE_DST + i)} and ${name()} share a GPUBuffer (in-place grouped_gemm is not supported)`);
      };
      clash(a.src[i], () => argName(ARG.MULTIPLE_SRC + i));
      clash(a.weights[i], () => argName(ARG.MULTIPLE_WEIGHTS + i));
      for (const [base, kind] of [[ARG.ATTR_SCALES, a.scales], [ARG.ATTR_ZERO_POINTS, a.zeroPoints]] as const) {
        for (const arg of QUANT_ARGS) clash(kind[arg]?.[i], () => argName(base | (EXPERT_QUANT_ARG_ID[arg] + i)));
      }
      a.binary.forEach((list, j) => clash(list[i], () => `binary post-op ${p.experts[i].fusion.binary[j].position} src1`));
    });
    const task = this.executor.task(a);
    // The stream holds the memories resolved into `a` (arrays: a record of 769 integer keys at E = 256 with :dq
    // is slow to walk).
    if (getVerbose() < 1) {
      stream.enqueue(task, a);
      return;
    }
    stream.enqueue(() => {
      const t0 = now();
      const line = (): void => {
        // gpu: the rows stay on the device (reading them here would be the host read-back the design avoids).
        const dims = a.runtimeDims;
        const m = dims instanceof Memory ? `groups:${Array.from((dims.values as Int32Array).subarray(0, 64)).join('+')}${p.G > 64 ? '+...' : ''}` : '';
        verboseLine('exec', ['grouped_gemm', this.pd.implInfo, 'undef', this.pd.mdsString(), p.attr.toString(), m, `g${p.G}`, (now() - t0).toFixed(4)]);
      };
      const r = task();
      if (r) return r.then(line);
      line();
    }, a);
  }
}
