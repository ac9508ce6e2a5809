import { DnnlError } from '../../common/status.js';
import { elementReader } from '../../attr/fusion.js';
import { gluBackwardColumns, gluBackwardScalar, type GluGrad } from '../../attr/glu_backward.js';
import { GLU_CODE, GLU_LAYOUT_CODE, JOB_DT_ALL } from '../../kernels/job_layout.js';
import { OpJob, type OpStatus } from '../../kernels/op_job.js';
import type { Memory } from '../../memory/memory.js';
import type { Engine } from '../../runtime/engine.js';
import { stateless, type Executor } from '../../runtime/lifetime.js';
import { elementWriter } from '../matmul/ref_matmul.js';
import type { GluBackwardProblem } from './pd.js';

export interface GluBackwardArgs {
  readonly src: Memory;
  readonly diffDst: Memory;
  readonly diffSrc: Memory;
  readonly prob: Memory | undefined;
  readonly diffProb: Memory | undefined;
}

export interface GluBackwardImpl {
  readonly name: string;
  describe(engine: Engine): string;
  reject(p: GluBackwardProblem, engine: Engine): string | undefined;
  executor(p: GluBackwardProblem, engine: Engine): Executor<GluBackwardArgs>;
}

const FN = 'glu_backward.execute';
/** Status codes of wasm/src/glu-bwd.c. */
const ERR = { first: 150, decreasing: 151, total: 152, mismatchDiffDst: 153, mismatchDiffSrc: 154 } as const;

function offsetsError(p: GluBackwardProblem, s: OpStatus): DnnlError {
  const bad = (m: string): DnnlError => new DnnlError('invalid_arguments', `${FN}: ${m}`);
  switch (s.code) {
    case ERR.first: return bad(`ARG.SRC offsets[0] = ${s.a} must be 0`);
    case ERR.decreasing: return bad(`ARG.SRC offsets[${s.index}] = ${s.a} is below offsets[${s.index - 1}] = ${s.b} (offsets must not decrease)`);
    case ERR.total: return bad(`ARG.SRC offsets[${s.index}] = ${s.a} exceeds the ${s.b} rows of the descriptor`);
    case ERR.mismatchDiffDst: return bad(`ARG.DIFF_DST offsets[${s.index}] = ${s.a} differ from ARG.SRC offsets[${s.index}] = ${s.b}`);
    case ERR.mismatchDiffSrc: return bad(`ARG.DIFF_SRC offsets[${s.index}] = ${s.a} differ from ARG.SRC offsets[${s.index}] = ${s.b}`);
    default: return new DnnlError('runtime_error', `${FN}: kernel status ${s.code}`);
  }
}

/** The kernel's offsets checks in its order; returns the rows to touch. */
function checkedRows(p: GluBackwardProblem, a: GluBackwardArgs): number {
  if (!p.G) return p.R;
  const o = a.src.offsets, G = p.G;
  const fail = (code: number, index: number, x: number, y: number): never => { throw offsetsError(p, { code, index, a: x, b: y }); };
  if (o[0] !== 0) fail(ERR.first, 0, o[0], 0);
  for (let i = 1; i <= G; i++) if (o[i] < o[i - 1]) fail(ERR.decreasing, i, o[i], o[i - 1]);
  if (o[G] > p.R) fail(ERR.total, G, o[G], p.R);
  for (const [m, code] of [[a.diffDst, ERR.mismatchDiffDst], [a.diffSrc, ERR.mismatchDiffSrc]] as const) {
    const q = m.offsets;
    for (let i = 0; i <= G; i++) if (q[i] !== o[i]) fail(code, i, q[i], o[i]);
  }
  return o[G];
}

