import type { DnnlError } from '../../../common/status.js';
import type { GpuMemory } from '../../../memory/gpu_memory.js';
import type { GpuEngine } from '../../../runtime/gpu/gpu_engine.js';
import type { StreamTask } from '../../../runtime/stream.js';
import { ROUTE_BINDING_BASE, routeDispatchBytes, routeDispatchGroups, routeDispatchKey, routeDispatchStorageBuffers, routeDispatchWgsl } from '../../../kernels/wgsl/moe_route_dispatch.js';
import { routingCheckedFits, routingTokenFits } from '../../../kernels/wgsl/moe_routing_token.js';
import type { RoutingArgs } from '../routing/impl.js';
import type { RoutingProblem } from '../routing/problem.js';
import { routingDataError } from '../routing/runtime_data.js';
import { routingConfigOf, routingParams } from '../routing/webgpu_routing.js';
import type { DispatchArgs } from '../dispatch/impls.js';
import { dispatchError } from '../dispatch/impls.js';
import type { DispatchProblem } from '../dispatch/pd.js';
import { dispatchParams, formOf } from '../dispatch/webgpu_dispatch.js';

/**
 * Benchmark / test switches, not public API; read when a layer primitive is created: `fuseRouteDispatch`
 * off keeps the route and dispatch stages as two dispatches in every case; `fuseMaxTokens` is the most
 * tokens fused, `fuseMaxRounds` the most tokens one group of the fused kernel routes one after another.
 * The fused kernel routes up to 8 tokens at once in one workgroup (routeDispatchGroups; fewer where
 * their scores do not fit workgroup memory) where the routing kernel runs a workgroup per token: when
 * it routed every token in turn, on an H100 (MoE-B, E = 64, k = 6) it took 23 us against 14 + 12 at
 * T = 1, but 43 against 18 + 16 at T = 4, while the dispatch it saves is ~7 us of host time
 * (reports/route-dispatch-h100-s22): past 2 tokens in turn the GPU loses what the host gains. Routing
 * 8 at once, it takes 23 / 27 / 30 us at T = 1 / 4 / 8 against 14 + 12 / 18 + 16 / 20 + 18 for the two
 * kernels (reports/route-dispatch-h100-s22/parallel).
 */
export const gpuLayerTuning = { fuseRouteDispatch: true, fuseMaxTokens: 8, fuseMaxRounds: 2 };

/** What `moe.layer.Primitive.fused` reports for this path. */
export const ROUTE_DISPATCH_IMPL = 'webgpu:moe-route+dispatch-one';

/**
 * Why one dispatch cannot route and dispatch this layer's tokens (undefined: it can): the routing must
 * be the route kernel that checks its logits itself (scores in workgroup memory, T <= 32, T E <= 4096),
 * the dispatch its one-workgroup form (T k <= 256, no hidden copy, i.e. gemm1 'gather'), and both
 * kernels' workgroup memory together must fit the device.
 */
export function routeDispatchRefusal(rp: RoutingProblem, dp: DispatchProblem, eng: GpuEngine): string | undefined {
  if (rp.custom) return 'customRoutingFunction routes on the host';
  if (rp.T === 0) return 'no tokens';
  if (rp.T > gpuLayerTuning.fuseMaxTokens) return `T = ${rp.T} tokens: past ${gpuLayerTuning.fuseMaxTokens}, one workgroup routes them slower on the GPU than a workgroup per token`;
  const c = routingConfigOf(rp);
  if (c.scratch || !routingTokenFits(c)) return `the scores of E = ${rp.E} do not fit workgroup memory`;
  if (!routingCheckedFits(rp.T, rp.E)) return `T = ${rp.T} tokens of E = ${rp.E} logits are past the in-kernel check (T <= 32, T x E <= 4096)`;
  const form = formOf(dp);
  if (form !== 'one') return `the dispatch takes its '${form}' form (T x k > 256, a hidden copy or many local experts)`;
  const maxBytes = eng.caps.maxComputeWorkgroupStorageSize, ng = routeDispatchGroups(c, rp.T, dp.G, maxBytes);
  const bytes = routeDispatchBytes(c, ng, dp.G);
  if (bytes > maxBytes) return `${bytes} bytes of workgroup memory exceed the device's ${maxBytes}`;
  const rounds = Math.ceil(rp.T / ng);
  if (rounds > gpuLayerTuning.fuseMaxRounds) return `T = ${rp.T} tokens, ${ng} at once: ${rounds} in turn, past ${gpuLayerTuning.fuseMaxRounds} slower on the GPU than a workgroup per token`;
  const storage = routeDispatchStorageBuffers(c.bias), limit = eng.device.limits.maxStorageBuffersPerShaderStage;
  if (storage > limit) return `${storage} storage buffers exceed the device's maxStorageBuffersPerShaderStage ${limit}`;
  return undefined;
}

