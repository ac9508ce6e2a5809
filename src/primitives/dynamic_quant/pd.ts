import { check, checkImpl } from '../../common/status.js';
import { now, verboseLine } from '../../common/verbose.js';
import { created } from '../../runtime/live_engine.js';
import { MemoryDesc } from '../../memory/desc.js';
import type { Engine } from '../../runtime/engine.js';
import { dynamicQuantImplList, gpuDynamicQuantImplList, type DynamicQuantImpl } from './impls.js';
import type { GpuEngine } from '../../runtime/gpu/gpu_engine.js';
import type { GpuDynamicQuantImpl } from './webgpu_dynamic_quant.js';
import { pickImpl } from '../pick_impl.js';

/** What a dynamic quantization computes: `rows x cols` of src, row strides in elements. */
export interface DynamicQuantProblem {
  readonly src: MemoryDesc;
  readonly dst: MemoryDesc;
  readonly scales: MemoryDesc;
  readonly rows: number;
  readonly cols: number;
  /** A grouped src: only rows [0, offsets[G]) are quantized (read at execution). */
  readonly grouped: boolean;
}

/**
 * Per-row (per-token) dynamic int8 quantization, symmetric, as `quant.perTokenInt8` on the host:
 * `s = amax / 127` rounded to f32 (1 for a row of zeros), `q = RNE(x / s)` saturated. src `[R, K]`
 * f32/bf16/f16, plain or grouped by rows (P#1: only rows up to the last offset); dst `[R, K]` s8 and
 * `ARG.ATTR_SCALES | ARG.DST` `[R]` f32 — exactly the src and per-row src scales (mask 1) of an int8
 * matmul (W8A8 dynamic, MindIE `004_*`).
 */
export class PrimitiveDesc {
  readonly engine: Engine | GpuEngine;
  readonly problem: DynamicQuantProblem;
  /** The chosen implementation: from the cpu list on a cpu engine, the WebGPU kernel on a gpu engine. */
  readonly impl: DynamicQuantImpl | GpuDynamicQuantImpl;

  constructor(engine: Engine | GpuEngine, src: MemoryDesc, dst: MemoryDesc) {
    const t0 = now();
    created('primitive_desc', engine);
    check(src instanceof MemoryDesc, 'dynamic_quant: src must be a memory descriptor');
    check(dst instanceof MemoryDesc, 'dynamic_quant: dst must be a memory descriptor');
    check(src.ndims === 2, `dynamic_quant: src must be 2D [rows, K], got ${src.ndims} dims`);
    check(!src.isGrouped || src.grouped?.variableDim === 0, 'dynamic_quant: a grouped src must be grouped by rows');
    checkImpl(['f32', 'bf16', 'f16'].includes(src.dataType), `dynamic_quant: src data type ${src.dataType} is not supported (f32, bf16, f16)`);
    check(src.strides[1] === 1, 'dynamic_quant: src rows must be contiguous (strides[1] == 1)');
    check(dst.ndims === 2 && dst.dims[0] === src.dims[0] && dst.dims[1] === src.dims[1], `dynamic_quant: dst dims [${dst.dims.join(',')}] must equal src dims [${src.dims.join(',')}]`);
    checkImpl(dst.dataType === 's8', `dynamic_quant: dst data type ${dst.dataType} is not supported (s8)`);
    check(dst.strides[1] === 1 && dst.format !== 'packed', 'dynamic_quant: dst rows must be contiguous (strides[1] == 1)');
    const rows = src.dims[0], cols = src.dims[1];
    const scales = new MemoryDesc({ dims: [rows], dataType: 'f32', format: 'blocked', strides: [1] });
    this.engine = engine;
    this.problem = Object.freeze({ src, dst, scales, rows, cols, grouped: src.isGrouped });
    this.impl = engine.kind === 'gpu' ? pickImpl('dynamic_quant', gpuDynamicQuantImplList, this.problem, engine) : pickImpl('dynamic_quant', dynamicQuantImplList, this.problem, engine);
    verboseLine('create', ['dynamic_quant', this.implInfo, 'undef', `src:${src} dst:${dst}`, '', '', `${rows}x${cols}`, (now() - t0).toFixed(4)]);
  }

  queryMd(what: 'src' | 'dst' | 'scales'): MemoryDesc {
    return this.problem[what];
  }

  get implInfo(): string {
    if (this.engine.kind === 'gpu') return this.impl.name;
    return this.impl.name === 'wasm' ? `wasm:${this.engine.isa}:quant-rows-s8` : 'ref:any';
  }
}
