import type { BwdDataImpl, BwdWeightsImpl } from './impl.js';
import { refData, refWeights } from './ref_impl.js';
import { wasmData, wasmWeights } from './wasm_impl.js';

/** Implementations in order of preference; a pd takes the first that accepts its problem. */
export const bwdDataImplList: readonly BwdDataImpl[] = [wasmData, refData];
export const bwdWeightsImplList: readonly BwdWeightsImpl[] = [wasmWeights, refWeights];
