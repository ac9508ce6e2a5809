/**
 * A GPUDevice that does nothing: every WebGPU call returns at once, buffers are host ArrayBuffers, maps
 * resolve immediately with zeros (so status slots read "no error"). The gpu engine runs on it unchanged,
 * so the time of `execute` is the library's own JS, without Dawn's calls: what is left of the host time
 * of a GPU execution once the WebGPU implementation is free (bench/gpu_host_js.ts).
 */

const USAGE = { MAP_READ: 1, MAP_WRITE: 2, COPY_SRC: 4, COPY_DST: 8, INDEX: 16, VERTEX: 32, UNIFORM: 64, STORAGE: 128, INDIRECT: 256, QUERY_RESOLVE: 512 };

/** The WebGPU globals a browser defines (GPUBufferUsage, GPUMapMode), where nothing defined them yet. */
export function installNullGlobals(): void {
  const g = globalThis as Record<string, unknown>;
  g.GPUBufferUsage ??= USAGE;
  g.GPUMapMode ??= { READ: 1, WRITE: 2 };
  g.GPUShaderStage ??= { VERTEX: 1, FRAGMENT: 2, COMPUTE: 4 };
}

class NullBuffer {
  mapState: GPUBufferMapState = 'unmapped';
  private bytes: ArrayBuffer | undefined;
  constructor(readonly size: number, readonly usage: number, readonly label: string, mapped: boolean) {
    if (mapped) this.mapState = 'mapped';
  }
  private store(): ArrayBuffer {
    return (this.bytes ??= new ArrayBuffer(this.size));
  }
  mapAsync(_mode: number, _offset?: number, _size?: number): Promise<undefined> {
    this.mapState = 'mapped';
    return Promise.resolve(undefined);
  }
  getMappedRange(offset = 0, size?: number): ArrayBuffer {
    return this.store().slice(offset, size === undefined ? undefined : offset + size);
  }
  unmap(): void {
    this.mapState = 'unmapped';
  }
  destroy(): void {
    this.bytes = undefined;
  }
}

class NullPass {
  label = '';
  setPipeline(_p: unknown): void {}
  setBindGroup(_i: number, _g: unknown): void {}
  dispatchWorkgroups(_x: number, _y?: number, _z?: number): void {}
  dispatchWorkgroupsIndirect(_b: unknown, _o: number): void {}
  end(): void {}
}

class NullEncoder {
  label = '';
  beginComputePass(_d?: unknown): NullPass {
    return new NullPass();
  }
  copyBufferToBuffer(_a: unknown, _ao: number, _b: unknown, _bo: number, _n: number): void {}
  clearBuffer(_b: unknown, _o?: number, _n?: number): void {}
  resolveQuerySet(): void {}
  finish(): object {
    return {};
  }
}

/** Limits of a large discrete GPU (an H100 / H200 through Dawn), so the kernel choices are a real device's. */
const LIMITS = {
  maxStorageBufferBindingSize: 2147483644,
  maxBufferSize: 2 ** 40,
  maxComputeWorkgroupStorageSize: 49152,
  maxComputeWorkgroupsPerDimension: 65535,
  minStorageBufferOffsetAlignment: 256,
  maxStorageBuffersPerShaderStage: 10,
  maxComputeInvocationsPerWorkgroup: 1024,
  maxComputeWorkgroupSizeX: 1024,
  maxComputeWorkgroupSizeY: 1024,
  maxComputeWorkgroupSizeZ: 64,
  maxBindingsPerBindGroup: 1000,
  minUniformBufferOffsetAlignment: 256,
  maxUniformBufferBindingSize: 65536,
};

/** The null device, typed as the GPUDevice the engine takes. */
export function nullGpuDevice(): GPUDevice {
  installNullGlobals();
  const dev = {
    label: 'null device',
    features: new Set<string>(['timestamp-query']),
    limits: LIMITS,
    lost: new Promise<never>(() => undefined),
    queue: {
      submit(_cbs: unknown[]): void {},
      writeBuffer(_b: unknown, _o: number, _d: unknown): void {},
      onSubmittedWorkDone(): Promise<undefined> {
        return Promise.resolve(undefined);
      },
    },
    addEventListener(): void {},
    pushErrorScope(_f: string): void {},
    popErrorScope(): Promise<null> {
      return Promise.resolve(null);
    },
    createBuffer(d: { size: number; usage: number; label?: string; mappedAtCreation?: boolean }): NullBuffer {
      return new NullBuffer(d.size, d.usage, d.label ?? '', d.mappedAtCreation === true);
    },
    createShaderModule(d: { code: string }): object {
      return { code: d.code };
    },
    createComputePipeline(_d: unknown): object {
      const layout = {};
      return { getBindGroupLayout: (_i: number) => layout };
    },
    createBindGroup(_d: unknown): object {
      return {};
    },
    createCommandEncoder(_d?: unknown): NullEncoder {
      return new NullEncoder();
    },
    createQuerySet(_d: unknown): object {
      return { destroy(): void {} };
    },
    destroy(): void {},
  };
  return dev as unknown as GPUDevice;
}
