import { DnnlError, check } from '../../common/status.js';
import { dtBits, encodeArray, isSubByteType } from '../../common/data_type.js';
import { getVerbose, now, verboseLine } from '../../common/verbose.js';
import {
  PACKED_P8T, PACKED_X16, PACKED_X4, PACKED_X8, packPanelQuantTs, packTransposedWeightsTs, packWeightsLowpTs, packWeightsTs,
  packWeightsX16Ts, packedLowpGeometry, packedX16Geometry, panelQuantBlockK, panelQuantValues,
} from '../../memory/packed_weights.js';
import { Memory } from '../../memory/memory.js';
import { GpuMemory } from '../../memory/gpu_memory.js';
import type { Engine } from '../../runtime/engine.js';
import { copyPlainElements } from './plain_copy.js';
import { markPackedFilled } from '../../memory/packed_fill.js';
import type { Stream } from '../../runtime/stream.js';
import { ARG, argName } from '../args.js';
import type { PrimitiveDesc } from './pd.js';
import { created } from '../../runtime/live_engine.js';
import { PACK_FMT, packTask, type PackGeometry } from './pack_job.js';

const JOB_DT: Record<string, number> = { f32: 0, bf16: 1, f16: 2 };

/**
 * Reorder: `new reorder.Primitive(pd).execute(strm, { [ARG.FROM]: a, [ARG.TO]: b })`. Into `+q` packed
 * weights (x8:p8 / x4:p8k2 with embedded scales / zero points) it also takes the values, under the ids
 * the matmul would take them: `ARG.ATTR_SCALES | ARG.WEIGHTS`, `ARG.ATTR_ZERO_POINTS | ARG.WEIGHTS`.
 */
export class Primitive {
  private destroyed = false;
  readonly pd: PrimitiveDesc;

  constructor(pd: PrimitiveDesc) {
    created('primitive', pd.engine);
    this.pd = pd;
  }

  /** The engine of a cpu-only reorder (the gpu path never reaches the cpu code). */
  private get cpuEngine(): Engine {
    return this.pd.engine as Engine;
  }

  /** Reorders hold no engine memory; for the common primitive lifetime API. */
  destroy(): void {
    this.destroyed = true;
  }

  [Symbol.dispose](): void {
    this.destroy();
  }

  execute(stream: Stream, args: Readonly<Record<number, Memory | GpuMemory | undefined>>): void {
    const from = args[ARG.FROM], to = args[ARG.TO];
    check(!this.destroyed, 'reorder.execute: primitive used after destroy()');
    if (!from) throw new DnnlError('invalid_arguments', 'reorder.execute: missing argument ARG.FROM');
    if (!to) throw new DnnlError('invalid_arguments', 'reorder.execute: missing argument ARG.TO');
    const { srcEngine, dstEngine } = this.pd;
    for (const [m, name, md, eng] of [[from, 'ARG.FROM', this.pd.src, srcEngine], [to, 'ARG.TO', this.pd.dst, dstEngine]] as const) {
      check((m instanceof Memory || m instanceof GpuMemory) && !m.isFreed, `reorder.execute: ${name} must be a live Memory object`);
      check(m.engine === eng, `reorder.execute: ${name} belongs to another engine`);
      check(m.desc.equals(md), `reorder.execute: ${name} descriptor ${m.desc} does not match the primitive's ${md}`);
    }
    check(from.handles[0] !== to.handles[0], 'reorder.execute: ARG.FROM and ARG.TO must be different buffers');
    if (this.pd.gpu) {
      check(stream.engine === this.pd.engine, 'reorder.execute: a reorder with a gpu engine runs on a stream of that gpu engine');
      for (const id of [ARG.ATTR_SCALES | ARG.WEIGHTS, ARG.ATTR_ZERO_POINTS | ARG.WEIGHTS]) {
        if (args[id] !== undefined) throw new DnnlError('invalid_arguments', `reorder.execute: ${argName(id)} was given but ARG.TO ${this.pd.dst} stores no weights scales or zero points (gpu weights are plain: give the scales to the matmul's or the layer's execute, as ARG.ATTR_SCALES | ARG.WEIGHTS)`);
      }
      const { problem, impl } = this.pd.gpu;
      const task = impl.task(problem, from, to);
      stream.enqueue(getVerbose() < 1 ? task : () => {
        const t0 = now();
        const line = (): void => verboseLine('exec', ['reorder', this.pd.implInfo, 'undef', `src:${this.pd.src} dst:${this.pd.dst}`, '', '', this.pd.src.dims.join('x'), (now() - t0).toFixed(4)]);
        const r = task();
        if (!r) return line();
        return r.then(line);
      }, args);
      return;
    }
    this.executeCpu(stream, from as Memory, to as Memory, args as Readonly<Record<number, Memory | undefined>>);
  }