/** Float64 math (attr/glu_backward.ts), f32 stores; dprob gets each row's float64 sum once. */
const ref: GluBackwardImpl = {
  name: 'ref:any',
  describe: () => 'ref:any',
  reject: () => undefined,
  executor: (p) => stateless((a) => () => {
    const rows = checkedRows(p, a);
    const h = elementReader(p.src.dataType, a.src.values), d = elementReader(p.diffDst.dataType, a.diffDst.values);
    const w = elementWriter(p.diffSrc.dataType, a.diffSrc.values);
    const [hs0, hs1] = p.src.strides, [ds0, ds1] = p.diffDst.strides, [os0, os1] = p.diffSrc.strides;
    const prob = a.prob?.values as Float32Array | undefined, dprob = a.diffProb?.values as Float32Array | undefined;
    const pld = p.prob?.strides[0] ?? 0;
    const g: GluGrad = { dGate: 0, dUp: 0, term: 0 };
    for (let r = 0; r < rows; r++) {
      const pr = prob ? prob[r * pld] : 1;
      let sum = 0;
      for (let n = 0; n < p.N; n++) {
        const [gc, uc] = gluBackwardColumns(p.layout, p.N, n);
        gluBackwardScalar(p.alg, h(r * hs0 + gc * hs1), h(r * hs0 + uc * hs1), d(r * ds0 + n * ds1), pr, p.alpha, p.limit, g);
        w(r * os0 + gc * os1, g.dGate);
        w(r * os0 + uc * os1, g.dUp);
        sum += g.term;
      }
      if (dprob) dprob[r * pld] = Math.fround(dprob[r * pld] + sum);
    }
  }),
};

/** wasm/src/glu-bwd.c glu_bwd_job_t. */
const JOB = {
  src: 32, ddst: 36, dsrc: 40, prob: 44, dprob: 48, offs_src: 52, offs_ddst: 56, offs_dsrc: 60,
  R: 64, N: 68, G: 72, alg: 76, layout: 80, alpha: 84, limit: 88, dt_src: 92,
  dt_ddst: 96, dt_dsrc: 100, src_ld: 104, src_s1: 108, ddst_ld: 112, ddst_s1: 116, dsrc_ld: 120, dsrc_s1: 124,
  prob_ld: 128, dprob_ld: 132, SIZE: 144,
} as const;
const KIND_GLU_BWD = 45;

const wasm: GluBackwardImpl = {
  name: 'wasm',
  describe: (engine) => `wasm:${engine.isa}:glu-bwd`,
  reject: (_p, engine) => (engine.kernels ? undefined : 'the engine was created without kernels'),
  executor: (p, engine) => {
    const job = new OpJob(engine, KIND_GLU_BWD, JOB);
    const dt = (m: Memory): number => JOB_DT_ALL[m.desc.dataType as keyof typeof JOB_DT_ALL];
    return {
      destroy: () => job.free(),
      run: (a) => job.task(() => {
        job.reset();
        job.set('src', a.src.handles[0]);
        job.set('ddst', a.diffDst.handles[0]);
        job.set('dsrc', a.diffSrc.handles[0]);
        job.set('prob', a.prob?.handles[0] ?? 0);
        job.set('dprob', a.diffProb?.handles[0] ?? 0);
        if (p.G) {
          job.set('offs_src', a.src.handles[1]);
          job.set('offs_ddst', a.diffDst.handles[1]);
          job.set('offs_dsrc', a.diffSrc.handles[1]);
        }
        job.set('R', p.R);
        job.set('N', p.N);
        job.set('G', p.G);
        job.set('alg', GLU_CODE[p.alg]);
        job.set('layout', GLU_LAYOUT_CODE[p.layout]);
        job.setF32('alpha', p.alpha);
        job.setF32('limit', p.limit);
        job.set('dt_src', dt(a.src));
        job.set('dt_ddst', dt(a.diffDst));
        job.set('dt_dsrc', dt(a.diffSrc));
        job.set('src_ld', p.src.strides[0]);
        job.set('src_s1', p.src.strides[1]);
        job.set('ddst_ld', p.diffDst.strides[0]);
        job.set('ddst_s1', p.diffDst.strides[1]);
        job.set('dsrc_ld', p.diffSrc.strides[0]);
        job.set('dsrc_s1', p.diffSrc.strides[1]);
        job.set('prob_ld', p.prob?.strides[0] ?? 0);
        job.set('dprob_ld', p.prob?.strides[0] ?? 0);
      }, (s) => {
        if (s.code !== 0) throw offsetsError(p, s);
      }),
    };
  },
};

export const gluBackwardImplList: readonly GluBackwardImpl[] = [wasm, ref];
