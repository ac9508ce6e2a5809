import { check, checkImpl } from '../../common/status.js';
import { firstImpl } from '../pick_impl.js';
import { checkOptionKeys, optionKeys } from '../../common/option_keys.js';
import { countPdTime } from '../../common/census.js';
import { created } from '../../runtime/live_engine.js';
import { now, verboseLine } from '../../common/verbose.js';
import { MemoryDesc } from '../../memory/desc.js';
import type { Engine } from '../../runtime/engine.js';
import type { GluAlg, GluLayout } from '../../attr/eltwise.js';
import { resolveGlu, type GluOptions } from '../../attr/glu_options.js';
import { FLOAT_TYPES } from '../../attr/fusion.js';
import { fits32 } from '../../kernels/fused_job.js';
import { gluBackwardImplList, type GluBackwardImpl } from './impls.js';
import { refuseGpuEngine } from '../gpu_refusal.js';

/**
 * Options of a GLU backward pd: the forward GLU (the same `GluOptions` object as `moe.activation` and the
 * layer's `glu` take: `alg`, `layout`, `alpha`, `limit`) and the routing probability. Every accepted key
 * is listed here and in `GluOptions`.
 */
export interface GluBackwardOptions extends GluOptions {
  /**
   * `[rows, 1]` f32 descriptor of the routing probability the forward multiplied each GLU output row
   * by; given, the primitive also takes `ARG.GLU_DIFF_PROB` (same descriptor) and accumulates into it.
   */
  readonly prob?: MemoryDesc;
}

const GLU_BACKWARD_OPTION_KEYS = optionKeys<GluBackwardOptions>({ alg: true, layout: true, alpha: true, limit: true, prob: true });

/** What the kernels and the reference read, resolved by the pd. */
export interface GluBackwardProblem {
  readonly alg: GluAlg;
  readonly layout: GluLayout;
  readonly alpha: number;
  readonly limit: number;
  /** Rows (total rows of grouped descriptors) and GLU output columns I (h13 has 2I). */
  readonly R: number;
  readonly N: number;
  /** Groups of grouped descriptors, 0 for plain ones. */
  readonly G: number;
  readonly src: MemoryDesc;
  readonly diffDst: MemoryDesc;
  readonly diffSrc: MemoryDesc;
  readonly prob: MemoryDesc | undefined;
}

export type GluBackwardQuery = 'src' | 'diff_dst' | 'diff_src' | 'prob' | 'diff_prob';

const FN = 'glu_backward';

/**
 * GLU backward primitive descriptor (rfcs/0002 section 10), oneDNN's eltwise-backward shape:
 * `new glu_backward.PrimitiveDesc(eng, diffSrcMd, diffDstMd, srcMd, { alg, layout, alpha, limit, prob })`
 * (the GLU options are `moe.activation`'s, plus `prob`).
 *  - `src` (`ARG.SRC`): the forward's GLU input h13 `[R, 2I]` (gate and up in `layout`);
 *  - `diff_dst` (`ARG.DIFF_DST`): diff of the GLU output `[R, I]`;
 *  - `diff_src` (`ARG.DIFF_SRC`): d(h13) `[R, 2I]`, same layout;
 *  - with `prob`: `ARG.GLU_PROB` `[R, 1]` f32 (input) and `ARG.GLU_DIFF_PROB` `[R, 1]` f32
 *    (accumulated: `dprob += sum_n diff * act(gate) * up`; zero it first for a plain gradient).
 * All three tensors plain, or all grouped by rows with one partition (Proposal #1): then only rows
 * before the last offset are touched. f32 / bf16 / f16 each.
 */
export class PrimitiveDesc {
  readonly engine: Engine;
  readonly problem: GluBackwardProblem;
  readonly impl: GluBackwardImpl;

  constructor(engine: Engine, diffSrc: MemoryDesc, diffDst: MemoryDesc, src: MemoryDesc, options: GluBackwardOptions) {
    refuseGpuEngine(engine, 'glu_backward');
    const t0 = now();
    created('primitive_desc', engine);
    this.engine = engine;
    this.problem = PrimitiveDesc.init(engine, diffSrc, diffDst, src, options);
    const p = this.problem;
    this.impl = firstImpl(gluBackwardImplList, (i) => i.reject(p, engine), (reasons) => `${FN}: no implementation (${reasons})`);
    const ms = now() - t0;
    countPdTime(ms);
    verboseLine('create', [FN, this.implInfo, 'undef', `src:${p.src} diff_dst:${p.diffDst} diff_src:${p.diffSrc}${p.prob ? ` prob:${p.prob}` : ''}`, '',
      `${p.alg}:${p.layout}:${p.alpha}:${p.limit}`, `r${p.R}i${p.N}g${p.G}`, ms.toFixed(4)]);
  }

