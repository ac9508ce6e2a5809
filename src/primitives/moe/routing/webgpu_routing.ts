import type { GpuMemory } from '../../../memory/gpu_memory.js';
import type { GpuEngine } from '../../../runtime/gpu/gpu_engine.js';
import { workgroupGrid } from '../../../runtime/gpu/grid.js';
import type { StreamTask } from '../../../runtime/stream.js';
import { fits32 } from '../../../kernels/fused_job.js';
import {
  ROUTE_WG, ROUTING_PRIVATE_LIMIT, routingCheckWgsl, routingKey, routingPrivateBytes, routingWgsl, type RoutingKernelConfig,
} from '../../../kernels/wgsl/moe_routing.js';
import { routingCheckedFits, routingTokenFits, routingTokenWgsl } from '../../../kernels/wgsl/moe_routing_token.js';
import type { GpuRoutingImpl, RoutingArgs } from './impl.js';
import type { RoutingProblem } from './problem.js';
import { routingDataError } from './runtime_data.js';

/**
 * Benchmark-only switch (bench/gpu_moe_bench.ts compares both in one process), not public API; read
 * when a primitive is created: `checked` off keeps the check pass at decode sizes too.
 */
export const gpuRoutingTuning = { checked: true };

/** @internal the kernel config of a problem (the fused route + dispatch of moe.layer builds on it). */
export function routingConfigOf(p: RoutingProblem): RoutingKernelConfig {
  const base = {
    E: p.E, k: p.topK, groups: p.groupCount, kgroup: p.kGroup, gmode: p.groupSelectMode, softmax: p.scoring === 'softmax', renorm: p.renormalize,
    dt: p.src.dataType as RoutingKernelConfig['dt'], bias: p.correctionBias !== undefined,
  };
  return { ...base, scratch: routingPrivateBytes(base) > ROUTING_PRIVATE_LIMIT };
}


/** @internal the route kernels' uniform (moe_routing.ts PARAMS) for one execution. */
export function routingParams(p: RoutingProblem, slotWord: number): Uint32Array<ArrayBuffer> {
  const words = new Uint32Array(8);
  const floats = new Float32Array(words.buffer);
  words.set([p.T, p.src.strides[0], p.src.strides[1], slotWord]);
  floats[4] = p.routedScalingFactor;
  floats[5] = p.renormalizeEps;
  return words;
}

/**
 * Two dispatches in one compute pass: a check of every logit and bias entry (a workgroup per token; the
 * first violation's key kept in a flag word with an integer atomicMax, which does not depend on the order), then one
 * invocation per token routing it, or, after a violation, only the error reported in the status slot
 * (raised by `stream.wait()`; nothing is written). At decode sizes (routingCheckedFits) one dispatch:
 * each route workgroup checks every logit itself, no flag.
 */
class WebgpuRoutingExecutor {
  private readonly check: GPUComputePipeline | undefined;
  private readonly route: GPUComputePipeline;
  /** One workgroup per token (moe_routing_token.ts) rather than one invocation. */
  private readonly perToken: boolean;
  /** The route kernel checks the logits itself: no check pass, no flag. */
  private readonly checked: boolean;
  private readonly params: GPUBuffer;
  private readonly flag: GPUBuffer;
  private readonly scratch: GPUBuffer | undefined;
  /** Executions whose status slot was not read back yet: any of them may have set the flag. */
  private unsettled = 0;
  /** A read-back found an execution's error: its flag is still set. */
  private flagDirty = false;
  private readonly settle = (failed: boolean): void => {
    this.unsettled--;
    if (failed) this.flagDirty = true;
  };

  constructor(private readonly p: RoutingProblem, private readonly eng: GpuEngine) {
    const c = routingConfigOf(p);
    this.perToken = !c.scratch && routingTokenFits(c);
    this.checked = this.perToken && gpuRoutingTuning.checked && routingCheckedFits(p.T, p.E);
    if (!this.checked) this.check = eng.pipeline(routingKey(c, 'check'), () => routingCheckWgsl(c));
    this.route = this.checked ? eng.pipeline(`${routingKey(c, 'route')}:wg:checked`, () => routingTokenWgsl(c, true))
      : this.perToken ? eng.pipeline(`${routingKey(c, 'route')}:wg`, () => routingTokenWgsl(c)) : eng.pipeline(routingKey(c, 'route'), () => routingWgsl(c));
    this.params = eng.createBuffer(32, 'moe.routing params', GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST);
    this.flag = eng.createBuffer(16, 'moe.routing flag');
    const E4 = (p.E + 3) & ~3;
    if (c.scratch) this.scratch = eng.createBuffer(4 * p.T * E4 * (c.bias ? 2 : 1), 'moe.routing scores');
  }

