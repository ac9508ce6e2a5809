import { check, checkImpl } from '../../common/status.js';
import { firstImpl } from '../pick_impl.js';
import { dimsEqual } from '../../common/dims.js';
import { now, verboseLine } from '../../common/verbose.js';
import { created, requireLive } from '../../runtime/live_engine.js';
import { MemoryDesc } from '../../memory/desc.js';
import { PACKED_P8, PACKED_P8T, PACKED_X16, PACKED_X4, PACKED_X8, X16_TYPES, X4_TYPES, X8_TYPES } from '../../memory/packed_weights.js';
import type { Engine } from '../../runtime/engine.js';
import type { GpuEngine } from '../../runtime/gpu/gpu_engine.js';
import { gpuReorderImplList, type GpuReorderImpl, type GpuReorderProblem } from './webgpu_reorder.js';

export type ReorderKind = 'pack' | 'copy';

type AnyEngine = Engine | GpuEngine;

function isEngine(e: unknown): e is AnyEngine {
  return typeof e === 'object' && e !== null && typeof (e as { kind?: unknown }).kind === 'string';
}

/**
 * Reorder primitive descriptor: `new reorder.PrimitiveDesc(eng, srcMd, dstMd)`, or oneDNN's
 * cross-engine form `new reorder.PrimitiveDesc(srcEng, srcMd, dstEng, dstMd)`. Supports plain ->
 * packed weights (`f32:p8`, the layout a matmul pd picks for `tag.any`; `x8:p8` / `x4:p8k2` for 8-bit /
 * 4-bit weights, read by the f32 x low-precision kernels and the integer kernel), and plain -> plain
 * copies with data-type conversion (f32/bf16/f16). With a gpu engine on either side (cpu -> gpu upload,
 * gpu -> cpu download, gpu -> gpu) the same rules hold, grouped memory (values + offsets) is accepted
 * too, and the gpu engine's impl list runs it (webgpu_reorder.ts); it executes on the gpu engine's stream.
 */
export class PrimitiveDesc {
  /** The engine whose stream executes the reorder: the gpu one when either side is a gpu engine. */
  readonly engine: AnyEngine;
  readonly srcEngine: AnyEngine;
  readonly dstEngine: AnyEngine;
  readonly src: MemoryDesc;
  readonly dst: MemoryDesc;
  readonly kind: ReorderKind;
  /** @internal with a gpu engine: the problem and the impl chosen from the gpu list. */
  readonly gpu: { readonly problem: GpuReorderProblem; readonly impl: GpuReorderImpl } | undefined;

  constructor(engine: AnyEngine, src: MemoryDesc, dst: MemoryDesc);
  constructor(srcEngine: AnyEngine, src: MemoryDesc, dstEngine: AnyEngine, dst: MemoryDesc);
  constructor(engine: AnyEngine, src: MemoryDesc, dstOrEngine: MemoryDesc | AnyEngine, dstArg?: MemoryDesc) {
    const t0 = now();
    const crossForm = isEngine(dstOrEngine);
    const srcEngine = engine, dstEngine = crossForm ? dstOrEngine : engine;
    const dst = crossForm ? dstArg : dstOrEngine;
    check(isEngine(srcEngine), 'reorder: engine is required');
    check(isEngine(dstEngine), 'reorder: dst engine is required');
    requireLive(dstEngine);
    created('primitive_desc', srcEngine);
    const gpuEngines = [srcEngine, dstEngine].filter((e): e is GpuEngine => e.kind === 'gpu');
    const onGpu = gpuEngines.length > 0;
    check(src instanceof MemoryDesc, 'reorder: src must be a memory descriptor');
    check(dst instanceof MemoryDesc, 'reorder: dst must be a memory descriptor');
    check(dimsEqual(src.dims, dst.dims), `reorder: src dims [${src.dims.join(',')}] must equal dst dims [${dst.dims.join(',')}]`);
    if (onGpu && (src.isGrouped || dst.isGrouped)) PrimitiveDesc.checkGrouped(src, dst);
    else {
      check(src.format === 'blocked', `reorder: src must be a plain descriptor, got ${src.format}`);
      check(dst.format === 'blocked' || dst.format === 'packed', `reorder: dst must be plain or packed, got ${dst.format}`);
    }
    check(!src.hasRuntimeDims, 'reorder: dims must be known');
    PrimitiveDesc.checkTypes(src, dst);
    if (dst.format === 'packed') {
      checkImpl([PACKED_P8, PACKED_P8T, PACKED_X8, PACKED_X4, PACKED_X16].includes(dst.packed?.name ?? '') || onGpu, `reorder: packed layout ${dst.packed?.name} is not supported`);
      check(src.ndims === 2 || src.ndims === 3, `reorder: packed weights must be 2D [K,N] or 3D [G,K,N], got ${src.ndims} dims`);
    }
    this.srcEngine = srcEngine;
    this.dstEngine = dstEngine;
    this.src = src;
    this.dst = dst;
    this.kind = dst.format === 'packed' ? 'pack' : 'copy';
    if (onGpu) {
      checkImpl(gpuEngines.length === 1 || srcEngine === dstEngine, 'reorder: between two gpu engines is not implemented (reorder through a cpu engine, or create both memories on one gpu engine)');
      const gpu = gpuEngines[0];
      const cpu = srcEngine.kind === 'cpu' ? srcEngine : dstEngine.kind === 'cpu' ? dstEngine : undefined;
      const path = srcEngine.kind === 'cpu' ? 'upload' : dstEngine.kind === 'cpu' ? 'download' : 'device';
      const problem: GpuReorderProblem = Object.freeze({ src, dst, path, gpu, cpu });
      this.engine = gpu;
      this.gpu = Object.freeze({ problem, impl: PrimitiveDesc.pickGpu(problem) });
    } else {
      checkImpl(srcEngine === dstEngine, 'reorder: between two cpu engines is not implemented (each engine has its own heap: create both memories on one engine)');
      this.engine = srcEngine;
      this.gpu = undefined;
    }
    verboseLine('create', ['reorder', this.implInfo, 'undef', `src:${src} dst:${dst}`, '', '', src.dims.join('x'), (now() - t0).toFixed(4)]);
  }

