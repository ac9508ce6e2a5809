import type { DataType } from '../../common/data_type.js';
import type { MemoryDesc } from '../../memory/desc.js';
import type { GpuEngine } from '../../runtime/gpu/gpu_engine.js';
import type { GpuMemory } from '../../memory/gpu_memory.js';
import { NO_FUSION, type QuantParam } from '../../attr/fusion.js';
import { eltwiseWgsl } from '../../kernels/wgsl/wgsl_eltwise.js';
import {
  fusionOperands, fusionStorageCount, mapTerms, mapWords, QUANT_SLOTS, FUSION_BINDING,
  type ChainStep, type FusedOperand, type GemmFusion, type QuantSlot,
} from '../../kernels/wgsl/wgsl_quant.js';
import type { MatmulArgs } from './impl.js';
import type { MatmulProblem } from './problem.js';
import type { BatchOffsets } from './batch_dims.js';

/**
 * The gpu matmul's side of rfcs/0002: which data types the WGSL kernels read and write, the kernel's
 * fusion structure (wgsl_quant.ts `GemmFusion`) of a problem, its uniform words and its bindings.
 */
export const GPU_SRC_TYPES: readonly DataType[] = ['f32', 'f16', 'bf16', 's8', 'u8', 'f8_e4m3', 'f8_e5m2', 'f4_e2m1'];
export const GPU_WEI_TYPES: readonly DataType[] = ['f32', 'f16', 'bf16', 's8', 'u8', 's4', 'u4', 'f8_e4m3', 'f8_e5m2', 'f4_e2m1'];
export const GPU_DST_TYPES: readonly DataType[] = ['f32', 'f16', 'bf16', 's8', 'u8', 's32'];
const FLOATS: readonly DataType[] = ['f32', 'f16', 'bf16'];
const INT8: readonly DataType[] = ['s8', 'u8'];
const INT_WEI: readonly DataType[] = ['s8', 'u8', 's4', 'u4'];

type Which = { arg: 'src' | 'weights' | 'dst'; kind: 'scales' | 'zeroPoints' };
const SLOT_OF: Record<QuantSlot, Which> = {
  srcScale: { arg: 'src', kind: 'scales' }, srcZp: { arg: 'src', kind: 'zeroPoints' },
  weiScale: { arg: 'weights', kind: 'scales' }, weiZp: { arg: 'weights', kind: 'zeroPoints' },
  dstScale: { arg: 'dst', kind: 'scales' }, dstZp: { arg: 'dst', kind: 'zeroPoints' },
};

/**
 * What the fusion helpers read of a problem: a matmul's, or one expert's of a grouped_gemm (its own
 * descriptors and fusion, the primitive's attr).
 */
export type FusionSubject = Pick<MatmulProblem, 'fusion' | 'attr' | 'src' | 'weights' | 'dst' | 'dstN'>;
/** The fusion operands of one execution (a matmul's, or one expert's of a grouped_gemm). */
export type FusionArgs = Pick<MatmulArgs<GpuMemory>, 'scales' | 'zeroPoints' | 'binary'>;

function param(p: FusionSubject, w: Which): QuantParam | undefined {
  return p.fusion[w.kind][w.arg];
}

/** Does the problem need the fusion path (anything beyond float types, bias and eltwise post-ops)? */
export function needsFusion(p: FusionSubject): boolean {
  return p.fusion !== NO_FUSION || p.attr.postOps.entries.some((o) => o.kind !== 'eltwise') ||
    [p.src.dataType, p.weights.dataType, p.dst.dataType].some((t) => !FLOATS.includes(t));
}

/** The K-dim stride of a map in the padded three-dim form (src: dim 2, weights: dim 1). */
const kStride = (q: QuantParam | undefined, dim: number): number => (q ? mapWords(q.map)[1 + dim] : 0);

/** The kernel's fusion structure for `p`. */
export function gemmFusionOf(p: FusionSubject): GemmFusion {
  const f = p.fusion;
  const operand = (q: QuantParam | undefined): FusedOperand | undefined => (q ? { dt: q.dataType, terms: mapTerms(q.map) } : undefined);
  const chain: ChainStep[] = [];
  let bi = 0;
  for (const op of p.attr.postOps.entries) {
    if (op.kind === 'eltwise') chain.push({ kind: 'eltwise', wgsl: `v = ${eltwiseWgsl(op.alg, 'v', op.alpha, op.beta)};` });
    else if (op.kind === 'sum') chain.push({ kind: 'sum', scale: op.scale });
    else if (op.kind === 'binary') chain.push({ kind: 'binary', alg: op.alg, index: bi++ });
  }
  // Integer GEMM when both operands are integer codes and their scales do not change along K
  // (K-block scales dequantize in f32 while staging instead).
  const intAcc = INT8.includes(p.src.dataType) && INT_WEI.includes(p.weights.dataType) &&
    kStride(f.scales.src, 2) === 0 && kStride(f.scales.weights, 1) === 0;
  const out: { -readonly [K in keyof GemmFusion]: GemmFusion[K] } = {
    binary: f.binary.map((b) => ({ dt: b.md.dataType, terms: mapTerms(b.map) })),
    chain,
    glu: f.glu ? { alg: f.glu.alg, layout: f.glu.layout, alpha: f.glu.alpha, limit: f.glu.limit } : undefined,
    intAcc,
  };
  for (const s of QUANT_SLOTS) out[s] = operand(param(p, SLOT_OF[s]));
  return out;
}

