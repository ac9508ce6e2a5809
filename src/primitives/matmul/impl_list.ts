import type { GpuMatmulImpl, MatmulImpl } from './impl.js';
import { webgpuMatmul } from './webgpu_matmul.js';
import { webgpuDynamicQuantMatmul } from './webgpu_dynamic_quant.js';
import { refMatmul } from './ref_matmul.js';
import { wasmMatmul } from './wasm_matmul.js';
import { wasmDynamicQuantMatmul } from './wasm_dynamic_quant.js';

/** Implementations in order of preference; the pd takes the first that accepts the problem. */
export const matmulImplList: MatmulImpl[] = [wasmDynamicQuantMatmul, wasmMatmul, refMatmul];

/** The gpu engine's list: WebGPU kernels only (the reference never runs silently on a gpu engine). */
export const gpuMatmulImplList: GpuMatmulImpl[] = [webgpuDynamicQuantMatmul, webgpuMatmul];
