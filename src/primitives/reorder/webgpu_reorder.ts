import { DnnlError } from '../../common/status.js';
import { dimsEqual } from '../../common/dims.js';
import type { MemoryDesc } from '../../memory/desc.js';
import type { Memory } from '../../memory/memory.js';
import type { GpuMemory } from '../../memory/gpu_memory.js';
import type { Engine } from '../../runtime/engine.js';
import type { GpuEngine } from '../../runtime/gpu/gpu_engine.js';
import type { StreamTask } from '../../runtime/stream.js';
import {
  REORDER_WORKGROUP, reorderKernelConfig, reorderKernelKey, reorderParams, reorderPlainWgsl,
} from '../../kernels/wgsl/reorder_plain.js';
import { GPU_PACKERS } from './gpu_layouts.js';
import { copyPlainElements } from './plain_copy.js';

/** Where the data moves: host memory of a cpu engine to the device, back, or within the device. */
export type ReorderPath = 'upload' | 'download' | 'device';

/** A reorder with a gpu engine on at least one side (the pd has checked the cpu engine's rules). */
export interface GpuReorderProblem {
  readonly src: MemoryDesc;
  readonly dst: MemoryDesc;
  readonly path: ReorderPath;
  /** The engine whose stream executes it. */
  readonly gpu: GpuEngine;
  /** The cpu side of an upload / download. */
  readonly cpu: Engine | undefined;
}

/** One entry of the gpu engine's ordered reorder impl list. */
export interface GpuReorderImpl {
  readonly name: string;
  reject(p: GpuReorderProblem): string | undefined;
  describe(p: GpuReorderProblem): string;
  task(p: GpuReorderProblem, from: Memory | GpuMemory, to: Memory | GpuMemory): StreamTask;
}

const round4 = (n: number): number => Math.ceil(n / 4) * 4;
const U32_LIMIT = 2 ** 32;

/** Dense and identical on both sides: the values move as raw bytes (no kernel, no binding limit). */
function rawBytes(src: MemoryDesc, dst: MemoryDesc): boolean {
  // denseImage: an odd count of 4-bit codes leaves a padding nibble in the last byte, which is the dst's
  return src.dataType === dst.dataType && dimsEqual(src.strides, dst.strides) && denseImage(src) && src.getSize(0) % 4 === 0;
}

/** Elements span a contiguous range with no gap (and 4-bit spans end on a whole byte): a host image of it is exact. */
function denseImage(md: MemoryDesc): boolean {
  return md.spanElems === md.nelems && (md.dataType === 's4' || md.dataType === 'u4' || md.dataType === 'f4_e2m1' ? md.nelems % 2 === 0 : true);
}

/** Bytes beyond one storage binding: the plain kernel cannot bind the tensor whole. */
function overBinding(p: GpuReorderProblem): string | undefined {
  const limit = p.gpu.caps.maxStorageBufferBindingSize;
  for (const [md, what] of [[p.src, 'src'], [p.dst, 'dst']] as const) {
    if (md.getSize(0) > limit) return `${what} has ${md.getSize(0)} bytes, more than one storage binding (${limit})`;
  }
  return undefined;
}

/**
 * What runs for the values: nothing (empty), a byte copy, the plain kernel, a packer, or (an upload
 * too large for one binding into a dense dst) the host conversion, written as the dst's bytes.
 */
export function valuesStep(p: GpuReorderProblem): 'none' | 'bytes' | 'kernel' | 'pack' | 'host' {
  if (p.dst.format === 'packed') return 'pack';
  if (p.src.nelems === 0) return 'none';
  if (rawBytes(p.src, p.dst)) return 'bytes';
  if (p.path === 'download') return 'host';
  if (p.path === 'upload' && overBinding(p) && denseImage(p.dst)) return 'host';
  return 'kernel';
}

