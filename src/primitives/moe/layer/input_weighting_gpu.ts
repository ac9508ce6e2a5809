/**
 * The layer's `routingWeight: 'input'` stage on the gpu engine: the same arithmetic as
 * input_weighting.ts (`permuted[r] *= topk_weights[token_index[r] * k + token_ks[r]]`, one f32 product
 * rounded to the storage type), with the row count read from dispatch's offsets on the device. An
 * offsets[G] outside [0, R] touches nothing and is raised at `stream.wait()` with the cpu's message.
 */
import { DnnlError } from '../../../common/status.js';
import type { GpuMemory } from '../../../memory/gpu_memory.js';
import type { Stream } from '../../../runtime/stream.js';
import type { GpuEngine } from '../../../runtime/gpu/gpu_engine.js';
import type { DataType } from '../../../common/data_type.js';
import { wgslHelpersFor, wgslLoadRw, wgslStore } from '../../../kernels/wgsl/wgsl_dtypes.js';

export interface InputWeightingGpuArgs {
  readonly permuted: GpuMemory;
  readonly tokenIndex: GpuMemory;
  readonly tokenKs: GpuMemory;
  readonly topkWeights: GpuMemory;
}

const ERR_ROWS = 1;

/** Workgroups along x: rows are visited grid-stride, so any R fits one dispatch. */
const MAX_ROW_GROUPS = 4096;

function inputWeightingWgsl(t: DataType): string {
  const elem = t === 'f32' ? 'f32' : 'atomic<u32>';
  return /* wgsl */ `${wgslHelpersFor([t])}
struct Params { K: u32, ld: u32, T: u32, k: u32, G: u32, R: u32, slot: u32, pad: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read_write> x: array<${elem}>;
@group(0) @binding(2) var<storage, read> offs: array<i32>;
@group(0) @binding(3) var<storage, read> ti: array<i32>;
@group(0) @binding(4) var<storage, read> ks: array<i32>;
@group(0) @binding(5) var<storage, read> w: array<f32>;
@group(0) @binding(6) var<storage, read_write> status: array<u32>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_id) l: vec3u) {
  let rows = offs[P.G];
  if (rows < 0 || rows > i32(P.R)) {
    if (wg.x == 0u && l.x == 0u) {
      status[P.slot] = ${ERR_ROWS}u; status[P.slot + 1u] = P.G; status[P.slot + 2u] = bitcast<u32>(rows); status[P.slot + 3u] = P.R;
    }
    return;
  }
  for (var r = wg.x; r < u32(rows); r += nwg.x) {
    let tk = ti[r];
    let s = ks[r];
    // A padding row (token -1) holds zeros and keeps them.
    var wr = 0.0;
    if (tk >= 0 && tk < i32(P.T) && s >= 0 && s < i32(P.k)) { wr = w[u32(tk) * P.k + u32(s)]; }
    for (var c = l.x; c < P.K; c += 64u) {
      let e = r * P.ld + c;
      ${wgslStore(t, 'x', 'e', `${wgslLoadRw(t, 'x', 'e')} * wr`)}
    }
  }
}
`;
}

/**
 * Params buffer per permuted workspace (the layer's, living as long as the layer): a layer executed again
 * writes and creates nothing (a 32-byte buffer, dropped with the workspace by the GC).
 */
const paramsOf = new WeakMap<GpuMemory, GPUBuffer>();

export function enqueueInputWeightingGpu(strm: Stream, T: number, k: number, a: InputWeightingGpuArgs): void {
  const eng = strm.engine as GpuEngine;
  const md = a.permuted.desc, G = md.grouped!.groupCount, [R, K] = md.dims, ld = md.strides[0], t = md.dataType;
  strm.enqueue(() => {
    const pipe = eng.pipeline(`moe-input-weighting-${t}`, () => inputWeightingWgsl(t));
    const slot = eng.status.take((code, i, x, y) => (code === ERR_ROWS
      ? new DnnlError('invalid_arguments', `moe.layer (input weighting): offsets[${i}] = ${x} must be in [0, ${y}]`)
      : undefined));
    let params = paramsOf.get(a.permuted);
    if (!params) {
      params = eng.createBuffer(32, 'moe input weighting params', GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST);
      paramsOf.set(a.permuted, params);
    }
    eng.writeParams(params, new Uint32Array([K, ld, T, k, G, R, slot.word, 0]));
    eng.computePass('moe input weighting', (pass) => {
      const bg = eng.bindGroup(pipe, [
        ...[params!, a.permuted.buffers[0], a.permuted.buffers[1], a.tokenIndex.buffers[0], a.tokenKs.buffers[0], a.topkWeights.buffers[0]]
          .map((buffer, binding) => ({ binding, resource: { buffer } })),
        { binding: 6, resource: slot.binding },
      ]);
      pass.setPipeline(pipe);
      pass.setBindGroup(0, bg);
      if (R > 0) pass.dispatchWorkgroups(Math.min(R, MAX_ROW_GROUPS));
      eng.keepAlive(bg);
    });
  });
}
