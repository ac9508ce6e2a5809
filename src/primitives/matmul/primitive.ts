import { DnnlError, check } from '../../common/status.js';
import { checkPackedFilled } from '../../memory/packed_fill.js';
import { getVerbose, now, verboseLine } from '../../common/verbose.js';
import { RUNTIME_SIZE_VAL, type MemoryDesc } from '../../memory/desc.js';
import { Memory } from '../../memory/memory.js';
import { GpuMemory } from '../../memory/gpu_memory.js';
import type { Stream } from '../../runtime/stream.js';
import { ARG, argName } from '../args.js';
import type { GpuMatmulImpl, MatmulArgs, MatmulExecutor, MatmulImpl } from './impl.js';
import type { PrimitiveDesc } from './pd.js';
import { created } from '../../runtime/live_engine.js';
import { Lifetime } from '../../runtime/lifetime.js';
import { problemString } from './problem.js';
import { QUANT_ARGS, type QuantArg, type QuantParam } from '../../attr/fusion.js';
import { MATMUL_QUANT_ARG_ID } from './problem.js';


/** Memory objects of either engine kind (a cpu pd takes `Memory`, a gpu pd `GpuMemory`). */
type AnyMemory = Memory | GpuMemory;
export type ExecArgs = Readonly<Record<number, AnyMemory | undefined>>;

/** Bytes [start, end) of buffer 0, for the aliasing check. */
function span(m: Memory): [number, number] {
  const n = m.desc.getSize(0);
  return [m.handles[0], m.handles[0] + (n === RUNTIME_SIZE_VAL ? 0 : n)];
}

function overlaps(a: AnyMemory, b: AnyMemory): boolean {
  // gpu: one GPUBuffer cannot be bound for reading and writing in one dispatch.
  if (a instanceof GpuMemory || b instanceof GpuMemory) return a.handles[0] === b.handles[0];
  const [a0, a1] = span(a), [b0, b1] = span(b);
  return a0 < b1 && b0 < a1;
}

/** Group sizes of a grouped argument for the verbose line (read after execution). */
function groupSizesString(o: Int32Array): string {
  const n = Math.min(o.length - 1, 64);
  const parts: number[] = [];
  for (let i = 0; i < n; i++) parts.push(o[i + 1] - o[i]);
  return `groups:${parts.join('+')}${o.length - 1 > n ? '+...' : ''}`;
}

/** The matmul primitive: `new matmul.Primitive(pd).execute(stream, { [ARG.SRC]: src, ... })`. */
export class Primitive {
  readonly pd: PrimitiveDesc;
  private readonly executor: MatmulExecutor<AnyMemory>;
  private readonly life: Lifetime;
  /** Per argument id, the last memory descriptor found equal to the expected one (compared once, not per execute). */
  private readonly matched = new Map<number, MemoryDesc>();

