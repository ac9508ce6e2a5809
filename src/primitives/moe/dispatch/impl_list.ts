import { dispatchImplList, type GpuDispatchImpl } from './impls.js';
import { webgpuDispatch } from './webgpu_dispatch.js';

export { dispatchImplList };

/** The gpu engine's list: the WebGPU kernels only (the host reference never runs there). */
export const gpuDispatchImplList: readonly GpuDispatchImpl[] = [webgpuDispatch];
