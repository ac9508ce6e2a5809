import { DnnlError } from '../../../common/status.js';
import { OpJob, type OpStatus } from '../../../kernels/op_job.js';
import type { Memory } from '../../../memory/memory.js';
import type { Engine } from '../../../runtime/engine.js';
import { stateless, type Executor } from '../../../runtime/lifetime.js';
import type { CombineProblem } from './pd.js';

export interface CombineBackwardArgs {
  readonly diffDst: Memory;
  readonly src: Memory | undefined;
  readonly weights: Memory | undefined;
  readonly rowOf: Memory | undefined;
  readonly tokenIndex: Memory | undefined;
  readonly tokenKs: Memory | undefined;
  readonly diffSrc: Memory;
  readonly diffWeights: Memory | undefined;
}

export interface CombineBackwardImpl {
  readonly name: string;
  reject(p: CombineProblem, engine: Engine): string | undefined;
  executor(p: CombineProblem, engine: Engine): Executor<CombineBackwardArgs>;
}

/** Status codes of wasm/src/moe-combine.c. */
const ERR = { row: 130, token: 131, ks: 132 } as const;
const FN = 'moe.combine.backward.execute';

function mapError(p: CombineProblem, s: OpStatus): DnnlError {
  if (s.code === ERR.row) {
    const range = p.scattered ? '[-1, inf) (a mask)' : `[-1, rows = ${p.rows})`;
    return new DnnlError('invalid_arguments', `${FN}: ARG.MOE_ROW_OF[${Math.floor(s.index / p.k)}, ${s.index % p.k}] = ${s.a} is out of range ${range}`);
  }
  if (s.code === ERR.token) return new DnnlError('invalid_arguments', `${FN}: ARG.MOE_TOKEN_INDEX[${s.index}] = ${s.a} is out of range [-1, T = ${p.T})`);
  if (s.code === ERR.ks) return new DnnlError('invalid_arguments', `${FN}: ARG.MOE_TOKEN_KS[${s.index}] = ${s.a} is out of range [0, topK = ${p.k})`);
  return new DnnlError('runtime_error', `${FN}: kernel status ${s.code}`);
}

/** The kernel's validation, in its order. */
function checkMaps(p: CombineProblem, a: CombineBackwardArgs): void {
  const ro = a.rowOf?.values as Int32Array | undefined;
  if (ro) for (let i = 0; i < p.T * p.k; i++) if (ro[i] < -1 || (!p.scattered && ro[i] >= p.rows)) throw mapError(p, { code: ERR.row, index: i, a: ro[i], b: 0 });
  if (p.scattered) return;
  const ti = a.tokenIndex!.values as Int32Array, ks = a.tokenKs?.values as Int32Array | undefined;
  for (let r = 0; r < p.rows; r++) {
    if (ti[r] < -1 || ti[r] >= p.T) throw mapError(p, { code: ERR.token, index: r, a: ti[r], b: 0 });
    if (ks && ti[r] >= 0 && (ks[r] < 0 || ks[r] >= p.k)) throw mapError(p, { code: ERR.ks, index: r, a: ks[r], b: 0 });
  }
}

/** f32 products and sums in the kernel's order (four lanes, then the tail): the same bits. */
const ref: CombineBackwardImpl = {
  name: 'ref:any',
  reject: () => undefined,
  executor: (p) => stateless((a) => () => {
    checkMaps(p, a);
    const d = a.diffDst.values as Float32Array, dy = a.diffSrc.values as Float32Array;
    const w = a.weights?.values as Float32Array | undefined, ro = a.rowOf?.values as Int32Array | undefined;
    const ti = a.tokenIndex?.values as Int32Array | undefined, ks = a.tokenKs?.values as Int32Array | undefined;
    const f = Math.fround, N = p.N, ld = p.srcLd;
    for (let r = 0; r < p.rows; r++) {
      let t: number, s = 0;
      if (p.scattered) { t = Math.floor(r / p.k); s = r - t * p.k; if (ro![r] < 0) t = -1; }
      else { t = ti![r]; if (p.weighted && t >= 0) s = ks![r]; }
      for (let n = 0; n < N; n++) dy[r * ld + n] = t < 0 ? 0 : p.weighted ? f(w![t * p.k + s] * d[t * N + n]) : d[t * N + n];
    }
    if (!p.weighted) return;
    const y = a.src!.values as Float32Array, dw = a.diffWeights!.values as Float32Array;
    for (let t = 0; t < p.T; t++)
      for (let s = 0; s < p.k; s++) {
        const r0 = ro![t * p.k + s];
        if (r0 < 0) { dw[t * p.k + s] = 0; continue; }
        const o = (p.scattered ? t * p.k + s : r0) * ld;
        const lane = [0, 0, 0, 0];
        let n = 0;
        for (; n + 4 <= N; n += 4) for (let l = 0; l < 4; l++) lane[l] = f(lane[l] + f(d[t * N + n + l] * y[o + n + l]));
        let x = f(f(lane[0] + lane[1]) + f(lane[2] + lane[3]));
        for (; n < N; n++) x = f(x + f(d[t * N + n] * y[o + n]));
        dw[t * p.k + s] = x;
      }
  }),
};

const JOB = {
  ddst: 32, src: 36, weights: 40, row_of: 44, token_index: 48, token_ks: 52, dsrc: 56, dweights: 60,
  T: 64, k: 68, N: 72, rows: 76, ddst_ld: 80, src_ld: 84, dsrc_ld: 88, scattered: 92, weighted: 96, SIZE: 112,
} as const;
const KIND_MOE_COMBINE_BWD = 41;

const wasm: CombineBackwardImpl = {
  name: 'wasm',
  reject: (_p, engine) => (engine.kernels ? undefined : 'the engine was created without kernels'),
  executor: (p, engine) => {
    const job = new OpJob(engine, KIND_MOE_COMBINE_BWD, JOB);
    const ptr = (m: Memory | undefined): number => (m ? m.handles[0] : 0);
    return {
      destroy: () => job.free(),
      run: (a) => job.task(() => {
        job.reset();
        job.set('ddst', ptr(a.diffDst));
        job.set('src', ptr(a.src));
        job.set('weights', ptr(a.weights));
        job.set('row_of', ptr(a.rowOf));
        job.set('token_index', ptr(a.tokenIndex));
        job.set('token_ks', ptr(a.tokenKs));
        job.set('dsrc', ptr(a.diffSrc));
        job.set('dweights', ptr(a.diffWeights));
        job.set('T', p.T);
        job.set('k', p.k);
        job.set('N', p.N);
        job.set('rows', p.rows);
        job.set('ddst_ld', p.N);
        job.set('src_ld', p.srcLd);
        job.set('dsrc_ld', p.srcLd);
        job.set('scattered', p.scattered ? 1 : 0);
        job.set('weighted', p.weighted ? 1 : 0);
      }, (s) => {
        if (s.code !== 0) throw mapError(p, s);
      }),
    };
  },
};

export const combineBackwardImplList: readonly CombineBackwardImpl[] = [wasm, ref];