/**
 * moe.layer's route and dispatch stages as one dispatch (moe_route_dispatch.ts), for the problems
 * `routeDispatchRefusal` accepts: the layer's execute records this in place of the two stages; each
 * stage executed alone still runs its own kernel. Status slots, params and outputs are the two
 * stages' own, so errors read the same at `stream.wait()`.
 */
export class RouteDispatchGpu {
  private readonly pipeline: GPUComputePipeline;
  private readonly routeParams: GPUBuffer;
  private readonly dispatchParams: GPUBuffer;
  private wordsKey = '';
  private words: [Uint32Array<ArrayBuffer>, Uint32Array<ArrayBuffer>] = [new Uint32Array(0), new Uint32Array(0)];

  constructor(private readonly rp: RoutingProblem, private readonly dp: DispatchProblem, private readonly eng: GpuEngine) {
    const c = routingConfigOf(rp), ng = routeDispatchGroups(c, rp.T, dp.G, eng.caps.maxComputeWorkgroupStorageSize);
    this.pipeline = eng.pipeline(routeDispatchKey(c, ng, dp.G), () => routeDispatchWgsl(c, ng, dp.G));
    this.routeParams = eng.createBuffer(32, 'moe.routing params', GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST);
    this.dispatchParams = eng.createBuffer(64, 'moe.dispatch params', GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST);
  }

  /** `dispatchErrors` renames the dispatch's runtime errors (the stream renames the task's as the route stage's). */
  task(ra: RoutingArgs<GpuMemory>, da: DispatchArgs<GpuMemory>, dispatchErrors: (e: DnnlError) => DnnlError): StreamTask {
    return () => this.record(ra, da, dispatchErrors);
  }

  private record(ra: RoutingArgs<GpuMemory>, da: DispatchArgs<GpuMemory>, dispatchErrors: (e: DnnlError) => DnnlError): void {
    const { rp, dp, eng } = this;
    eng.checkAlive();
    const status = eng.status;
    const rslot = status.take((code, i, x) => routingDataError(code, i, x));
    // The stream's errorMap names the task's errors as the route stage's: the dispatch's slot gets its own.
    const dslot = status.take((code, i, x, y) => dispatchError(dp, code, i, x, y), undefined, dispatchErrors);
    // The words change only with the slots and the map's presence: built again only then (they were ~2% of a decode layer's JS).
    const key = `${rslot.word}:${dslot.word}:${da.expertMap !== undefined}`;
    if (key !== this.wordsKey) {
      this.wordsKey = key;
      this.words = [routingParams(rp, rslot.word), dispatchParams(dp, eng, da.expertMap !== undefined, dslot.word)];
    }
    eng.writeParams(this.routeParams, this.words[0]);
    eng.writeParams(this.dispatchParams, this.words[1]);
    const buf = (binding: number, buffer: GPUBuffer): GPUBindGroupEntry => ({ binding, resource: { buffer } });
    // Without a map the emap binding is never read: the logits (read-only here too) stand in for it.
    const offs = dp.batched ? da.counts! : da.dst!;
    const R = ROUTE_BINDING_BASE;
    const entries = [
      buf(0, this.dispatchParams), buf(2, (da.expertMap ?? ra.src).buffers[0]), buf(5, da.rowOf.buffers[0]), buf(6, da.tokenIndex.buffers[0]),
      buf(7, da.tokenKs.buffers[0]), buf(8, offs.buffers[0]), { binding: 11, resource: dslot.binding },
      buf(R, this.routeParams), buf(R + 1, ra.src.buffers[0]), buf(R + 3, ra.topkIds.buffers[0]), buf(R + 4, ra.topkWeights.buffers[0]), { binding: R + 6, resource: rslot.binding },
    ];
    if (ra.correctionBias) entries.push(buf(R + 2, ra.correctionBias.buffers[0]));
    const group = eng.bindGroup(this.pipeline, entries);
    eng.computePass('moe.routing+dispatch', (pass) => {
      pass.setPipeline(this.pipeline);
      pass.setBindGroup(0, group);
      pass.dispatchWorkgroups(1);
    });
    eng.keepAlive(group);
  }

  destroy(): void {
    this.eng.retire(this.routeParams, this.dispatchParams);
  }
}
