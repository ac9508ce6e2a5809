import { fits32 } from '../../../kernels/fused_job.js';
import { OP_KIND, OpJob, type OpLayout } from '../../../kernels/op_job.js';
import type { Engine } from '../../../runtime/engine.js';
import type { Memory } from '../../../memory/memory.js';
import type { StreamTask } from '../../../runtime/stream.js';
import type { RoutingArgs, RoutingImpl } from './impl.js';
import type { RoutingProblem } from './problem.js';
import { routingDataError } from './runtime_data.js';

/** Byte offsets of `moe_route_job_t` (wasm/src/moe-route.c). */
export const ROUTE_JOB = {
  src: 32, T: 36, E: 40, k: 44, s_t: 48, s_e: 52, dt: 56, scoring: 60, renorm: 64, groups: 68, kgroup: 72, gmode: 76,
  bias: 80, ids: 84, weights: 88, scale: 92, scratch: 96, scratch_stride: 100, tile: 104, renorm_eps: 108, SIZE: 112,
} as const;

/** Tokens per tile of the shared counter: enough work per atomic, and tiles for every worker at T >= 48. */
export const ROUTE_TILE_TOKENS = 16;

const DT = { f32: 0, bf16: 1, f16: 2 } as const;
const round4 = (n: number): number => (n + 3) & ~3;

/** Per-worker scratch of the kernel (scratch_of in moe-route.c): scores and selection scores, three group arrays, the top-k list. */
function scratchBytes(p: RoutingProblem): number {
  return 4 * (2 * round4(p.E) + 3 * round4(p.groupCount) + 2 * round4(p.topK));
}

/** The routing kernel: one op job per execution, tiles of tokens on the engine's workers. */
export const wasmRouting: RoutingImpl = {
  name: 'wasm:moe-route',
  describe(engine) {
    return `wasm:${engine.isa}:moe-route`;
  },
  reject(p, engine) {
    if (!engine.kernels) return 'the engine was created without kernels';
    if (p.custom) return 'a custom routing function runs on the host';
    if (!fits32(p.src) || !fits32(p.topkIds)) return 'too large for 32-bit indexing';
    return undefined;
  },
  createExecutor(p, engine) {
    return new WasmRoutingExecutor(p, engine);
  },
};

class WasmRoutingExecutor {
  private readonly job: OpJob<typeof ROUTE_JOB>;

  constructor(private readonly p: RoutingProblem, private readonly engine: Engine) {
    this.job = new OpJob(engine, OP_KIND.moe_route, ROUTE_JOB);
  }

  destroy(): void {
    this.job.free();
  }

  task(a: RoutingArgs): StreamTask {
    if (this.p.T === 0) return () => undefined;
    return this.job.task(() => this.fill(a), (s) => {
      if (s.code !== 0) throw routingDataError(s.code, s.index, s.a);
    });
  }

  private fill(a: RoutingArgs): void {
    fillRouteJob(this.job, this.engine, this.p, { src: a.src, ids: a.topkIds, weights: a.topkWeights, bias: a.correctionBias });
  }
}

/**
 * Writes the routing job's fields (the backward's job starts with the same struct). `groups: false`
 * describes the scoring only (the backward: the selection is given, its gradient is zero).
 */
export function fillRouteJob<L extends OpLayout & Readonly<Record<Exclude<keyof typeof ROUTE_JOB, 'SIZE'>, number>>>(job: OpJob<L>, engine: Engine, p: RoutingProblem,
  a: { readonly src: Memory; readonly ids: Memory; readonly weights: Memory; readonly bias?: Memory }, groups = true): void {
  const scratch = engine.scratch(scratchBytes(p));
  job.reset();
  job.set('src', a.src.handles[0]);
  job.set('T', p.T);
  job.set('E', p.E);
  job.set('k', p.topK);
  job.set('s_t', p.src.strides[0]);
  job.set('s_e', p.src.strides[1]);
  job.set('dt', DT[p.src.dataType as keyof typeof DT]);
  job.set('scoring', p.scoring === 'softmax' ? 0 : 1);
  job.set('renorm', p.renormalize ? 1 : 0);
  job.set('groups', groups ? p.groupCount : 1);
  job.set('kgroup', groups ? p.kGroup : 1);
  job.set('gmode', groups ? p.groupSelectMode : 0);
  job.set('bias', a.bias ? a.bias.handles[0] : 0);
  job.set('ids', a.ids.handles[0]);
  job.set('weights', a.weights.handles[0]);
  job.setF32('scale', p.routedScalingFactor);
  job.set('scratch', scratch.ptr);
  job.set('scratch_stride', scratch.stride);
  job.set('tile', ROUTE_TILE_TOKENS);
  job.setF32('renorm_eps', p.renormalizeEps);
}