  private executeCpu(stream: Stream, from: Memory, to: Memory, args: Readonly<Record<number, Memory | undefined>>): void {
    const quant = this.quantArgs(args);
    if (this.pd.kind === 'pack') markPackedFilled(to);
    let t0 = 0;
    const verbose = (): void => {
      if (getVerbose() >= 1) verboseLine('exec', ['reorder', this.pd.implInfo, 'undef', `src:${this.pd.src} dst:${this.pd.dst}`, '', '', this.pd.src.dims.join('x'), (now() - t0).toFixed(4)]);
    };
    if (this.pd.kind === 'pack' && this.cpuEngine.kernels) {
      // on the workers (pack_job.ts): the codes, and per-column scales of a +q layout; other embedded
      // values (zero points, grouped columns, 4-bit) are written by the host right before
      const geo = this.packGeometry(quant.scales);
      stream.enqueue(packTask(this.cpuEngine, from.handles[0], to.handles[0], geo, () => {
        t0 = now();
        this.writePanelQuant(to, { scales: geo.values ? undefined : quant.scales, zeroPoints: quant.zeroPoints });
      }, verbose), args);
      return;
    }
    stream.enqueue(() => {
      t0 = now();
      this.run(from, to, quant);
      verbose();
    }, args);
  }

  /** The packing job's geometry: f32:p8t is f32:p8 of the transposed view (last two dims and strides swapped). */
  private packGeometry(scales?: Memory): PackGeometry {
    const { src, dst } = this.pd;
    const nd = src.ndims, G = nd === 3 ? src.dims[0] : 1, sg = nd === 3 ? src.strides[0] : 0;
    const [K, N, sk, sn] = [src.dims[nd - 2], src.dims[nd - 1], src.strides[nd - 2], src.strides[nd - 1]];
    const name = dst.packed?.name;
    if (name === PACKED_X8 || name === PACKED_X4) {
      const lg = packedLowpGeometry(src.dims, src.dataType, dst.packed?.quant);
      const spec = dst.packed?.quant?.scales;
      let values: PackGeometry['values'];
      if (spec && scales && dtBits(spec.dataType) >= 8) {
        // per-column values, one run of 8 per full panel and K block: the job copies them
        const { index } = panelQuantValues(src.dims, spec), bk = panelQuantBlockK(spec, nd), i0 = index(0, 0, 0);
        const cols = N > 1 && index(0, 0, 1) - i0 === 1 && spec.groups[nd - 1] === 1 && (nd === 2 || spec.groups[0] === 1);
        if (cols) {
          const pad = encodeArray(spec.dataType, [1]).reduce((acc, b, i) => acc | (b << (8 * i)), 0);
          values = {
            src: scales.handles[0], off: lg.scaleOff, bytes: dtBits(spec.dataType) / 8, nkb: bk ? Math.ceil(K / bk) : 1,
            sg: nd === 3 && G > 1 ? index(1, 0, 0) - i0 : 0, sb: bk && K > bk ? index(0, bk, 0) - i0 : 0, pad,
          };
        }
      }
      return { fmt: name === PACKED_X8 ? PACK_FMT.x8 : PACK_FMT.x4, dt: 0, G, K, N, sg, sk, sn, ps: lg.panelBytes, values };
    }
    if (name === PACKED_X16) return { fmt: PACK_FMT.x16, dt: 0, G, K, N, sg, sk, sn, ps: packedX16Geometry(src.dims).panelBytes };
    if (name === PACKED_P8T) return { fmt: PACK_FMT.f32, dt: JOB_DT[src.dataType], G, K: N, N: K, sg, sk: sn, sn: sk, ps: 0 };
    return { fmt: PACK_FMT.f32, dt: JOB_DT[src.dataType], G, K, N, sg, sk, sn, ps: 0 };
  }

