/**
 * Jobs that are not GEMMs (wasm/src/op_job.h): MoE routing, dispatch, combine, backward helpers. An
 * op job is a struct in the engine heap whose first 32 bytes mirror `job_t` (kind, status, error
 * fields, tile counter, thread count); the op's own fields follow. Running one goes through the same
 * `run_job` entry point and worker pool as the matmul, so every op is "one wasm job on the shared
 * tile scheduler".
 */
import type { Engine } from '../runtime/engine.js';
import type { StreamTask } from '../runtime/stream.js';

/** Byte offsets of `op_head_t`. */
export const OP_HEAD = { kind: 0, status: 8, err_index: 12, err_a: 16, err_b: 20, tile_next: 24, nthreads: 28, SIZE: 32 } as const;

/** Op kinds (op_job.h). */
export const OP_KIND = { fill: 16, moe_route: 17 } as const;

/** Field name -> byte offset (multiple of 4) of an op's struct, with its total SIZE. */
export type OpLayout = Readonly<Record<string, number>> & { readonly SIZE: number };

/** The verdict of a job on its runtime data, read after it ran. */
export interface OpStatus {
  readonly code: number;
  readonly index: number;
  readonly a: number;
  readonly b: number;
}

/**
 * One job struct of a primitive, allocated once in the engine heap and rewritten per execution (jobs
 * of one engine are serialized, so one struct per primitive suffices).
 */
export class OpJob<L extends OpLayout> {
  readonly engine: Engine;
  readonly ptr: number;
  private readonly layout: L;
  private readonly kind: number;
  private readonly i32: Int32Array;
  private readonly f32: Float32Array;

  constructor(engine: Engine, kind: number, layout: L) {
    this.engine = engine;
    this.layout = layout;
    this.kind = kind;
    this.ptr = engine.alloc(Math.max(layout.SIZE, OP_HEAD.SIZE));
    this.i32 = new Int32Array(engine.buffer, this.ptr, layout.SIZE / 4);
    this.f32 = new Float32Array(engine.buffer, this.ptr, layout.SIZE / 4);
  }

  /** Zeroes the struct and writes the head (kind, thread count); call first in each fill. */
  reset(): void {
    this.i32.fill(0);
    this.i32[OP_HEAD.kind / 4] = this.kind;
    this.i32[OP_HEAD.nthreads / 4] = this.engine.threads;
  }

  set(field: keyof L & string, v: number): void {
    this.i32[this.layout[field] / 4] = v;
  }

  setF32(field: keyof L & string, v: number): void {
    this.f32[this.layout[field] / 4] = v;
  }

  get(field: keyof L & string): number {
    return this.i32[this.layout[field] / 4];
  }

  status(): OpStatus {
    const h = (o: number): number => this.i32[o / 4];
    return { code: h(OP_HEAD.status), index: h(OP_HEAD.err_index), a: h(OP_HEAD.err_a), b: h(OP_HEAD.err_b) };
  }

  /**
   * Stream work that runs the job: `fill` writes the struct right before it runs (the job is next in
   * line, so per-thread scratch is free) and returns nothing; `after` checks the status (throws
   * `DnnlError`s for bad runtime data) once every worker is done.
   */
  task(fill: () => void, after: (s: OpStatus) => void): StreamTask {
    const eng = this.engine;
    const prepare = (): number => {
      fill();
      return this.ptr;
    };
    if (eng.pool) return () => eng.pool!.run(prepare).then(() => after(this.status()));
    return () => {
      eng.kernels!.run_job(prepare(), 0);
      after(this.status());
    };
  }

  /** Gives the struct back to the engine heap. */
  free(): void {
    this.engine.releaseBlock(this.ptr);
  }
}