function rejectReason(p: GpuReorderProblem): string | undefined {
  const { src, dst, gpu } = p;
  if (src.format === 'packed') return `a packed src (${src.packed?.name}) is not implemented on the gpu engine (its panels are read by the kernels only)`;
  if (dst.format === 'packed') {
    const packer = GPU_PACKERS.get(dst.packed?.name ?? '');
    if (!packer) return `packed layout ${dst.packed?.name} is not implemented on the gpu engine (its matmul and grouped_gemm answer plain weights for tag.any: query the gpu pd's weights)`;
    if (p.path === 'download') return `packed layout ${dst.packed?.name} is a gpu layout: a download cannot produce it`;
    return packer.reject(src, dst, gpu);
  }
  if (valuesStep(p) !== 'kernel') return undefined;
  for (const [md, what] of [[src, 'src'], [dst, 'dst']] as const) {
    if (md.spanElems >= U32_LIMIT) return `${what} spans ${md.spanElems} elements: the gpu reorder kernel indexes elements with 32 bits`;
  }
  const big = overBinding(p);
  if (big) return `${big}: a layout change or conversion of a tensor that large on the device (or into a padded dst) is not implemented on the gpu engine yet (a same-type copy between identical dense layouts is, and an upload into a dense dst converts on the host)`;
  return undefined;
}

/** Records the plain kernel reading device buffer `from` (src layout) into `to` (dst layout). */
function recordKernel(eng: GpuEngine, src: MemoryDesc, from: GPUBuffer, dst: MemoryDesc, to: GPUBuffer): void {
  const cfg = reorderKernelConfig(src.dataType, dst.dataType);
  const pipe = eng.pipeline(reorderKernelKey(cfg), () => reorderPlainWgsl(cfg));
  const span = dst.spanElems, words = Math.ceil((span * cfg.dstBits) / 32);
  const dims = [...dst.dims.keys()].filter((i) => dst.dims[i] > 1).sort((a, b) => dst.strides[b] - dst.strides[a])
    .map((i) => [dst.dims[i], dst.strides[i], src.strides[i]] as const);
  const groups = Math.ceil(words / REORDER_WORKGROUP), maxX = eng.caps.maxComputeWorkgroupsPerDimension;
  const gx = Math.min(groups, maxX), gy = Math.ceil(groups / gx);
  const params = reorderParams(words, span, dims, gx);
  const pbuf = eng.createBuffer(params.byteLength, 'reorder params');
  eng.write(pbuf, 0, params);
  eng.encode('reorder', (enc) => {
    const pass = enc.beginComputePass({ label: 'reorder' });
    pass.setPipeline(pipe);
    const entries: GPUBindGroupEntry[] = [
      { binding: 0, resource: { buffer: pbuf } },
      { binding: 1, resource: { buffer: from, size: Math.min(from.size, Math.max(4, round4(src.getSize(0)))) } },
      { binding: 2, resource: { buffer: to, size: Math.min(to.size, Math.max(4, words * 4)) } },
    ];
    const bg = eng.device.createBindGroup({ layout: pipe.getBindGroupLayout(0), entries });
    eng.keepAlive(bg, ...entries);
    pass.setBindGroup(0, bg);
    pass.dispatchWorkgroups(gx, gy);
    pass.end();
    eng.keepAlive(pass);
  });
  eng.retire(pbuf);
}

/** Values and (grouped) offsets of one device memory into another, recorded on the open encoder. */
function recordDevice(p: GpuReorderProblem, from: GPUBuffer, fromOffsets: GPUBuffer | undefined, to: GpuMemory): void {
  const { src, dst, gpu } = p;
  const step = valuesStep(p);
  if (step === 'pack') GPU_PACKERS.get(dst.packed?.name ?? '')!.record(gpu, src, from, dst, to.buffers[0]);
  if (step === 'kernel') recordKernel(gpu, src, from, dst, to.buffers[0]);
  const offs = src.grouped ? 4 * (src.grouped.groupCount + 1) : 0;
  const copyOffsets = fromOffsets !== undefined && fromOffsets !== to.buffers[1];
  if (step !== 'bytes' && !copyOffsets) return;
  gpu.encode('reorder', (enc) => {
    if (step === 'bytes') enc.copyBufferToBuffer(from, 0, to.buffers[0], 0, src.getSize(0));
    if (copyOffsets) enc.copyBufferToBuffer(fromOffsets, 0, to.buffers[1], 0, offs);
  });
}

/** Host bytes of a cpu memory's buffer `i` (a copy: WebGPU takes no SharedArrayBuffer views), padded to 4. */
function hostBytes(m: Memory, i: number): Uint8Array<ArrayBuffer> {
  const n = m.desc.getSize(i), out = new Uint8Array(round4(n));
  out.set(new Uint8Array(m.engine.buffer, m.handles[i], n));
  return out;
}

