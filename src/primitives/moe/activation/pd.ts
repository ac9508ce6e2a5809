import { check, checkImpl } from '../../../common/status.js';
import { checkOptionKeys, optionKeys } from '../../../common/option_keys.js';
import { now, verboseLine } from '../../../common/verbose.js';
import { created } from '../../../runtime/live_engine.js';
import type { GluAlg, GluLayout } from '../../../attr/eltwise.js';
import { resolveGlu, type GluOptions } from '../../../attr/glu_options.js';
import { MemoryDesc } from '../../../memory/desc.js';
import type { Engine } from '../../../runtime/engine.js';
import { activationImplList, gpuActivationImplList, type ActivationImpl } from './impls.js';
import type { GpuEngine } from '../../../runtime/gpu/gpu_engine.js';
import type { GpuActivationImpl } from './webgpu_activation.js';
import { pickImpl } from '../../pick_impl.js';

/** The GLU of an activation stage: the same options object as `glu_backward`'s (`GluOptions`). */
export type ActivationGlu = GluOptions;

export const GLU_OPTION_KEYS = optionKeys<ActivationGlu>({ alg: true, layout: true, alpha: true, limit: true });

export interface ActivationProblem {
  readonly src: MemoryDesc;
  readonly dst: MemoryDesc;
  readonly rows: number;
  /** Output columns I (src has 2I). */
  readonly I: number;
  readonly alg: GluAlg;
  readonly layout: GluLayout;
  readonly alpha: number;
  readonly limit: number;
  /** A grouped src: only rows [0, offsets[G]) are read and written. */
  readonly grouped: boolean;
}

/**
 * MoE activation stage: `act = glu(h)` with `h = [gate | up]` `[R, 2I]` f32 (GEMM1's output without its
 * fused GLU, in the GLU layout) -> `act [R, I]` f32, with the same formulas as the fused GEMM epilogue
 * (the same bits as `attr.postOps.appendGlu`). The training forward of an MoE layer runs GEMM1 and
 * this stage apart so that `h` is kept for the backward. src plain or grouped by rows (then only rows
 * below the last offset are touched); dst plain or grouped `[R, I]`, rows contiguous.
 */
export class PrimitiveDesc {
  readonly engine: Engine | GpuEngine;
  readonly problem: ActivationProblem;
  /** The chosen implementation: from the cpu list on a cpu engine, the WebGPU kernel on a gpu engine. */
  readonly impl: ActivationImpl | GpuActivationImpl;

  constructor(engine: Engine | GpuEngine, src: MemoryDesc, dst: MemoryDesc, glu: ActivationGlu) {
    const t0 = now();
    created('primitive_desc', engine);
    check(engine !== undefined && engine !== null, 'moe.activation: engine is required');
    check(src instanceof MemoryDesc && dst instanceof MemoryDesc, 'moe.activation: src and dst must be memory descriptors');
    check(glu !== null && typeof glu === 'object', 'moe.activation: glu must be an options object');
    checkOptionKeys('moe.activation: glu', glu, GLU_OPTION_KEYS);
    const { alg, layout, alpha, limit } = resolveGlu('moe.activation', glu);
    check(src.ndims === 2 && dst.ndims === 2, `moe.activation: src and dst must be 2D, got ${src.ndims} and ${dst.ndims} dims`);
    check(!src.isGrouped || src.grouped?.variableDim === 0, 'moe.activation: a grouped src must be grouped by rows');
    checkImpl(src.dataType === 'f32' && dst.dataType === 'f32', `moe.activation: data types ${src.dataType} -> ${dst.dataType} are not supported (f32 -> f32)`);
    check(src.dims[1] % 2 === 0, `moe.activation: src columns (gate and up) must be even, got ${src.dims[1]}`);
    const I = src.dims[1] / 2;
    check(dst.dims[0] === src.dims[0] && dst.dims[1] === I, `moe.activation: dst dims [${dst.dims.join(',')}] must be [rows = ${src.dims[0]}, I = ${I}]`);
    check(layout !== 'blocks32' || I % 32 === 0, `moe.activation: layout blocks32 needs I % 32 == 0, got I = ${I}`);
    check(src.strides[1] === 1 && dst.strides[1] === 1 && !['any', 'packed'].includes(src.format) && !['any', 'packed'].includes(dst.format), 'moe.activation: src and dst rows must be contiguous (plain or grouped layouts)');
    this.engine = engine;
    this.problem = Object.freeze({ src, dst, rows: src.dims[0], I, alg, layout, alpha, limit, grouped: src.isGrouped });
    this.impl = engine.kind === 'gpu' ? pickImpl('moe.activation', gpuActivationImplList, this.problem, engine) : pickImpl('moe.activation', activationImplList, this.problem, engine);
    verboseLine('create', ['moe_activation', this.implInfo, alg, `src:${src} dst:${dst}`, '', '', `${this.problem.rows}x${2 * I}:${layout}`, (now() - t0).toFixed(4)]);
  }

  queryMd(what: 'src' | 'dst'): MemoryDesc {
    return this.problem[what];
  }

  get implInfo(): string {
    if (this.engine.kind === 'gpu') return this.impl.name;
    return this.impl.name === 'wasm' ? `wasm:${this.engine.isa}:moe-activation` : 'ref:any';
  }
}