  /** A +q destination's scales / zero points, written beside the panels (packed_weights.ts). */
  private writePanelQuant(to: Memory, quant: { scales?: Memory; zeroPoints?: Memory }): void {
    const { src, dst } = this.pd, engine = this.cpuEngine;
    const q = dst.packed?.quant;
    if (!q || (!quant.scales && !quant.zeroPoints)) return;
    const view = (m: Memory | undefined): Uint8Array | undefined => m && new Uint8Array(engine.buffer, m.handles[0], m.desc.getSize(0));
    packPanelQuantTs(src.dims, src.dataType, q, { scales: view(quant.scales), zeroPoints: view(quant.zeroPoints) }, new Uint8Array(engine.buffer, to.handles[0], dst.getSize(0)));
  }

  /**
   * The scales / zero points a `+q` destination embeds, checked against its spec (the memory the matmul
   * pd's `queryMd('scales:weights')` describes); none may be given otherwise.
   */
  private quantArgs(args: Readonly<Record<number, Memory | undefined>>): { scales?: Memory; zeroPoints?: Memory } {
    const { src, dst } = this.pd;
    const q = dst.packed?.quant;
    const out: { scales?: Memory; zeroPoints?: Memory } = {};
    for (const [kind, id, what] of [['scales', ARG.ATTR_SCALES | ARG.WEIGHTS, 'scales'], ['zeroPoints', ARG.ATTR_ZERO_POINTS | ARG.WEIGHTS, 'zero points']] as const) {
      const spec = q?.[kind], m = args[id], name = argName(id);
      if (!spec) {
        if (m !== undefined) throw new DnnlError('invalid_arguments', `reorder.execute: ${name} was given but ARG.TO ${dst} stores no ${what} (only a packed weights descriptor with embedded ${what}, from a matmul pd with weights ${what} in its attr, takes them)`);
        continue;
      }
      const want = panelQuantValues(src.dims, spec).md;
      if (m === undefined) throw new DnnlError('invalid_arguments', `reorder.execute: missing argument ${name}: ARG.TO ${dst} stores the weights' ${what}, and the reorder writes them beside the panels (a ${want} memory)`);
      check(m instanceof Memory && !m.isFreed, `reorder.execute: ${name} must be a live Memory object`);
      check(m.engine === this.pd.engine, `reorder.execute: ${name} belongs to another engine`);
      if (!m.desc.equals(want)) throw new DnnlError('invalid_arguments', `reorder.execute: ${name} descriptor ${m.desc} does not match the ${what} ARG.TO embeds (mask ${spec.mask}, groups [${spec.groups.join(',')}], ${spec.dataType}): ${want}`);
      out[kind] = m;
    }
    return out;
  }

  /** Without kernels (the reference engine): the TypeScript packers, and every plain -> plain copy. */
  private run(from: Memory, to: Memory, quant: { scales?: Memory; zeroPoints?: Memory }): void {
    const { src, dst } = this.pd, engine = this.cpuEngine;
    if (this.pd.kind === 'pack' && (dst.packed?.name === PACKED_X8 || dst.packed?.name === PACKED_X4)) {
      const bytes = new Uint8Array(engine.buffer, from.handles[0], src.getSize(0));
      const code = isSubByteType(src.dataType) ? (i: number): number => (bytes[i >>> 1] >>> ((i & 1) << 2)) & 0xf : (i: number): number => bytes[i];
      const out = new Uint8Array(engine.buffer, to.handles[0], dst.getSize(0));
      out.fill(0);
      packWeightsLowpTs(code, src.dataType, src.dims, src.strides, out, dst.packed.quant);
      this.writePanelQuant(to, quant);
      return;
    }
    if (this.pd.kind === 'pack' && dst.packed?.name === PACKED_X16) {
      packWeightsX16Ts(from.values, src.dims, src.strides, new Uint16Array(engine.buffer, to.handles[0], dst.getSize(0) / 2));
      return;
    }
    if (this.pd.kind === 'pack' && dst.packed?.name === PACKED_P8T) {
      packTransposedWeightsTs(from.values, src.dataType, src.dims, src.strides, new Float32Array(engine.buffer, to.handles[0], dst.getSize(0) / 4));
      return;
    }
    if (this.pd.kind === 'pack') {
      packWeightsTs(from.values, src.dataType, src.dims, src.strides, new Float32Array(engine.buffer, to.handles[0], dst.getSize(0) / 4));
      return;
    }
    copyPlainElements(src, engine.buffer, from.handles[0], dst, engine.buffer, to.handles[0]);
  }
}