  task(a: RoutingArgs<GpuMemory>): StreamTask {
    return () => this.record(a);
  }

  private record(a: RoutingArgs<GpuMemory>): void {
    const { p, eng } = this;
    eng.checkAlive();
    if (p.T === 0) return;
    // The flag is written only on a violation (always reported in the slot): cleared only when an earlier
    // execution may have left it set, i.e. its slot was not read back clean yet.
    const mayBeSet = !this.checked && (this.flagDirty || this.unsettled > 0);
    this.unsettled++;
    const slot = eng.status.take((code, i, x) => routingDataError(code, i, x), this.settle);
    eng.writeParams(this.params, routingParams(p, slot.word));
    if (mayBeSet) {
      eng.encode('moe.routing', (enc) => enc.clearBuffer(this.flag));
      this.flagDirty = false;
    }
    eng.computePass('moe.routing', (pass) => {
      const common: GPUBindGroupEntry[] = [
        { binding: 0, resource: { buffer: this.params } },
        { binding: 1, resource: { buffer: a.src.buffers[0] } },
      ];
      if (!this.checked) common.push({ binding: 5, resource: { buffer: this.flag } });
      if (a.correctionBias) common.push({ binding: 2, resource: { buffer: a.correctionBias.buffers[0] } });
      if (this.check) {
        const checkBg = eng.bindGroup(this.check, common);
        pass.setPipeline(this.check);
        pass.setBindGroup(0, checkBg);
        pass.dispatchWorkgroups(...workgroupGrid(eng, p.T * ROUTE_WG, ROUTE_WG));
        eng.keepAlive(checkBg);
      }
      const routeEntries: GPUBindGroupEntry[] = [
        ...common,
        { binding: 3, resource: { buffer: a.topkIds.buffers[0] } },
        { binding: 4, resource: { buffer: a.topkWeights.buffers[0] } },
        { binding: 6, resource: slot.binding },
      ];
      if (this.scratch) routeEntries.push({ binding: 7, resource: { buffer: this.scratch } });
      const routeBg = eng.bindGroup(this.route, routeEntries);
      pass.setPipeline(this.route);
      pass.setBindGroup(0, routeBg);
      pass.dispatchWorkgroups(...workgroupGrid(eng, this.perToken ? p.T * ROUTE_WG : p.T, ROUTE_WG));
      eng.keepAlive(routeBg);
    });
  }

  destroy(): void {
    this.eng.retire(this.params, this.flag, this.scratch);
  }
}

/** WebGPU routing: scores, selection and weights on the device, runtime data checked there. */
export const webgpuRouting: GpuRoutingImpl = {
  name: 'webgpu:moe-routing',
  describe(_eng, p) {
    return `webgpu:moe-routing-${p.scoring}-${p.groupCount > 1 ? 'grouped-topk' : 'topk'}`;
  },
  reject(p, eng) {
    if (p.custom) return 'customRoutingFunction is a host function: the gpu engine routes on the device only (route on a cpu engine, or write the ids and weights yourself)';
    if (!fits32(p.src) || !fits32(p.topkIds)) return 'too large for 32-bit indexing';
    const limit = eng.caps.maxStorageBufferBindingSize;
    if (p.src.getSize(0) > limit || p.topkIds.getSize(0) > limit) return `a binding exceeds the device's maxStorageBufferBindingSize ${limit}`;
    const c = routingConfigOf(p);
    if (c.scratch && 4 * p.T * ((p.E + 3) & ~3) * (c.bias ? 2 : 1) > limit) return `the score scratch of T x E exceeds the device's maxStorageBufferBindingSize ${limit}`;
    return undefined;
  },
  createExecutor(p, eng) {
    return new WebgpuRoutingExecutor(p, eng);
  },
};