/** The fusion uniform: `[dstN, 0, 0, 0]` then each operand's 8 map words (wgsl_quant.ts). */
export function fusionUniform(p: FusionSubject, f: GemmFusion): Uint32Array {
  const ops = fusionOperands(f);
  const words = new Uint32Array(4 * (1 + 2 * ops.length));
  words[0] = p.dstN;
  const maps = [...QUANT_SLOTS.flatMap((s) => { const q = param(p, SLOT_OF[s]); return q ? [q.map] : []; }), ...p.fusion.binary.map((b) => b.map)];
  ops.forEach((o, i) => words.set(mapWords(maps[i]), 4 * o.slot));
  return words;
}

/** The fusion of a dense matmul's batch launches (batch_dims.ts): every operand read from its launch's element offset. */
export function withLaunchOffsets(f: GemmFusion): GemmFusion {
  const mark = (o: FusedOperand | undefined): FusedOperand | undefined => o && { ...o, terms: { ...o.terms, off: true } };
  const out: { -readonly [K in keyof GemmFusion]: GemmFusion[K] } = { ...f, binary: f.binary.map((o) => mark(o)!) };
  for (const s of QUANT_SLOTS) out[s] = mark(f[s]);
  return out;
}

/** The fusion uniform of one batch launch: each operand's element offset in its map's free word (`Q[slot + 1].w`). */
export function launchFusionUniform(p: FusionSubject, f: GemmFusion, o: BatchOffsets): Uint32Array {
  const words = fusionUniform(p, f);
  const offs = [...QUANT_SLOTS.flatMap((s) => { const w = SLOT_OF[s]; return param(p, w) ? [o[w.kind][w.arg] ?? 0] : []; }), ...o.binary];
  fusionOperands(f).forEach((op, i) => { words[4 * op.slot + 7] = offs[i]; });
  return words;
}

/** Bind-group entries of the fusion operands (the uniform at FUSION_BINDING, values at theirs). */
export function fusionEntries(p: FusionSubject, f: GemmFusion, uniform: GPUBufferBinding, a: FusionArgs, bufferOf: (m: GpuMemory) => GPUBuffer = (m) => m.buffers[0]): GPUBindGroupEntry[] {
  const mems: GpuMemory[] = [];
  for (const s of QUANT_SLOTS) {
    const w = SLOT_OF[s];
    if (!param(p, w)) continue;
    const m = a[w.kind][w.arg];
    if (!m) throw new Error(`webgpu matmul: ${w.kind} of ${w.arg} missing`);
    mems.push(m);
  }
  mems.push(...a.binary);
  const ops = fusionOperands(f);
  return [{ binding: FUSION_BINDING, resource: uniform }, ...ops.map((o, i) => ({ binding: o.binding, resource: { buffer: bufferOf(mems[i]) } }))];
}

/** Why the gpu kernels cannot run this problem's data types / fusion, undefined when they can. */
export function fusionRejectReason(p: MatmulProblem, eng: GpuEngine | undefined): string | undefined {
  const why = subjectRejectReason(p);
  if (why || !eng || !needsFusion(p)) return why;
  const used = 3 + (p.kind === 'dense' ? 0 : 1) + (p.bias ? 1 : 0) + fusionStorageCount(gemmFusionOf(p));
  const limit = eng.device.limits.maxStorageBuffersPerShaderStage;
  if (used > limit) return `the matmul needs ${used} storage buffers (scales, zero points, binary src1 included), beyond the device's maxStorageBuffersPerShaderStage ${limit}`;
  return undefined;
}

/** Why the gpu kernels cannot run a subject's data types / fusion (storage limits aside), undefined when they can. */
export function subjectRejectReason(p: FusionSubject & { bias?: MemoryDesc }): string | undefined {
  if (p.fusion.gluBackward) return 'the glu_backward post-op is not implemented on the gpu engine yet';
  if (!GPU_SRC_TYPES.includes(p.src.dataType)) return `src data type ${p.src.dataType} is not implemented on the gpu engine yet (${GPU_SRC_TYPES.join(', ')})`;
  if (!GPU_WEI_TYPES.includes(p.weights.dataType)) return `weights data type ${p.weights.dataType} is not implemented on the gpu engine yet (${GPU_WEI_TYPES.join(', ')})`;
  if (!GPU_DST_TYPES.includes(p.dst.dataType)) return `dst data type ${p.dst.dataType} is not implemented on the gpu engine yet (${GPU_DST_TYPES.join(', ')})`;
  if (p.bias && !FLOATS.includes(p.bias.dataType)) return `bias data type ${p.bias.dataType} is not implemented on the gpu engine yet (f32, f16, bf16)`;
  for (const q of [...Object.values(p.fusion.scales), ...Object.values(p.fusion.zeroPoints)]) {
    if (q.map.strides.length > 3) return `${q.kind} of ${q.arg} over more than three dims are not implemented on the gpu engine`;
  }
  return undefined;
}