  constructor(pd: PrimitiveDesc) {
    created('primitive', pd.engine);
    this.pd = pd;
    // Each engine kind's impl takes its own memory kind; `arg()` checks every memory's engine, so the
    // executor only ever sees its kind.
    const eng = pd.engine;
    const executor = (eng.kind === 'gpu' ? (pd.impl as GpuMatmulImpl).createExecutor(pd.problem, eng) : (pd.impl as MatmulImpl).createExecutor(pd.problem, eng)) as MatmulExecutor<AnyMemory>;
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
   * Enqueues the computation on `stream`. Argument errors throw here; errors found in runtime data
   * (offsets) are raised by `stream.wait()`. Runtime data is read when the work runs (immediately with
   * threads = 1, later with workers), as on a device queue: do not rewrite inputs before `wait()`.
   * Rows past the last offset of a grouped dst are not written (zero-filled with
   * attr.setZeroFillUngroupedRows, as are the rows before offsets[0]).
   */
  execute(stream: Stream, args: ExecArgs): void {
    const p = this.pd.problem;
    check(!this.life.destroyed, 'matmul.execute: primitive used after destroy()');
    check(stream.engine === this.pd.engine, 'matmul.execute: stream belongs to another engine');
    // A bias or a scale the pd was not told of would be ignored: a result off by the scale, silently.
    if (!p.bias && args[ARG.BIAS] !== undefined) check(false, 'matmul.execute: ARG.BIAS was given but the pd was created without a bias descriptor');
    this.unexpectedQuant(args);
    this.unexpectedSrc1(args);
    const a: MatmulArgs<AnyMemory> = {
      src: this.arg(args, ARG.SRC, p.src),
      weights: this.arg(args, ARG.WEIGHTS, p.weights),
      dst: this.arg(args, ARG.DST, p.dst),
      bias: p.bias ? this.arg(args, ARG.BIAS, p.bias) : undefined,
      offsets: p.offsetsFrom === 'attr' ? this.arg(args, ARG.ATTR_GROUPED_OFFSETS | ARG.SRC, this.md('grouped_offsets')) : undefined,
      scales: this.quantArgs(args, ARG.ATTR_SCALES, p.fusion.scales),
      zeroPoints: this.quantArgs(args, ARG.ATTR_ZERO_POINTS, p.fusion.zeroPoints),
      binary: p.fusion.binary.map((b) => this.arg(args, ARG.ATTR_MULTIPLE_POST_OP(b.position) | ARG.SRC_1, b.md)),
      tokenIndex: p.moe.gather || p.moe.scatterTopK ? this.arg(args, ARG.MOE_TOKEN_INDEX, this.md('token_index')) : undefined,
      tokenKs: p.moe.scatterTopK ? this.arg(args, ARG.MOE_TOKEN_KS, this.md('token_ks')) : undefined,
      counts: p.moe.batchedCounts ? this.arg(args, ARG.MOE_EXPERT_NUM_TOKENS, this.md('expert_num_tokens')) : undefined,
      expertMap: p.moe.expertMap ? this.arg(args, ARG.MOE_EXPERT_MAP, this.md('expert_map')) : undefined,
      gluBackward: this.gluBackwardArgs(args),
    };
    const inputs: [AnyMemory | undefined, string][] = [[a.src, 'ARG.SRC'], [a.weights, 'ARG.WEIGHTS'], [a.bias, 'ARG.BIAS'],
      [a.tokenIndex, 'ARG.MOE_TOKEN_INDEX'], [a.tokenKs, 'ARG.MOE_TOKEN_KS'], [a.counts, 'ARG.MOE_EXPERT_NUM_TOKENS'], [a.expertMap, 'ARG.MOE_EXPERT_MAP']];
    for (const [id, tbl] of [[ARG.ATTR_SCALES, a.scales], [ARG.ATTR_ZERO_POINTS, a.zeroPoints]] as const) {
      for (const [arg, m] of Object.entries(tbl)) inputs.push([m, argName(id | MATMUL_QUANT_ARG_ID[arg as QuantArg])]);
    }
    p.fusion.binary.forEach((b, j) => inputs.push([a.binary[j], argName(ARG.ATTR_MULTIPLE_POST_OP(b.position) | ARG.SRC_1)]));
    const gb = a.gluBackward;
    if (gb) {
      const at = (id: number): string => argName(ARG.ATTR_MULTIPLE_POST_OP(0) | id);
      inputs.push([gb.src, at(ARG.SRC_1)], [gb.prob, at(ARG.GLU_PROB)]);
      const dp = gb.diffProb;
      if (dp) for (const [m, name] of [...inputs, [a.dst, 'ARG.DST'] as const]) check(!m || !overlaps(dp, m), `matmul.execute: ${at(ARG.GLU_DIFF_PROB)} values overlap ${name} values`);
    }
    for (const [m, name] of inputs) {
      if (m && overlaps(a.dst, m)) check(false, `matmul.execute: ARG.DST values overlap ${name} values (in-place matmul is not supported)`);
    }
    const task = this.executor.task(a);
    if (getVerbose() < 1) {
      stream.enqueue(task, args);
      return;
    }
    stream.enqueue(() => {
      const t0 = now();
      const line = (): void => {
        // gpu: the offsets stay on the device (reading them here would be the host read-back the design avoids).
        const host = (m: AnyMemory): m is Memory => m instanceof Memory;
        const groups = p.offsetsFrom === 'attr' ? (host(a.offsets!) ? groupSizesString(a.offsets.values as Int32Array) : '') : p.kind !== 'dense' ? (() => { const m = p.offsetsArg === 'dst' ? a.dst : a.src; return host(m) ? groupSizesString(m.offsets) : ''; })() : '';
        verboseLine('exec', ['matmul', this.pd.implInfo, 'undef', this.pd.mdsString(), p.attr.toString(), groups, problemString(p), (now() - t0).toFixed(4)]);
      };
      const r = task();
      if (r) return r.then(line);
      line();
    }, args);
  }

  /** The extra arguments of a glu_backward post-op (rfcs/0002 section 10). */
  private gluBackwardArgs(args: ExecArgs): MatmulArgs<AnyMemory>['gluBackward'] {
    const gb = this.pd.problem.fusion.gluBackward;
    if (!gb) return undefined;
    const id = (x: number): number => ARG.ATTR_MULTIPLE_POST_OP(gb.position) | x;
    const src = this.arg(args, id(ARG.SRC_1), gb.src);
    for (const [x, on, key] of [[ARG.GLU_ALPHA, gb.op.groupAlpha, 'groupAlpha'], [ARG.GLU_BETA, gb.op.groupBeta, 'groupBeta']] as const) {
      if (!(on || args[id(x)] === undefined)) check(false, `matmul.execute: ${argName(id(x))} was given but the glu_backward post-op has no ${key} (appendGluBackward(..., { ${key}: true }))`);
    }
    const alpha = gb.op.groupAlpha ? this.arg(args, id(ARG.GLU_ALPHA), gb.groupScales!) : undefined;
    const beta = gb.op.groupBeta ? this.arg(args, id(ARG.GLU_BETA), gb.groupScales!) : undefined;
    if (!gb.prob) {
      for (const x of [ARG.GLU_PROB, ARG.GLU_DIFF_PROB]) check(args[id(x)] === undefined, `matmul.execute: ${argName(id(x))} was given but the glu_backward post-op has no prob (appendGluBackward(..., { prob: true }))`);
      return { src, prob: undefined, diffProb: undefined, alpha, beta };
    }
    return { src, prob: this.arg(args, id(ARG.GLU_PROB), gb.prob), diffProb: this.arg(args, id(ARG.GLU_DIFF_PROB), gb.prob), alpha, beta };
  }

  /** Throws for an `ARG.ATTR_MULTIPLE_POST_OP(i) | ARG.SRC_1` whose post-op i takes none (it would be ignored). */
  private unexpectedSrc1(args: ExecArgs): void {
    const f = this.pd.problem.fusion, step = ARG.ATTR_MULTIPLE_POST_OP(0);
    for (const key in args) {
      const id = Number(key);
      if (id < step || id >= ARG.ATTR_GROUPED_OFFSETS || id % step !== ARG.SRC_1 || args[id] === undefined) continue;
      const pos = Math.floor(id / step) - 1;
      if (!f.binary.some((b) => b.position === pos) && f.gluBackward?.position !== pos) check(false, `matmul.execute: ${argName(id)} was given but the pd's post-op ${pos} takes no src1 (attr.postOps.appendBinary at pd creation)`);
    }
  }

  /** Throws for an `ARG.ATTR_SCALES | arg` / `ARG.ATTR_ZERO_POINTS | arg` whose attribute the pd does not have. */
  private unexpectedQuant(args: ExecArgs): void {
    const f = this.pd.problem.fusion;
    for (const [base, params, what, setter] of [[ARG.ATTR_SCALES, f.scales, 'scales', 'setScales'], [ARG.ATTR_ZERO_POINTS, f.zeroPoints, 'zero points', 'setZeroPoints']] as const) {
      for (const arg of QUANT_ARGS) {
        const id = base | MATMUL_QUANT_ARG_ID[arg];
        if (args[id] !== undefined && !params[arg]) check(false, `matmul.execute: ${argName(id)} was given but the pd has no ${arg} ${what} (attr.${setter}(${argName(MATMUL_QUANT_ARG_ID[arg])}, mask) at pd creation)`);
      }
    }
  }

  /** The scales or zero-point memories the pd expects, `ARG.ATTR_SCALES | arg` each (not those stored in `+q` packed weights). */
  private quantArgs(args: ExecArgs, base: number, params: Readonly<Partial<Record<QuantArg, QuantParam>>>): Partial<Record<QuantArg, AnyMemory>> {
    const out: Partial<Record<QuantArg, AnyMemory>> = {};
    const emb = this.pd.problem.weights.packed?.quant;
    for (const [arg, q] of Object.entries(params) as [QuantArg, QuantParam][]) {
      if (arg === 'weights' && emb?.[q.kind === 'scales' ? 'scales' : 'zeroPoints']) {
        // A second copy would be ignored: refuse it rather than hide stale values.
        if (args[base | ARG.WEIGHTS] !== undefined) throw new DnnlError('invalid_arguments', `matmul.execute: ${argName(base | ARG.WEIGHTS)} must not be given: the weights' ${q.kind === 'scales' ? 'scales' : 'zero points'} are stored in the packed weights (${this.pd.problem.weights.packed?.name}+q, filled by the reorder); to pass them at execution use plain weights or a packed descriptor without them`);
        continue;
      }
      out[arg] = this.arg(args, base | MATMUL_QUANT_ARG_ID[arg], q.md, q.altMd);
    }
    return out;
  }

  /** The pd's descriptor `what`, built once (queryMd builds a new one per call: a decode layer's execute asked for it every time). */
  private md(what: 'grouped_offsets' | 'token_index' | 'token_ks' | 'expert_num_tokens' | 'expert_map'): MemoryDesc {
    let md = this.mds.get(what);
    if (!md) {
      md = this.pd.queryMd(what)!;
      this.mds.set(what, md);
    }
    return md;
  }

  private readonly mds = new Map<string, MemoryDesc>();

  /** The checks build their messages only on failure (`if (...) check(false, ...)`): execute is on the hot path. */
  private arg(args: ExecArgs, id: number, md: MemoryDesc, alt?: MemoryDesc): AnyMemory {
    const m = args[id];
    // Names and descriptors are rendered only for a message (execute is on the hot path).
    if (m === undefined) throw new DnnlError('invalid_arguments', `matmul.execute: missing argument ${argName(id)}`);
    if (!(m instanceof Memory || m instanceof GpuMemory)) check(false, `matmul.execute: ${argName(id)} must be a Memory object`);
    if (m.isFreed) check(false, `matmul.execute: ${argName(id)} was freed`);
    if (m.engine !== this.pd.engine) check(false, `matmul.execute: ${argName(id)} belongs to another engine`);
    if (m.desc !== md && this.matched.get(id) !== m.desc) {
      if (!m.desc.equals(md) && !(alt !== undefined && m.desc.equals(alt))) check(false, `matmul.execute: ${argName(id)} descriptor ${m.desc} does not match the primitive's ${md}${alt ? ` (or ${alt})` : ''}`);
      this.matched.set(id, m.desc); // descriptors are immutable: the next execute with this one skips the comparison
    }
    if (m instanceof GpuMemory) {
      if (!m.filled) check(false, `matmul.execute: ${argName(id)} is a packed layout that was never filled: fill it with reorder`);
      return m;
    }
    m.handles.forEach((h, i) => {
      const n = m.desc.getSize(i);
      if (m.engine.heap.owningBlock(h, n === RUNTIME_SIZE_VAL ? 0 : n) === undefined) check(false, `matmul.execute: ${argName(id)} buffer ${i} is no longer a live allocation of the engine`);
    });
    if (m.desc.format === 'packed') checkPackedFilled('matmul.execute', argName(id), m);
    return m;
  }
}
