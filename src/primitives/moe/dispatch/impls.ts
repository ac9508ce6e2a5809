import { DnnlError } from '../../../common/status.js';
import { OpJob, type OpStatus } from '../../../kernels/op_job.js';
import type { Memory } from '../../../memory/memory.js';
import type { GpuMemory } from '../../../memory/gpu_memory.js';
import type { Engine } from '../../../runtime/engine.js';
import type { GpuEngine } from '../../../runtime/gpu/gpu_engine.js';
import { stateless, type Executor } from '../../../runtime/lifetime.js';
import type { DispatchProblem } from './pd.js';

export interface DispatchArgs<M = Memory> {
  readonly ids: M;
  readonly hidden: M | undefined;
  readonly expertMap: M | undefined;
  readonly dst: M | undefined;
  readonly tokenIndex: M;
  readonly tokenKs: M;
  readonly rowOf: M;
  readonly counts: M | undefined;
}

/** One entry of an ordered implementation list; `reject` says why it cannot run a problem (undefined = it can). */
export interface DispatchImpl<E = Engine, M = Memory> {
  readonly name: string;
  /** Full name for `pd.implInfo` (ISA, kernel); defaults to `name`. */
  describe?(engine: E, p: DispatchProblem): string;
  reject(p: DispatchProblem, engine: E): string | undefined;
  task(p: DispatchProblem, engine: E): Executor<DispatchArgs<M>>;
}

/** An implementation for the gpu engine (its own list: the host reference never runs there). */
export type GpuDispatchImpl = DispatchImpl<GpuEngine, GpuMemory>;

/** Runtime-data errors; the kernel (moe-dispatch.c) reports the same codes. */
export const DISPATCH_ERR = { id: 120, dup: 121, map: 122, cap: 123 } as const;

export function dispatchError(p: DispatchProblem, code: number, i: number, a: number, b: number): DnnlError {
  const t = Math.floor(i / p.k), s = i % p.k;
  const msg =
    code === DISPATCH_ERR.id ? `ARG.MOE_TOPK_IDS[${t}, ${s}] = ${a} is out of range [0, experts = ${b})` :
    code === DISPATCH_ERR.dup ? `ARG.MOE_TOPK_IDS[${t}, ${s}] = ${a} repeats slot ${b} of token ${t} (the batched format holds one row per token and expert; the contiguous format takes repeats)` :
    code === DISPATCH_ERR.map ? `ARG.MOE_EXPERT_MAP[${i}] = ${a} is out of range [-1, local experts = ${b})` :
    code === DISPATCH_ERR.cap ? `expert ${i} receives ${a} rows, more than maxTokens = ${b} (the batched capacity)` :
    `kernel status ${code}`;
  return new DnnlError(code >= 120 && code <= 123 ? 'invalid_arguments' : 'runtime_error', `moe.dispatch.execute: ${msg}`);
}

/** The placement, in plain JS (the reference and the oracle the kernel is held to). */
function place(p: DispatchProblem, ids: Int32Array, map: Int32Array | undefined): { start: number[]; counts: number[]; pos: Int32Array; inv: Int32Array } {
  const n = p.T * p.k;
  for (let i = 0; i < n; i++) {
    const e = ids[i];
    if (e < 0 || e >= p.E) throw dispatchError(p, DISPATCH_ERR.id, i, e, p.E);
    // Contiguous: an expert in two slots of a token gets one routed row per slot (vLLM, cuDNN); batched: one row per token.
    if (p.batched) for (let s = i - (i % p.k); s < i; s++) if (ids[s] === e) throw dispatchError(p, DISPATCH_ERR.dup, i, e, s % p.k);
  }
  if (map) for (let e = 0; e < p.E; e++) if (map[e] < -1 || map[e] >= p.G) throw dispatchError(p, DISPATCH_ERR.map, e, map[e], p.G);
  const local = (i: number): number => (map ? map[ids[i]] : ids[i]);
  const counts = new Array<number>(p.G).fill(0);
  for (let i = 0; i < n; i++) if (local(i) >= 0) counts[local(i)]++;
  if (p.batched) counts.forEach((c, g) => { if (c > p.cap) throw dispatchError(p, DISPATCH_ERR.cap, g, c, p.cap); });
  const start = new Array<number>(p.G + 1).fill(0);
  for (let g = 0; g < p.G; g++) start[g + 1] = p.batched ? (g + 1) * p.cap : start[g] + Math.ceil(counts[g] / p.block) * p.block;
  const cur = start.slice(0, p.G);
  const pos = new Int32Array(n).fill(-1), inv = new Int32Array(p.R).fill(-1);
  for (let i = 0; i < n; i++) {
    const l = local(i);
    if (l < 0) continue;
    pos[i] = cur[l]++;
    inv[pos[i]] = i;
  }
  return { start, counts, pos, inv };
}

