/**
 * The dprob side of the matmul `glu_backward` post-op (rfcs/0002 section 10, wasm/src/glu-bwd.c): the
 * GEMM's tiles write one f32 partial per row and 64-column chunk into a workspace; this op job
 * (KIND_DGLU_REDUCE) then adds each row's partials in chunk order to dprob. The standalone
 * `glu_backward` primitive sums in the same order, so both give the same bits whatever the tiling and
 * the thread count.
 */
import type { Engine } from '../runtime/engine.js';
import type { Memory } from '../memory/memory.js';
import type { StreamTask } from '../runtime/stream.js';
import { DnnlError } from '../common/status.js';
import { OpJob } from './op_job.js';

/** Columns per dprob partial (wasm/src/dglu.h DGLU_CHUNK). */
export const DGLU_CHUNK = 64;
const KIND_DGLU_REDUCE = 46;
const LAYOUT = { ws: 32, dprob: 36, offs: 40, G: 44, R: 48, nchunk: 52, dprob_ld: 56, SIZE: 64 } as const;

export class DglReduceJob {
  /** Address of the workspace: f32 [rows][ceil(N / 64)]. */
  readonly ws: number;
  private readonly engine: Engine;
  private readonly job: OpJob<typeof LAYOUT>;
  private readonly rows: number;
  private readonly nchunk: number;

  constructor(engine: Engine, rows: number, N: number) {
    this.engine = engine;
    this.rows = rows;
    this.nchunk = Math.ceil(N / DGLU_CHUNK);
    this.ws = engine.alloc(Math.max(4, rows * this.nchunk * 4));
    this.job = new OpJob(engine, KIND_DGLU_REDUCE, LAYOUT);
  }

  /** Stream work: dprob[r] += partials of row r, for rows before offs[G] (offs = 0: every row). */
  task(dprob: Memory, offs: number, G: number): StreamTask {
    const j = this.job;
    return j.task(() => {
      j.reset();
      j.set('ws', this.ws);
      j.set('dprob', dprob.handles[0]);
      j.set('offs', offs);
      j.set('G', G);
      j.set('R', this.rows);
      j.set('nchunk', this.nchunk);
      j.set('dprob_ld', dprob.desc.strides[0]);
    }, (s) => {
      if (s.code !== 0) throw new DnnlError('runtime_error', `matmul glu_backward dprob: kernel status ${s.code}`);
    });
  }

  free(): void {
    this.job.free();
    this.engine.releaseBlock(this.ws);
  }
}
