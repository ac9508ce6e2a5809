import type { MatmulImpl } from './impl.js';
import { refMatmul } from './ref_matmul.js';
import { wasmMatmul } from './wasm_matmul.js';

/** Implementations in order of preference; the pd takes the first that accepts the problem. */
export const matmulImplList: MatmulImpl[] = [wasmMatmul, refMatmul];
