import { FLOAT_TYPES } from '../../attr/fusion.js';
import { fits32 } from '../../kernels/fused_job.js';
import { GROUP_MODE, WEI_PACKED } from '../../kernels/job_layout.js';
import { OpJob } from '../../kernels/op_job.js';
import { PACKED_P8T, packedTransposedGeometry, packedTransposedWeightsDesc } from '../../memory/packed_weights.js';
import { DnnlError } from '../../common/status.js';
import type { Engine } from '../../runtime/engine.js';
import type { StreamTask } from '../../runtime/stream.js';
import { ARG } from '../args.js';
import type { BwdDataArgs, BwdDataImpl, BwdWeightsArgs, BwdWeightsImpl } from './impl.js';
import { BIAS_JOB, KC_PACKED, KIND_MATMUL_BWD_BIAS, NB_WEIGHTS, chain, gemmJob, jobDt, setTiles } from './jobs.js';
import type { BwdDataProblem, BwdWeightsProblem } from './problem.js';
import { bwdOffsetsError, rowsGrouping } from './runtime_offsets.js';
import type { MemoryDesc } from '../../memory/desc.js';

/** Host-known per-group sizes in the heap for the kernel's check (job.sizes), or 0. */
function sizesTable(engine: Engine, mds: readonly MemoryDesc[]): number {
  const known = mds.map((m) => m.grouped?.groupSizes).find((s) => s !== undefined);
  if (!known) return 0;
  const ptr = engine.alloc(known.length * 4);
  new Int32Array(engine.buffer, ptr, known.length).set(known);
  return ptr;
}

function tooLarge(mds: readonly [string, MemoryDesc][]): string | undefined {
  for (const [name, md] of mds) if (md.format !== 'packed' && md.format !== 'any' && !fits32(md)) return `${name} is too large for 32-bit indexing`;
  return undefined;
}

/**
 * Backward data on the forward's kernel: a variable-M GEMM job with A = diff_dst rows, B = W[g]^T
 * (`f32:p8t` panels read in place exactly like the forward's `f32:p8`, or plain W with its K and N
 * strides swapped) and C = diff_src rows.
 */
export const wasmData: BwdDataImpl = {
  name: 'wasm:f32-gemm-4x8',
  describe: (engine, p) => `wasm:${engine.isa}:f32-gemm-4x8${p.weights.format === 'packed' ? ':p8t' : ''}`,
  reject(p, engine) {
    if (!engine.kernels) return 'the engine was created without kernels';
    if (p.weights.format === 'packed' && p.weights.packed?.name !== PACKED_P8T) return `packed layout ${p.weights.packed?.name} is not ${PACKED_P8T} (W^T panels)`;
    return tooLarge([['diff_src', p.diffSrc], ['weights', p.weights], ['diff_dst', p.diffDst]]);
  },
  weightsLayout: (p) => packedTransposedWeightsDesc(p.weights.dims),
  executor(p: BwdDataProblem, engine: Engine) {
    const fn = 'matmul_backward_data.execute';
    const job = gemmJob(engine, 'grouped_m');
    const sizes = sizesTable(engine, [p.diffDst, p.diffSrc]);
    const packed = p.weights.format === 'packed';
    const fill = (a: BwdDataArgs): void => {
      job.reset();
      job.set('group_mode', GROUP_MODE.offsets);
      job.set('G', p.G);
      job.set('M', p.M);
      job.set('K', p.N);
      job.set('N', p.K);
      job.set('total', p.M);
      job.set('src_rows', p.M);
      job.set('dst_rows', p.M);
      setTiles(job, engine, p.G, packed ? KC_PACKED : 0);
      job.set('src', a.diffDst.handles[0]);
      job.set('s_0', p.diffDst.strides[0]);
      job.set('s_1', p.diffDst.strides[1]);
      job.set('dst', a.diffSrc.handles[0]);
      job.set('d_0', p.diffSrc.strides[0]);
      job.set('d_1', p.diffSrc.strides[1]);
      job.set('wei', a.weights.handles[0]);
      job.set('dt_src', jobDt(p.diffDst.dataType));
      job.set('dt_dst', jobDt(p.diffSrc.dataType));
      if (packed) {
        job.set('wei_packed', WEI_PACKED.f32_p8);
        job.set('dt_wei', jobDt('f32'));
        job.set('w_g', packedTransposedGeometry(p.weights.dims).expertFloats);
      } else {
        // B(k', n') = W[g][n'][k']: the forward's N stride is the backward's K stride and vice versa.
        const [wg, wk, wn] = p.weights.strides;
        job.set('dt_wei', jobDt(p.weights.dataType));
        job.set('w_g', wg);
        job.set('w_k', wn);
        job.set('w_n', wk);
      }
      job.set('offs', a.offsets ? a.offsets.handles[0] : a.diffDst.handles[1]);
      job.set('offs2', a.offsets ? 0 : a.diffSrc.handles[1]);
      job.set('sizes', sizes);
    };
    return {
      destroy: () => {
        job.free();
        if (sizes) engine.releaseBlock(sizes);
      },
      run: (a: BwdDataArgs): StreamTask => job.task(() => fill(a), (s) => {
        if (s.code === 0) return;
        const g = rowsGrouping(p.G, p.M, [a.diffDst, ARG.DIFF_DST], p.offsetsFrom === 'desc' ? [a.diffSrc, ARG.DIFF_SRC] : undefined, a.offsets);
        throw bwdOffsetsError(fn, g, s.code, s.index, s.a, s.b);
      }),
    };
  },
};

