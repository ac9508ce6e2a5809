import type { GpuRoutingImpl, RoutingImpl } from './impl.js';
import { customRouting } from './custom_routing.js';
import { refRouting } from './ref_routing.js';
import { wasmRouting } from './wasm_routing.js';
import { webgpuRouting } from './webgpu_routing.js';

/** In order of preference; the pd takes the first that accepts. A custom function always runs on the host. */
export const routingImplList: RoutingImpl[] = [customRouting, wasmRouting, refRouting];

/** The gpu engine's list: the WebGPU kernel only (a host function or the reference never runs there). */
export const gpuRoutingImplList: GpuRoutingImpl[] = [webgpuRouting];
