import type { DataType } from '../../common/data_type.js';
import type { MemoryDesc } from '../../memory/desc.js';
import { packedGeometry, packedWeightsDesc, PACKED_P8 } from '../../memory/packed_weights.js';
import type { Engine } from '../../runtime/engine.js';
import { GROUP_MODE, JOB, JOB_DT, JOB_ERR, JOB_KIND, type JobField } from '../../runtime/job_layout.js';
import { epilogueRejection, writeEpilogue } from '../kernel_epilogue.js';
import type { MatmulArgs, MatmulExecutor, MatmulImpl } from './impl.js';
import type { MatmulProblem } from './problem.js';
import { groupingOf, offsetsError } from './runtime_offsets.js';

/** Tile geometry: MB x NB output blocks, K blocked by KC (B micro-panel 8 KiB in L1, A block in L2). */
const MB = 64;
const NB = 128;
const KC = 256;

const KERNEL_TYPES: readonly DataType[] = ['f32', 'bf16', 'f16'];

function fits32(md: MemoryDesc): boolean {
  return md.dims.every((d) => d <= 0x7fffffff) && md.strides.every((s) => s <= 0x7fffffff) && md.spanElems <= 0x7fffffff;
}

/**
 * The SIMD wasm implementation: one job per execution, run by the workers (or the calling thread
 * when threads = 1) on the f32 4x8 microkernel. Grouped variable-M, variable-K, dense 2D and batched
 * 3D all become the same tile space; only how a group finds its rows differs.
 */
export const wasmMatmul: MatmulImpl = {
  name: 'wasm:f32-gemm-4x8',
  describe: (engine) => `wasm:${engine.isa}:f32-gemm-4x8`,
  reject(p, engine) {
    if (!engine.kernels) return 'the engine was created without kernels';
    for (const [name, md] of [['src', p.src], ['weights', p.weights], ['dst', p.dst]] as const) {
      if (!KERNEL_TYPES.includes(md.dataType)) return `${name} data type ${md.dataType} is not supported`;
      if (md.format !== 'any' && md.format !== 'packed' && !fits32(md)) return `${name} is too large for 32-bit indexing`;
    }
    if (p.weights.format === 'packed' && p.weights.packed?.name !== PACKED_P8) return `packed layout ${p.weights.packed?.name} is not ${PACKED_P8}`;
    if (p.kind === 'dense' && p.dst.ndims > 3) return 'dense matmul with more than one batch dim';
    if (p.kind === 'grouped_k' && p.weights.format !== 'blocked') return 'variable-K weights must be plain';
    if (p.bias) {
      if (p.bias.dataType !== 'f32') return `bias data type ${p.bias.dataType} (kernels take f32 bias)`;
      const nd = p.bias.ndims;
      if ((p.kind !== 'grouped_m' || nd === 3) && nd >= 2 && p.bias.dims[nd - 2] !== 1) return 'bias that varies along M';
    }
    const epi = epilogueRejection(p.attr);
    if (epi) return epi;
    return undefined;
  },
  weightsLayout(p) {
    return packedWeightsDesc(p.weights.dims);
  },
  createExecutor(p, engine) {
    return new WasmMatmulExecutor(p, engine);
  },
};

class WasmMatmulExecutor implements MatmulExecutor {
  private readonly p: MatmulProblem;
  private readonly engine: Engine;
  private readonly job: number;
  private readonly sizes: number;
  private readonly i32: Int32Array;
  private readonly f32: Float32Array;

  constructor(p: MatmulProblem, engine: Engine) {
    this.p = p;
    this.engine = engine;
    // Freed with the engine heap: primitives have no destructor, like oneDNN's C++ API objects.
    this.job = engine.alloc(JOB.SIZE);
    this.i32 = new Int32Array(engine.buffer, this.job, JOB.SIZE / 4);
    this.f32 = new Float32Array(engine.buffer, this.job, JOB.SIZE / 4);
    const known = p.src.grouped?.groupSizes ?? p.dst.grouped?.groupSizes ?? p.weights.grouped?.groupSizes;
    this.sizes = 0;
    if (known) {
      this.sizes = engine.alloc(known.length * 4);
      new Int32Array(engine.buffer, this.sizes, known.length).set(known);
    }
  }

  task(a: MatmulArgs): () => void | Promise<void> {
    const eng = this.engine;
    if (eng.pool) return () => eng.pool!.run(() => this.fill(a)).then(() => this.checkStatus(a));
    return () => {
      eng.kernels!.run_job(this.fill(a), 0);
      this.checkStatus(a);
    };
  }