  /** Data types (the cpu engine's rule, on either engine kind). */
  private static checkTypes(src: MemoryDesc, dst: MemoryDesc): void {
    const floats = ['f32', 'bf16', 'f16'];
    if (dst.format === 'packed' && (dst.packed?.name === PACKED_X8 || dst.packed?.name === PACKED_X4)) {
      const types = dst.packed.name === PACKED_X8 ? X8_TYPES : X4_TYPES;
      checkImpl(types.includes(src.dataType) && dst.dataType === src.dataType, `reorder: ${src.dataType} -> ${dst.dataType} ${dst.packed.name} is not supported (${types.join(', ')} to the same type)`);
      const q = dst.packed.quant;
      for (const [what, spec] of [['scales', q?.scales], ['zero points', q?.zeroPoints]] as const) {
        if (!spec) continue;
        check(spec.groups.length === src.ndims && spec.mask < 1 << src.ndims, `reorder: the ${what} embedded in ${dst.packed.name}+q need a mask over and one group per weights dim (${src.ndims})`);
        check(spec.groups.every((g, i) => g >= 1 && src.dims[i] % g === 0), `reorder: weights dims [${src.dims.join(',')}] must be multiples of the embedded ${what}' groups [${spec.groups.join(',')}]`);
      }
    } else if (dst.format === 'packed' && dst.packed?.name === PACKED_X16) {
      // the codes are copied as stored: no conversion into or between 16-bit types
      checkImpl(X16_TYPES.includes(src.dataType) && dst.dataType === src.dataType, `reorder: ${src.dataType} -> ${dst.dataType} ${PACKED_X16} is not supported (${X16_TYPES.join(', ')} to the same type)`);
    } else if (dst.format === 'packed') {
      checkImpl(floats.includes(src.dataType) && floats.includes(dst.dataType), `reorder: ${src.dataType} -> ${dst.dataType} ${PACKED_P8} is not supported (f32, bf16, f16)`);
    } else {
      // Plain to plain: any layout change of one type (codes copied as stored), or a float conversion.
      const ok = src.dataType === dst.dataType || (floats.includes(src.dataType) && floats.includes(dst.dataType));
      checkImpl(ok, `reorder: ${src.dataType} -> ${dst.dataType} is not supported (same type, or between f32, bf16, f16)`);
    }
  }

  /** Grouped memory (gpu engine): both sides grouped, one partition; the offsets are copied as they are. */
  private static checkGrouped(src: MemoryDesc, dst: MemoryDesc): void {
    check(src.isGrouped && dst.isGrouped, `reorder: grouped memory reorders into grouped memory only (values and offsets), got src ${src.format} and dst ${dst.format}`);
    const a = src.grouped!, b = dst.grouped!;
    const sizes = (g: typeof a): string => (g.groupSizes ? g.groupSizes.join('+') : 'runtime');
    check(a.groupCount === b.groupCount && a.variableDim === b.variableDim && a.offsetsDt === b.offsetsDt && sizes(a) === sizes(b),
      `reorder: src and dst must share one grouped partition (src: ${a.groupCount} groups, var dim${a.variableDim}, ${a.offsetsDt} offsets, sizes ${sizes(a)}; dst: ${b.groupCount} groups, var dim${b.variableDim}, ${b.offsetsDt} offsets, sizes ${sizes(b)})`);
  }

  /** The first impl of the gpu engine's list that accepts the problem. */
  private static pickGpu(p: GpuReorderProblem): GpuReorderImpl {
    return firstImpl(gpuReorderImplList, (i) => i.reject(p), (reasons) => `reorder: no implementation for src:${p.src} dst:${p.dst} (${p.path}) on the gpu engine (${reasons})`);
  }

  get implInfo(): string {
    if (this.gpu) return this.gpu.impl.describe(this.gpu.problem);
    const name = this.dst.packed?.name;
    const q = this.dst.packed?.quant ? 'q' : '';
    const tag = name === PACKED_P8T ? 'p8t' : name === PACKED_X8 ? `x8p8${q}` : name === PACKED_X4 ? `x4p8k2${q}` : name === PACKED_X16 ? 'x16p8' : 'p8';
    return this.kind === 'pack' && this.engine.kind === 'cpu' && this.engine.kernels ? `wasm:${this.engine.isa}:pack-${tag}` : `ref:${this.kind}`;
  }
}