function upload(p: GpuReorderProblem, from: Memory, to: GpuMemory): void {
  const { src, dst, gpu } = p;
  const step = valuesStep(p);
  if (step === 'bytes') gpu.write(to.buffers[0], 0, hostBytes(from, 0));
  else if (step === 'host') gpu.write(to.buffers[0], 0, hostImage(src, from, dst));
  else if (step !== 'none') {
    // the raw host bytes go to a staging buffer; the conversion runs on the device
    const staged = gpu.createBuffer(round4(src.getSize(0)), 'reorder upload');
    gpu.write(staged, 0, hostBytes(from, 0));
    recordDevice(p, staged, undefined, to);
    gpu.retire(staged);
  }
  if (src.grouped) gpu.write(to.buffers[1], 0, hostBytes(from, 1));
}

/** @internal the bytes of a dense dst converted on the host from a cpu memory (the cpu reorder's loop). */
export function hostImage(src: MemoryDesc, from: Memory, dst: MemoryDesc): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(round4(dst.getSize(0)));
  copyPlainElements(src, from.engine.buffer, from.handles[0], dst, out.buffer, 0);
  return out;
}

/**
 * Copies the device buffers to a mappable one, submits, and once mapped converts on the host into the
 * cpu memory (the cpu reorder's own loop): the returned promise is what the gpu stream's `wait()` awaits.
 */
async function download(p: GpuReorderProblem, from: GpuMemory, to: Memory): Promise<void> {
  const { src, dst, gpu } = p;
  const vbytes = round4(src.getSize(0)), offs = src.grouped ? 4 * (src.grouped.groupCount + 1) : 0;
  if (vbytes + offs === 0) return;
  const rb = gpu.device.createBuffer({ label: 'reorder download', size: vbytes + offs, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  gpu.encode('reorder', (enc) => {
    if (vbytes) enc.copyBufferToBuffer(from.buffers[0], 0, rb, 0, Math.min(vbytes, from.buffers[0].size));
    if (offs) enc.copyBufferToBuffer(from.buffers[1], 0, rb, vbytes, offs);
  });
  gpu.submit();
  try {
    await rb.mapAsync(GPUMapMode.READ);
  } catch (e) {
    rb.destroy();
    throw new DnnlError('runtime_error', `reorder: mapping the download buffer failed: ${e instanceof Error ? e.message : String(e)}`);
  }
  const bytes = rb.getMappedRange().slice(0);
  rb.unmap();
  rb.destroy();
  if (to.isFreed || to.engine.isReleased) throw new DnnlError('invalid_arguments', 'reorder.execute: ARG.TO was freed (or its engine released) before the download completed');
  if (valuesStep(p) === 'bytes') new Uint8Array(to.engine.buffer, to.handles[0], src.getSize(0)).set(new Uint8Array(bytes, 0, src.getSize(0)));
  else copyPlainElements(src, bytes, 0, dst, to.engine.buffer, to.handles[0]);
  if (offs) to.offsets.set(new Int32Array(bytes, vbytes, offs / 4));
}

/** WebGPU reorder: uploads, downloads and device copies; conversions and layout changes in one kernel. */
export const webgpuReorder: GpuReorderImpl = {
  name: 'webgpu',
  reject: rejectReason,
  describe(p) {
    const v = valuesStep(p);
    const step = v === 'host' ? 'host-convert' : v === 'kernel' ? 'reorder-plain' : v === 'pack' ? `pack-${p.dst.packed?.name}` : 'copy';
    return `webgpu:${p.path}:${step}`;
  },
  task(p, from, to) {
    if (p.path === 'upload') return () => upload(p, from as Memory, to as GpuMemory);
    if (p.path === 'download') return () => download(p, from as GpuMemory, to as Memory);
    return () => recordDevice(p, (from as GpuMemory).buffers[0], p.src.grouped ? (from as GpuMemory).buffers[1] : undefined, to as GpuMemory);
  },
};

/** The gpu engine's ordered reorder list (the cpu reference never runs for a gpu engine). */
export const gpuReorderImplList: readonly GpuReorderImpl[] = [webgpuReorder];