  private set(field: JobField, v: number): void {
    this.i32[JOB[field] / 4] = v;
  }

  /** Writes the job for these arguments; runs when the job is next in line, so the scratch is free. */
  private fill(a: MatmulArgs): number {
    const p = this.p;
    const G = p.kind === 'dense' ? (p.batch.length ? p.batch[0] : 1) : p.G;
    const scratch = this.engine.scratch(Math.ceil(((G + 1) * 4) / 64) * 64 + 4 * (MB * KC + KC * NB + MB * NB + NB));
    this.i32.fill(0);
    const dt = (t: DataType): number => JOB_DT[t as keyof typeof JOB_DT];
    this.set('kind', p.kind === 'grouped_k' ? JOB_KIND.grouped_k : JOB_KIND.grouped_m);
    this.set('group_mode', p.kind === 'dense' ? GROUP_MODE.uniform : GROUP_MODE.offsets);
    this.set('G', G);
    this.set('M', p.M);
    this.set('K', p.K);
    this.set('N', p.N);
    this.set('total', p.kind === 'grouped_k' ? p.K : p.M);
    this.set('mb', MB);
    this.set('nb', NB);
    this.set('kc', KC);
    this.set('scratch', scratch.ptr);
    this.set('scratch_stride', scratch.stride);
    this.set('nthreads', this.engine.threads);
    this.set('src', a.src.handles[0]);
    this.set('wei', a.weights.handles[0]);
    this.set('dst', a.dst.handles[0]);
    this.set('dt_src', dt(p.src.dataType));
    this.set('dt_wei', dt(p.weights.dataType));
    this.set('dt_dst', dt(p.dst.dataType));
    const ss = p.src.strides, ws = p.weights.strides, ds = p.dst.strides;
    const batched = p.kind === 'dense' && p.batch.length === 1;
    const tail = (s: readonly number[], n: number): number[] => s.slice(s.length - n);
    if (p.kind === 'grouped_k') {
      this.set('s_0', ss[0]); this.set('s_1', ss[1]);
      this.set('w_k', ws[0]); this.set('w_n', ws[1]);
      this.set('d_g', ds[0]); this.set('d_0', ds[1]); this.set('d_1', ds[2]);
      this.set('offs', a.src.handles[1]);
      this.set('offs2', a.weights.handles[1]);
    } else {
      const [s0, s1] = tail(ss, 2), [d0, d1] = tail(ds, 2);
      this.set('s_g', batched && p.src.dims[0] !== 1 ? ss[0] : 0);
      this.set('s_0', s0); this.set('s_1', s1);
      this.set('d_g', batched ? ds[0] : 0);
      this.set('d_0', d0); this.set('d_1', d1);
      const weiBatched = p.weights.ndims === 3 && p.weights.dims[0] !== 1;
      if (p.weights.format === 'packed') {
        this.set('wei_packed', 1);
        this.set('dt_wei', JOB_DT.f32);
        this.set('w_g', weiBatched ? packedGeometry(p.weights.dims).expertFloats : 0);
      } else {
        const [wk, wn] = tail(ws, 2);
        this.set('w_g', weiBatched ? ws[0] : 0);
        this.set('w_k', wk); this.set('w_n', wn);
      }
      if (p.offsetsFrom === 'attr') {
        this.set('offs', a.offsets!.handles[0]);
      } else if (p.kind === 'grouped_m') {
        this.set('offs', a.src.handles[1]);
        this.set('offs2', a.dst.handles[1]);
      }
    }
    this.set('sizes', this.sizes);
    if (a.bias && p.bias) {
      const b = p.bias, nd = b.ndims;
      this.set('bias', a.bias.handles[0]);
      this.set('b_n', b.dims[nd - 1] === 1 ? 0 : b.strides[nd - 1]);
      const perGroup = p.kind !== 'dense' || (batched && nd === 3);
      this.set('b_g', perGroup && b.dims[0] !== 1 ? b.strides[0] : 0);
    }
    writeEpilogue(this.i32, this.f32, p.attr);
    return this.job;
  }

  /** Turns the kernel's verdict on the runtime offsets into the same errors as the reference. */
  private checkStatus(a: MatmulArgs): void {
    const code = this.i32[JOB.status / 4];
    if (code === JOB_ERR.none) return;
    throw offsetsError(groupingOf(this.p, a), code, this.i32[JOB.err_index / 4], this.i32[JOB.err_a / 4], this.i32[JOB.err_b / 4]);
  }
}