  /** Rules, one per line. */
  private static init(engine: Engine, diffSrc: MemoryDesc, diffDst: MemoryDesc, src: MemoryDesc, options: GluBackwardOptions): GluBackwardProblem {
    check(engine !== undefined && engine !== null, `${FN}: engine is required`);
    checkOptionKeys(FN, options, GLU_BACKWARD_OPTION_KEYS);
    const { alg, layout, alpha, limit } = resolveGlu(FN, options, 'options');
    const { prob } = options;
    for (const [name, md] of [['src', src], ['diff_dst', diffDst], ['diff_src', diffSrc]] as const) {
      check(md instanceof MemoryDesc, `${FN}: ${name} must be a memory descriptor`);
      check(md.format === 'blocked' || md.format === 'grouped', `${FN}: ${name} must be a plain or grouped descriptor with a layout, got ${md.format}`);
      check(md.ndims === 2, `${FN}: ${name} must be 2D, got ${md.ndims} dims`);
      check(!md.hasRuntimeDims, `${FN}: ${name} dims must be known`);
      checkImpl(FLOAT_TYPES.includes(md.dataType), `${FN}: ${name} data type ${md.dataType} is not supported (f32, bf16, f16)`);
    }
    const [R, N2] = src.dims;
    check(N2 % 2 === 0 && N2 > 0, `${FN}: src dims[1] = ${N2} must be even and positive (gate + up columns)`);
    const N = N2 / 2;
    check(diffDst.dims[0] === R, `${FN}: diff_dst dims[0] = ${diffDst.dims[0]} must equal src rows ${R}`);
    check(diffDst.dims[1] === N, `${FN}: diff_dst dims[1] = ${diffDst.dims[1]} must equal src dims[1] / 2 = ${N}`);
    check(diffSrc.dims[0] === R && diffSrc.dims[1] === N2, `${FN}: diff_src dims [${diffSrc.dims.join(',')}] must equal src's [${R},${N2}]`);
    check(layout !== 'blocks32' || N % 32 === 0, `${FN}: layout blocks32 needs I % 32 == 0 (alternating 32-column gate/up blocks), src dims[1] / 2 = ${N}`);
    const gs = src.grouped;
    check(src.isGrouped === diffDst.isGrouped && src.isGrouped === diffSrc.isGrouped, `${FN}: src, diff_dst and diff_src must all be grouped or all plain`);
    for (const [name, md] of [['src', src], ['diff_dst', diffDst], ['diff_src', diffSrc]] as const) {
      const g = md.grouped;
      if (!g) continue;
      check(g.variableDim === 0, `${FN}: grouped ${name} must be grouped by rows (var dim0)`);
      check(g.offsetsDt === 's32', `${FN}: ${name} offsets data type ${g.offsetsDt} is not supported (s32)`);
      check(g.groupCount === gs!.groupCount, `${FN}: ${name} group count ${g.groupCount} must equal src's ${gs!.groupCount}`);
      check((g.groupSizes ?? []).join() === (gs!.groupSizes ?? []).join(), `${FN}: ${name} per-group dims differ from src's`);
    }
    if (prob !== undefined) {
      check(prob instanceof MemoryDesc, `${FN}: prob must be a memory descriptor`);
      check(prob.format === 'blocked', `${FN}: prob must be a plain descriptor`);
      check(prob.ndims === 2 && prob.dims[0] === R && prob.dims[1] === 1, `${FN}: prob dims [${prob.dims.join(',')}] must be [rows = ${R}, 1]`);
      check(prob.dataType === 'f32', `${FN}: prob data type ${prob.dataType} must be f32`);
    }
    for (const [name, md] of [['src', src], ['diff_dst', diffDst], ['diff_src', diffSrc]] as const) checkImpl(fits32(md), `${FN}: ${name} is too large for 32-bit indexing`);
    return Object.freeze({
      alg, layout, alpha, limit, R, N, G: gs?.groupCount ?? 0,
      src, diffDst, diffSrc, prob,
    });
  }

  queryMd(what: GluBackwardQuery): MemoryDesc | undefined {
    const p = this.problem;
    switch (what) {
      case 'src': return p.src;
      case 'diff_dst': return p.diffDst;
      case 'diff_src': return p.diffSrc;
      case 'prob': case 'diff_prob': return p.prob;
    }
  }

  get implInfo(): string {
    return this.impl.describe(this.engine);
  }
}
