import { DnnlError, check, checkImpl } from '../../../common/status.js';
import { now, verboseLine } from '../../../common/verbose.js';
import { countObject } from '../../../common/census.js';
import { GLU_DEFAULT_ALPHA, GLU_DEFAULT_LIMIT, GLU_LAYOUTS, isGluAlg, type GluAlg, type GluLayout } from '../../../attr/eltwise.js';
import { MemoryDesc } from '../../../memory/desc.js';
import type { Engine } from '../../../runtime/engine.js';
import { activationImplList, type ActivationImpl } from './impls.js';
import { refuseGpuEngine } from '../../gpu_refusal.js';

/** The GLU of an activation stage (as `attr.postOps.appendGlu`). */
export interface ActivationGlu {
  readonly alg: GluAlg;
  readonly layout?: GluLayout;
  /** swiglu / swiglu_oai sigmoid slope (default 1, and 1.702 for swiglu_oai). */
  readonly alpha?: number;
  /** swiglu_oai clamp (default 7). */
  readonly limit?: number;
}

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
  readonly engine: Engine;
  readonly problem: ActivationProblem;
  readonly impl: ActivationImpl;

  constructor(engine: Engine, src: MemoryDesc, dst: MemoryDesc, glu: ActivationGlu) {
    refuseGpuEngine(engine, 'moe.activation');
    const t0 = now();
    countObject('primitive_desc');
    check(engine !== undefined && engine !== null, 'moe.activation: engine is required');
    check(src instanceof MemoryDesc && dst instanceof MemoryDesc, 'moe.activation: src and dst must be memory descriptors');
    check(glu !== null && typeof glu === 'object' && isGluAlg(glu.alg), `moe.activation: glu.alg must be a GLU algorithm (glu_swiglu, glu_geglu_erf, glu_geglu_tanh, glu_swiglu_oai), got ${String(glu?.alg)}`);
    const layout = glu.layout ?? 'halves';
    check(GLU_LAYOUTS.includes(layout), `moe.activation: glu.layout must be halves, interleaved or blocks32, got ${String(layout)}`);
    check(src.ndims === 2 && dst.ndims === 2, `moe.activation: src and dst must be 2D, got ${src.ndims} and ${dst.ndims} dims`);
    check(!src.isGrouped || src.grouped?.variableDim === 0, 'moe.activation: a grouped src must be grouped by rows');
    checkImpl(src.dataType === 'f32' && dst.dataType === 'f32', `moe.activation: data types ${src.dataType} -> ${dst.dataType} are not supported (f32 -> f32)`);
    check(src.dims[1] % 2 === 0, `moe.activation: src columns (gate and up) must be even, got ${src.dims[1]}`);
    const I = src.dims[1] / 2;
    check(dst.dims[0] === src.dims[0] && dst.dims[1] === I, `moe.activation: dst dims [${dst.dims.join(',')}] must be [rows = ${src.dims[0]}, I = ${I}]`);
    check(layout !== 'blocks32' || I % 32 === 0, `moe.activation: layout blocks32 needs I % 32 == 0, got I = ${I}`);
    check(src.strides[1] === 1 && dst.strides[1] === 1 && !['any', 'packed'].includes(src.format) && !['any', 'packed'].includes(dst.format), 'moe.activation: src and dst rows must be contiguous (plain or grouped layouts)');
    const alpha = glu.alpha ?? GLU_DEFAULT_ALPHA[glu.alg];
    const limit = glu.limit ?? GLU_DEFAULT_LIMIT;
    check(Number.isFinite(alpha) && Number.isFinite(limit) && limit > 0, `moe.activation: glu.alpha must be finite and glu.limit finite and > 0, got ${alpha}, ${limit}`);
    this.engine = engine;
    this.problem = Object.freeze({ src, dst, rows: src.dims[0], I, alg: glu.alg, layout, alpha, limit, grouped: src.isGrouped });
    const reasons: string[] = [];
    const impl = activationImplList.find((i) => {
      const why = i.reject(this.problem, engine);
      if (why !== undefined) reasons.push(`${i.name}: ${why}`);
      return why === undefined;
    });
    if (!impl) throw new DnnlError('unimplemented', `moe.activation: no implementation (${reasons.join('; ')})`);
    this.impl = impl;
    verboseLine('create', ['moe_activation', this.implInfo, glu.alg, `src:${src} dst:${dst}`, '', '', `${this.problem.rows}x${2 * I}:${layout}`, (now() - t0).toFixed(4)]);
  }

  queryMd(what: 'src' | 'dst'): MemoryDesc {
    return this.problem[what];
  }

  get implInfo(): string {
    return this.impl.name === 'wasm' ? `wasm:${this.engine.isa}:moe-activation` : 'ref:any';
  }
}