const ref: DispatchImpl = {
  name: 'ref:any',
  reject: () => undefined,
  task: (p) => stateless((a) => () => {
    const { start, counts, pos, inv } = place(p, a.ids.values as Int32Array, a.expertMap?.values as Int32Array | undefined);
    const ti = a.tokenIndex.values as Int32Array, ks = a.tokenKs.values as Int32Array;
    for (let r = 0; r < p.R; r++) {
      ti[r] = inv[r] >= 0 ? Math.floor(inv[r] / p.k) : -1;
      ks[r] = inv[r] >= 0 ? inv[r] % p.k : -1;
    }
    (a.rowOf.values as Int32Array).set(pos);
    if (p.batched) (a.counts!.values as Int32Array).set(counts);
    else if (!a.hidden) (a.dst!.values as Int32Array).set(start);
    else a.dst!.offsets.set(start);
    if (!a.hidden || !a.dst) return;
    const src = a.hidden.values, dst = a.dst.values, K = p.K, hl = p.hidden!.strides[0], dl = p.batched ? a.dst.desc.strides[1] : a.dst.desc.strides[0];
    const used = p.batched ? p.R : start[p.G];
    for (let r = 0; r < p.R; r++) {
      if (inv[r] >= 0) dst.set(src.subarray(Math.floor(inv[r] / p.k) * hl, Math.floor(inv[r] / p.k) * hl + K), r * dl);
      else if (!p.batched && r < used) dst.fill(0, r * dl, r * dl + K);
    }
  }),
};

const DISPATCH_JOB = {
  ids: 32, hidden: 36, dst: 40, offs: 44, token_index: 48, token_ks: 52, row_of: 56, expert_map: 60,
  counts: 64, scratch: 68, scratch_stride: 72, T: 76, k: 80, E: 84, G: 88, K: 92,
  hidden_ld: 96, dst_ld: 100, esz: 104, block: 108, batched: 112, cap: 116, R: 120, SIZE: 128,
} as const;
const KIND_MOE_DISPATCH = 18;

const wasm: DispatchImpl = {
  name: 'wasm',
  describe: (engine) => `wasm:${engine.isa}:moe-dispatch`,
  reject: (_p, engine) => (engine.kernels ? undefined : 'the engine was created without kernels'),
  task: (p, engine) => {
    const job = new OpJob(engine, KIND_MOE_DISPATCH, DISPATCH_JOB);
    const n = p.T * p.k;
    return { destroy: () => job.free(), run: (a) => job.task(() => {
      const scratch = engine.scratch(4 * (2 * p.G + 1 + n + p.R));
      job.reset();
      job.set('ids', a.ids.handles[0]);
      job.set('hidden', a.hidden ? a.hidden.handles[0] : 0);
      job.set('dst', a.hidden && a.dst ? a.dst.handles[0] : 0);
      job.set('offs', p.batched ? 0 : a.hidden ? a.dst!.handles[1] : a.dst!.handles[0]);
      job.set('token_index', a.tokenIndex.handles[0]);
      job.set('token_ks', a.tokenKs.handles[0]);
      job.set('row_of', a.rowOf.handles[0]);
      job.set('expert_map', a.expertMap ? a.expertMap.handles[0] : 0);
      job.set('counts', a.counts ? a.counts.handles[0] : 0);
      job.set('scratch', scratch.ptr);
      job.set('scratch_stride', scratch.stride);
      job.set('T', p.T);
      job.set('k', p.k);
      job.set('E', p.E);
      job.set('G', p.G);
      job.set('K', p.K);
      job.set('hidden_ld', p.hidden ? p.hidden.strides[0] : 0);
      job.set('dst_ld', a.dst && a.hidden ? (p.batched ? a.dst.desc.strides[1] : a.dst.desc.strides[0]) : 0);
      job.set('esz', p.hidden ? (p.hidden.dataType === 'f32' ? 4 : 2) : 0);
      job.set('block', p.block);
      job.set('batched', p.batched ? 1 : 0);
      job.set('cap', p.cap);
      job.set('R', p.R);
    }, (s: OpStatus) => {
      if (s.code !== 0) throw dispatchError(p, s.code, s.index, s.a, s.b);
    }) };
  },
};

/** The cpu engine's list, in order of preference. */
export const dispatchImplList: readonly DispatchImpl[] = [wasm, ref];
