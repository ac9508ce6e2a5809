export { Status, DnnlError } from './common/status.js';
export { dt, f32ToBf16, bf16ToF32, f32ToF16, f16ToF32, type DataType, type ValuesView } from './common/data_type.js';
export {
  dtBits, dtBytes, isLowPrecisionType, isSubByteType, toStored, fromStored, encodeArray, decodeArray, type EncodeOptions,
} from './common/data_type.js';
export {
  f32ToF8E4m3, f8E4m3ToF32, f32ToF8E5m2, f8E5m2ToF32, f32ToF4E2m1, f4E2m1ToF32, f32ToS4, s4ToF32, f32ToU4, u4ToF32,
  toE8m0, e8m0ToF32, e8m0FromExponent, e8m0ToExponent, pack4, unpack4, getNibble, setNibble, packedBytes4,
  F8_E4M3_MAX, F8_E4M3_NAN, F8_E5M2_MAX, F8_E5M2_NAN, F8_E5M2_INF, F4_E2M1_MAX, E8M0_NAN,
  type Fp8Options, type E8m0Rounding,
} from './common/low_precision.js';
export { RUNTIME_DIM_VAL, type Dims } from './common/dims.js';
export { setVerbose, getVerbose, setVerboseSink } from './common/verbose.js';
export { objectCensus, type CensusKind } from './common/census.js';
export { memory } from './memory/index.js';
export { MemoryDesc, RUNTIME_SIZE_VAL, type GroupedInfo, type PackedLayout } from './memory/desc.js';
export { tag, type FormatTag } from './memory/format_tag.js';
export { offsets } from './memory/offsets.js';
export { Memory, type Handle, type HostArray, type MemoryOptions } from './memory/memory.js';
export { Engine, type EngineOptions } from './runtime/engine.js';
export { GpuEngine, type GpuEngineOptions, type GpuCaps } from './runtime/gpu/gpu_engine.js';
export type { GpuPassTime } from './runtime/gpu/pass_profiler.js';
export { GpuMemory, type GpuReadArray } from './memory/gpu_memory.js';
export { Stream } from './runtime/stream.js';
export { PrimitiveAttr, type QuantAttr, type GroupedOffsetsAttr, type DynamicQuantizationAttr, type AccumulationMode } from './attr/primitive_attr.js';
export { PostOps, type PostOp, type GluBackwardOptions as GluBackwardPostOpOptions } from './attr/post_ops.js';
export {
  algorithm, eltwiseAlgorithm, binaryAlgorithm, gluAlgorithm, type Algorithm, type EltwiseAlg, type BinaryAlg, type GluAlg, type GluLayout,
} from './attr/eltwise.js';
export type { GluOptions } from './attr/glu_options.js';
export type { Fusion, QuantParam, BinaryParam, GluParam, GluBackwardParam, IndexMap, QuantArg } from './attr/fusion.js';
export * as quant from './quant/index.js';
export { ARG } from './primitives/args.js';
export * as matmul from './primitives/matmul/index.js';
export * as reorder from './primitives/reorder/index.js';
export * as grouped_gemm from './primitives/grouped_gemm/index.js';
export * as dynamic_quant from './primitives/dynamic_quant/index.js';
export * as moe from './primitives/moe/index.js';
export * as matmul_backward_data from './primitives/matmul_backward/data/index.js';
export * as matmul_backward_weights from './primitives/matmul_backward/weights/index.js';
export * as grouped_gemm_backward_weights from './primitives/matmul_backward/pointers/index.js';
export * as grouped_gemm_backward_data from './primitives/matmul_backward/pointers/data_index.js';
export * as glu_backward from './primitives/glu_backward/index.js';
