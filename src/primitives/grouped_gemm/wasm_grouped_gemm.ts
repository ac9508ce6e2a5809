import type { DataType } from '../../common/data_type.js';
import { packedWeightsDesc, PACKED_P8 } from '../../memory/packed_weights.js';
import type { Engine } from '../../runtime/engine.js';
import { GROUP_MODE, GROUP_REC, JOB, JOB_DT, JOB_ERR, JOB_KIND } from '../../runtime/job_layout.js';
import { epilogueRejection, writeEpilogue } from '../kernel_epilogue.js';
import type { GroupedGemmArgs, GroupedGemmImpl } from './impl_list.js';
import type { GroupedGemmProblem } from './problem.js';
import { rowCapacity, runtimeDimsError } from './runtime_dims.js';

const MB = 64, NB = 128, KC = 256;

/**
 * Proposal #3 on the matmul kernel core: the job's group mode is a pointer table (one record per
 * expert: buffers, K, N, strides, row capacity) plus the runtime-dims buffer, read by the workers.
 * Rebuilding the table on every execution is the host-side cost this proposal carries.
 */
export const wasmGroupedGemm: GroupedGemmImpl = {
  name: 'wasm:f32-gemm-4x8',
  describe: (engine) => `wasm:${engine.isa}:f32-gemm-4x8`,
  reject(p, engine) {
    if (!engine.kernels) return 'the engine was created without kernels';
    if (p.experts.some((e) => e.weights.format === 'packed' && e.weights.packed?.name !== PACKED_P8)) return 'unknown packed layout';
    return epilogueRejection(p.attr);
  },
  weightsLayout(e) {
    return packedWeightsDesc(e.weights.dims);
  },
  createExecutor(p, engine) {
    return new Executor(p, engine);
  },
};

class Executor {
  private readonly job: number;
  private readonly table: number;
  private readonly i32: Int32Array;
  private readonly f32: Float32Array;
  private readonly t32: Int32Array;
  private readonly t32u: Uint32Array;

  constructor(private readonly p: GroupedGemmProblem, private readonly engine: Engine) {
    this.job = engine.alloc(JOB.SIZE);
    this.table = engine.alloc(p.G * GROUP_REC.SIZE);
    this.i32 = new Int32Array(engine.buffer, this.job, JOB.SIZE / 4);
    this.f32 = new Float32Array(engine.buffer, this.job, JOB.SIZE / 4);
    this.t32 = new Int32Array(engine.buffer, this.table, (p.G * GROUP_REC.SIZE) / 4);
    this.t32u = new Uint32Array(engine.buffer, this.table, (p.G * GROUP_REC.SIZE) / 4);
  }

  task(a: GroupedGemmArgs): () => void | Promise<void> {
    const eng = this.engine;
    if (eng.pool) return () => eng.pool!.run(() => this.fill(a)).then(() => this.checkStatus());
    return () => {
      eng.kernels!.run_job(this.fill(a), 0);
      this.checkStatus();
    };
  }

  private fill(a: GroupedGemmArgs): number {
    const { p, i32 } = this;
    const dt = (t: DataType): number => JOB_DT[t as keyof typeof JOB_DT];
    const scratch = this.engine.scratch(Math.ceil(((p.G + 1) * 4) / 64) * 64 + 4 * (MB * KC + KC * NB + MB * NB + NB));
    i32.fill(0);
    const set = (f: keyof typeof JOB, v: number): void => {
      i32[JOB[f] / 4] = v;
    };
    set('kind', JOB_KIND.grouped_m);
    set('group_mode', GROUP_MODE.pointers);
    set('G', p.G);
    set('mb', MB);
    set('nb', NB);
    set('kc', KC);
    set('scratch', scratch.ptr);
    set('scratch_stride', scratch.stride);
    set('offs', a.runtimeDims.handles[0]);
    set('groups', this.table);
    const e0 = p.experts[0];
    set('dt_src', dt(e0.src.dataType));
    // One dt_wei serves every plain expert (packed panels are always f32 and ignore it), so take it
    // from the first plain expert, not expert 0, which may be packed while the others are bf16/f16.
    const plainWei = p.experts.find((e) => e.weights.format !== 'packed');
    set('dt_wei', plainWei ? dt(plainWei.weights.dataType) : JOB_DT.f32);
    set('dt_dst', dt(e0.dst.dataType));
    writeEpilogue(i32, this.f32, p.attr);
    const R = GROUP_REC.SIZE / 4;
    p.experts.forEach((e, g) => {
      const o = g * R;
      this.t32u[o + GROUP_REC.src / 4] = a.src[g].handles[0];
      this.t32u[o + GROUP_REC.wei / 4] = a.weights[g].handles[0];
      this.t32u[o + GROUP_REC.dst / 4] = a.dst[g].handles[0];
      this.t32u[o + GROUP_REC.max_rows / 4] = Math.min(rowCapacity(a.src[g]), rowCapacity(a.dst[g]));
      this.t32[o + GROUP_REC.K / 4] = e.K;
      this.t32[o + GROUP_REC.N / 4] = e.N;
      this.t32[o + GROUP_REC.s_0 / 4] = e.src.strides[0];
      this.t32[o + GROUP_REC.d_0 / 4] = e.dst.strides[0];
      const packed = e.weights.format === 'packed';
      this.t32[o + GROUP_REC.w_k / 4] = packed ? 0 : e.weights.strides[0];
      this.t32[o + GROUP_REC.w_n / 4] = packed ? 0 : e.weights.strides[1];
      this.t32[o + GROUP_REC.wei_packed / 4] = packed ? 1 : 0;
    });
    return this.job;
  }

  private checkStatus(): void {
    const code = this.i32[JOB.status / 4];
    if (code === JOB_ERR.none) return;
    throw runtimeDimsError(code, this.i32[JOB.err_index / 4], this.i32[JOB.err_a / 4], this.i32[JOB.err_b / 4]);
  }
}
