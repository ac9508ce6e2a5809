import { check } from '../../../common/status.js';
import { erf, gluColumns, type GluAlg, type GluLayout } from '../../../attr/eltwise.js';
import type { MemoryDesc } from '../../../memory/desc.js';
import type { Memory } from '../../../memory/memory.js';
import type { Engine } from '../../../runtime/engine.js';
import type { Stream } from '../../../runtime/stream.js';
import { ARG } from '../../args.js';
import { memArg, type ExecArgs } from '../exec_args.js';

const FN = 'moe.layer.backward (glu)';
const sigmoid = (x: number): number => 1 / (1 + Math.exp(-x));
const GELU_TANH_C = 0.7978845608028654;

/** d(act)/d(gate) and d(act)/d(up) of one GLU element, float64. */
export function gluGrad(alg: GluAlg, g: number, u: number, alpha: number, limit: number): [number, number] {
  switch (alg) {
    case 'glu_swiglu': {
      const s = sigmoid(alpha * g);
      return [u * (s + alpha * g * s * (1 - s)), g * s];
    }
    case 'glu_geglu_erf': {
      const cdf = 0.5 * (1 + erf(g / Math.SQRT2));
      return [u * (cdf + g * Math.exp(-0.5 * g * g) / Math.sqrt(2 * Math.PI)), g * cdf];
    }
    case 'glu_geglu_tanh': {
      const t = Math.tanh(GELU_TANH_C * (g + 0.044715 * g * g * g));
      const d = 0.5 * (1 + t) + 0.5 * g * (1 - t * t) * GELU_TANH_C * (1 + 3 * 0.044715 * g * g);
      return [u * d, 0.5 * g * (1 + t)];
    }
    case 'glu_swiglu_oai': {
      // gate clamped from above, up on both sides: no gradient where a clamp is active (as torch.clamp).
      const gc = Math.min(g, limit), uc = Math.min(limit, Math.max(-limit, u));
      const s = sigmoid(alpha * gc);
      return [g <= limit ? (s + alpha * gc * s * (1 - s)) * (uc + 1) : 0, u >= -limit && u <= limit ? gc * s : 0];
    }
  }
}

/**
 * The GLU backward stage of the layer backward: d(h13) `[R, 2I]` from GEMM1's saved output h13 and
 * d(act) `[R, I]`, rows below the last offset. Runs on the host in stream order, float64 inside and
 * rounded to f32 once per element (deterministic: no sums).
 */
export class GluBackwardStage {
  readonly implInfo = 'host:glu-bwd';
  private readonly engine: Engine;
  private readonly h13Md: MemoryDesc;
  private readonly dActMd: MemoryDesc;
  private readonly glu: { readonly alg: GluAlg; readonly layout: GluLayout; readonly alpha: number | undefined; readonly limit: number | undefined };

  constructor(engine: Engine, h13Md: MemoryDesc, dActMd: MemoryDesc, glu: GluBackwardStage['glu']) {
    this.engine = engine;
    this.h13Md = h13Md;
    this.dActMd = dActMd;
    this.glu = glu;
  }

  execute(strm: Stream, args: ExecArgs): void {
    const h = memArg(FN, this.engine, args, ARG.SRC, this.h13Md);
    const dAct = memArg(FN, this.engine, args, ARG.DIFF_DST, this.dActMd);
    const dH = memArg(FN, this.engine, args, ARG.DIFF_SRC, this.h13Md);
    strm.enqueue(() => this.run(h, dAct, dH));
  }

  destroy(): void {
    // holds no engine memory
  }

  private run(h: Memory, dAct: Memory, dH: Memory): void {
    const G = this.h13Md.grouped!.groupCount, R = this.h13Md.dims[0], I = this.dActMd.dims[1];
    const rows = h.offsets[G];
    check(rows >= 0 && rows <= R, `${FN}: offsets[${G}] = ${rows} must be in [0, ${R}]`);
    const { alg, layout } = this.glu;
    const alpha = this.glu.alpha ?? (alg === 'glu_swiglu_oai' ? 1.702 : 1), limit = this.glu.limit ?? 7;
    const hv = h.values as Float32Array, dv = dAct.values as Float32Array, out = dH.values as Float32Array;
    for (let r = 0; r < rows; r++) {
      for (let j = 0; j < I; j++) {
        const [gc, uc] = gluColumns(layout, 2 * I, j);
        const [dg, du] = gluGrad(alg, hv[r * 2 * I + gc], hv[r * 2 * I + uc], alpha, limit);
        const d = dv[r * I + j];
        out[r * 2 * I + gc] = d * dg;
        out[r * 2 * I + uc] = d * du;
      }
    }
  }
}
