import { DnnlError } from '../../common/status.js';
import { roundHalfEven } from '../../common/low_precision.js';
import { elementReader } from '../../attr/fusion.js';
import type { Memory } from '../../memory/memory.js';
import type { Engine } from '../../runtime/engine.js';
import { stateless, type Executor } from '../../runtime/lifetime.js';
import { OpJob, type OpStatus } from '../../kernels/op_job.js';
import { KIND_QUANT_ROWS_S8, QUANT_ROWS, SRC_DT } from '../../kernels/quant_rows_job.js';
import type { DynamicQuantProblem } from './pd.js';
import { nonFinite, offsError } from './errors.js';
import { webgpuDynamicQuant, type GpuDynamicQuantImpl } from './webgpu_dynamic_quant.js';

export interface DynamicQuantArgs {
  readonly src: Memory;
  readonly dst: Memory;
  readonly scales: Memory;
}

export interface DynamicQuantImpl {
  readonly name: string;
  reject(p: DynamicQuantProblem, engine: Engine): string | undefined;
  task(p: DynamicQuantProblem, engine: Engine): Executor<DynamicQuantArgs>;
}

/** Rows to quantize: all, or up to a grouped src's last offset (checked like the kernel). */
function rowCount(p: DynamicQuantProblem, src: Memory): number {
  if (!p.grouped) return p.rows;
  const G = p.src.grouped!.groupCount, n = src.offsets[G];
  if (n < 0 || n > p.rows) throw offsError(G, n, p.rows);
  return n;
}

const ref: DynamicQuantImpl = {
  name: 'ref:any',
  reject: () => undefined,
  task: (p) => stateless((a) => () => {
    const rows = rowCount(p, a.src);
    const x = elementReader(p.src.dataType, a.src.values), q = a.dst.values as Int8Array, s = a.scales.values as Float32Array;
    const [sl] = p.src.strides, [dl] = p.dst.strides;
    for (let r = 0; r < rows; r++) {
      let amax = 0;
      for (let k = 0; k < p.cols; k++) amax = Math.max(amax, Math.abs(x(r * sl + k)));
      if (!Number.isFinite(amax)) throw nonFinite(r);
      const sc = amax > 0 ? Math.fround(amax / 127) : 1;
      s[r] = sc;
      for (let k = 0; k < p.cols; k++) q[r * dl + k] = Math.max(-128, Math.min(127, roundHalfEven(x(r * sl + k) / sc)));
    }
  }),
};


const wasm: DynamicQuantImpl = {
  name: 'wasm',
  reject: (p, engine) => (!engine.kernels ? 'the engine was created without kernels' : p.rows * Math.max(p.cols, 1) > 0x7fffffff ? 'too large for 32-bit indexing' : undefined),
  task: (p, engine) => {
    const job = new OpJob(engine, KIND_QUANT_ROWS_S8, QUANT_ROWS);
    return { destroy: () => job.free(), run: (a) => job.task(() => {
      job.reset();
      job.set('src', a.src.handles[0]);
      job.set('dst', a.dst.handles[0]);
      job.set('scales', a.scales.handles[0]);
      job.set('offs', p.grouped ? a.src.handles[1] : 0);
      job.set('G', p.grouped ? p.src.grouped!.groupCount : 0);
      job.set('rows', p.rows);
      job.set('cols', p.cols);
      job.set('src_ld', p.src.strides[0]);
      job.set('dst_ld', p.dst.strides[0]);
      job.set('src_dt', SRC_DT[p.src.dataType]);
    }, (s: OpStatus) => {
      if (s.code === 0) return;
      if (s.code === 101) throw offsError(s.index, s.a, s.b);
      if (s.code === 102) throw nonFinite(s.index);
      throw new DnnlError('runtime_error', `dynamic_quant: kernel status ${s.code}`);
    }) };
  },
};

export const dynamicQuantImplList: readonly DynamicQuantImpl[] = [wasm, ref];

/** The gpu engine's list. */
export const gpuDynamicQuantImplList: readonly GpuDynamicQuantImpl[] = [webgpuDynamicQuant];