/**
 * Backward weights on the forward's kernel: a variable-K GEMM job with A = src[g]^T (src's strides
 * swapped: the driver packs its micro-panels with one v128 copy per row), B = diff_dst[g] rows and
 * C = diff_weights[g]; an empty group writes zeros. Then, with a bias gradient, the op job
 * KIND_MATMUL_BWD_BIAS, run only if the GEMM found the offsets valid.
 */
export const wasmWeights: BwdWeightsImpl = {
  name: 'wasm:f32-gemm-4x8',
  describe: (engine) => `wasm:${engine.isa}:f32-gemm-4x8`,
  reject(p, engine) {
    if (!engine.kernels) return 'the engine was created without kernels';
    if (p.diffBias && p.diffDst.strides[1] !== 1) return 'a bias gradient needs diff_dst rows with unit column stride';
    if (p.diffBias && !FLOAT_TYPES.includes(p.diffBias.dataType)) return `diff_bias data type ${p.diffBias.dataType}`;
    return tooLarge([['src', p.src], ['diff_weights', p.diffWeights], ['diff_dst', p.diffDst]]);
  },
  executor(p: BwdWeightsProblem, engine: Engine) {
    const fn = 'matmul_backward_weights.execute';
    const job = gemmJob(engine, 'grouped_k');
    const bias = p.diffBias ? new OpJob(engine, KIND_MATMUL_BWD_BIAS, BIAS_JOB) : undefined;
    const sizes = sizesTable(engine, [p.src, p.diffDst]);
    const primaryOffs = (a: BwdWeightsArgs): number => (a.offsets ? a.offsets.handles[0] : a.src.handles[1]);
    const fill = (a: BwdWeightsArgs): void => {
      job.reset();
      job.set('group_mode', GROUP_MODE.offsets);
      job.set('G', p.G);
      job.set('M', p.K);
      job.set('K', p.M);
      job.set('N', p.N);
      job.set('total', p.M);
      job.set('src_rows', p.K);
      job.set('dst_rows', p.K);
      setTiles(job, engine, p.G, 0, NB_WEIGHTS);
      // A(i, r) = src[r][i]: A's row stride is src's column stride.
      job.set('src', a.src.handles[0]);
      job.set('s_0', p.src.strides[1]);
      job.set('s_1', p.src.strides[0]);
      job.set('wei', a.diffDst.handles[0]);
      job.set('w_k', p.diffDst.strides[0]);
      job.set('w_n', p.diffDst.strides[1]);
      job.set('dst', a.diffWeights.handles[0]);
      const [vg, vk, vn] = p.diffWeights.strides;
      job.set('d_g', vg);
      job.set('d_0', vk);
      job.set('d_1', vn);
      job.set('dt_src', jobDt(p.src.dataType));
      job.set('dt_wei', jobDt(p.diffDst.dataType));
      job.set('dt_dst', jobDt(p.diffWeights.dataType));
      job.set('offs', primaryOffs(a));
      job.set('offs2', a.offsets ? 0 : a.diffDst.handles[1]);
      job.set('sizes', sizes);
    };
    const grouping = (a: BwdWeightsArgs): ReturnType<typeof rowsGrouping> =>
      rowsGrouping(p.G, p.M, [a.src, ARG.SRC], p.offsetsFrom === 'desc' ? [a.diffDst, ARG.DIFF_DST] : undefined, a.offsets);
    const gemm = (a: BwdWeightsArgs): StreamTask => job.task(() => fill(a), (s) => {
      if (s.code !== 0) throw bwdOffsetsError(fn, grouping(a), s.code, s.index, s.a, s.b);
    });
    const biasTask = (a: BwdWeightsArgs): StreamTask => bias!.task(() => {
      const b = p.diffBias!;
      bias!.reset();
      bias!.set('ddst', a.diffDst.handles[0]);
      bias!.set('offs', primaryOffs(a));
      bias!.set('dbias', a.diffBias!.handles[0]);
      bias!.set('G', p.G);
      bias!.set('N', p.N);
      bias!.set('ld', p.diffDst.strides[0]);
      bias!.set('total', p.M);
      bias!.set('dt_ddst', jobDt(p.diffDst.dataType));
      bias!.set('dt_dbias', jobDt(b.dataType));
      bias!.set('b_g', b.strides[0]);
      bias!.set('b_n', b.strides[b.ndims - 1]);
    }, (s) => {
      if (s.code === 0) return;
      if (s.code < 100) throw bwdOffsetsError(fn, grouping(a), s.code, s.index, s.a, s.b);
      throw new DnnlError('runtime_error', `${fn}: bias kernel status ${s.code}`);
    });
    return {
      destroy: () => {
        job.free();
        bias?.free();
        if (sizes) engine.releaseBlock(sizes);
      },
      run: (a: BwdWeightsArgs): StreamTask => (a.diffBias && bias ? chain(gemm(a), biasTask(a)) : gemm(a)),
    };
  },
};
