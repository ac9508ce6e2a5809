import { check, checkImpl } from '../../common/status.js';
import { dimsEqual } from '../../common/dims.js';
import { now, verboseLine } from '../../common/verbose.js';
import { created } from '../../runtime/live_engine.js';
import { MemoryDesc } from '../../memory/desc.js';
import { PACKED_P8, PACKED_P8T, PACKED_X4, PACKED_X8, X4_TYPES, X8_TYPES } from '../../memory/packed_weights.js';
import type { Engine } from '../../runtime/engine.js';
import { refuseGpuEngine } from '../gpu_refusal.js';

export type ReorderKind = 'pack' | 'copy';

/**
 * Reorder primitive descriptor: `new reorder.PrimitiveDesc(eng, srcMd, dstMd)`. Supports plain ->
 * packed weights (`f32:p8`, the layout a matmul pd picks for `tag.any`; `x8:p8` / `x4:p8k2` for 8-bit /
 * 4-bit weights, read by the f32 x low-precision kernels and the integer kernel), and plain -> plain
 * copies with data-type conversion (f32/bf16/f16).
 */
export class PrimitiveDesc {
  readonly engine: Engine;
  readonly src: MemoryDesc;
  readonly dst: MemoryDesc;
  readonly kind: ReorderKind;

  constructor(engine: Engine, src: MemoryDesc, dst: MemoryDesc) {
    refuseGpuEngine(engine, 'reorder');
    const t0 = now();
    created('primitive_desc', engine);
    check(src instanceof MemoryDesc, 'reorder: src must be a memory descriptor');
    check(dst instanceof MemoryDesc, 'reorder: dst must be a memory descriptor');
    check(dimsEqual(src.dims, dst.dims), `reorder: src dims [${src.dims.join(',')}] must equal dst dims [${dst.dims.join(',')}]`);
    check(src.format === 'blocked', `reorder: src must be a plain descriptor, got ${src.format}`);
    check(dst.format === 'blocked' || dst.format === 'packed', `reorder: dst must be plain or packed, got ${dst.format}`);
    check(!src.hasRuntimeDims, 'reorder: dims must be known');
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
    } else if (dst.format === 'packed') {
      checkImpl(floats.includes(src.dataType) && floats.includes(dst.dataType), `reorder: ${src.dataType} -> ${dst.dataType} ${PACKED_P8} is not supported (f32, bf16, f16)`);
    } else {
      // Plain to plain: any layout change of one type (codes copied as stored), or a float conversion.
      const ok = src.dataType === dst.dataType || (floats.includes(src.dataType) && floats.includes(dst.dataType));
      checkImpl(ok, `reorder: ${src.dataType} -> ${dst.dataType} is not supported (same type, or between f32, bf16, f16)`);
    }
    if (dst.format === 'packed') {
      checkImpl([PACKED_P8, PACKED_P8T, PACKED_X8, PACKED_X4].includes(dst.packed?.name ?? ''), `reorder: packed layout ${dst.packed?.name} is not supported`);
      check(src.ndims === 2 || src.ndims === 3, `reorder: packed weights must be 2D [K,N] or 3D [G,K,N], got ${src.ndims} dims`);
    }
    this.engine = engine;
    this.src = src;
    this.dst = dst;
    this.kind = dst.format === 'packed' ? 'pack' : 'copy';
    verboseLine('create', ['reorder', this.implInfo, 'undef', `src:${src} dst:${dst}`, '', '', src.dims.join('x'), (now() - t0).toFixed(4)]);
  }

  get implInfo(): string {
    const name = this.dst.packed?.name;
    const q = this.dst.packed?.quant ? 'q' : '';
    const tag = name === PACKED_P8T ? 'p8t' : name === PACKED_X8 ? `x8p8${q}` : name === PACKED_X4 ? `x4p8k2${q}` : 'p8';
    return this.kind === 'pack' && this.engine.kernels ? `wasm:${this.engine.isa}:pack-${tag}` : `ref:${this.kind}`;
  }
}
