import { DnnlError } from '../common/status.js';
import { relaxed as relaxedB64, simd128 as simd128B64 } from './wasm_embedded.js';

/** Which kernel build an engine uses: baseline SIMD128 (mul + add) or relaxed SIMD (FMA). */
export type KernelIsa = 'simd128' | 'relaxed';
export type KernelChoice = 'auto' | KernelIsa | 'none';

export interface KernelExports {
  run_job(job: number, tid: number): number;
  /** Tests: n (% 8 == 0) embedded scales (zp = 0) or zero points (zp = 1) of a job DT through the `+q` SIMD decoders. */
  check_decode_emb(dt: number, zp: number, src: number, dst: number, n: number): void;
  /** Tests: n (% 8 == 0) codes of an 8-bit job DT through the w8 microkernel's in-register decoder. */
  check_decode_w8(dt: number, src: number, dst: number, n: number): void;
  /** Tests: n (% 8 == 0) bf16 / f16 codes (job DT) through the x16 microkernels' in-register conversion. */
  check_decode_wx16(dt: number, src: number, dst: number, n: number): void;
  /** Tests: the fused epilogue's eltwise (job codes; 100 = erf) over n floats (n % 4 == 0). */
  check_eltwise(alg: number, alpha: number, beta: number, src: number, dst: number, n: number): void;
  /** Tests: decode n elements of a job DT to f32. */
  check_decode(dt: number, src: number, dst: number, n: number): void;
  /** Tests: bytes of per-worker scratch the driver carves for a job (must fit job.scratch_stride). */
  check_scratch_bytes(job: number): number;
  /** Tests: encode n floats to a dst job DT (RNE, saturating). */
  check_encode(dt: number, src: number, dst: number, n: number): void;
  /** Which relaxed dots the integer kernels may use where they probe exact: bit 0 i32x4.relaxed_dot_i8x16_i7x16_add_s, bit 1 i16x8.relaxed_dot_i8x16_i7x16_s (the engine sets them only where relaxed SIMD is native). */
  set_relaxed_dot(allowed: number): void;
  /** 1 when the relaxed build uses the relaxed dot (native relaxed SIMD and the kernel's probe exact), else 0. */
  relaxed_dot_ok(): number;
  /** 1 when the 1-2 row x4 `:dq` tiles run on relaxed SIMD's i16x8 dot (native relaxed SIMD and its probe exact), else 0. */
  relaxed_dot16_ok(): number;
  /** Bench A/B: 0 runs the 1-2 row x4 integer decode tiles on the former 3x8 kernels (the same bits), 1 on s16_dq_1x16w4 / 2x8w4, 2 (default) also on s8_dq_1x16w4r (relaxed i16x8 dot) where it is allowed. */
  set_dq_quad(on: number): void;
  peak_f32(iters: number, seed: number): number;
  ukernel_f32(reps: number, kc: number, a: number, w: number, c: number): number;
  ukernel_s16(reps: number, kc: number, a: number, w: number, c: number): number;
  /** Bench: the integer kernel by weights layout (job DT: s32 = int16 k-pairs, s8 / u8 = x8 codes, s4 / u4 = x4 codes). */
  ukernel_int(reps: number, mr: number, kc: number, dt: number, a: number, w: number, c: number): number;
  stream_f32(ptr: number, n: number): number;
  /** Bench: the f32 x low-precision microkernels on L1-resident operands (job DT codes). */
  ukernel_lowp(reps: number, mr: number, kc: number, dt: number, a: number, w: number, c: number): number;
  /** Bench: the 1-row x 2-panel decode kernels (f32_gemm_1x16w8 / w4), panels ps bytes apart, sq 16 scales or 0. */
  ukernel_lowp16(reps: number, kc: number, dt: number, a: number, w: number, ps: number, c: number, sq: number): number;
  // i32 globals, typed structurally: WebAssembly.Global is generic in lib.dom and absent without it,
  // so the shipped .d.ts would not compile in every consumer's lib setting.
  __stack_pointer: { value: number };
  __heap_base: { value: number };
}

function decode(b64: string): Uint8Array<ArrayBuffer> {
  const g = globalThis as { Buffer?: { from(s: string, enc: string): Uint8Array } };
  if (g.Buffer) return Uint8Array.from(g.Buffer.from(b64, "base64"));
  const bin = atob(b64);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

const cache = new Map<KernelIsa, WebAssembly.Module>();

/**
 * Whether relaxed SIMD validates without V8's flag (Node 22+, current browsers). Node 20 has it only
 * behind `--experimental-wasm-relaxed-simd`, and there `i32x4.relaxed_dot_i8x16_i7x16_add_s` returns
 * wrong sums: the engine then keeps the integer kernels off the relaxed dot (set_relaxed_dot(0)).
 */
let relaxedNative: boolean | undefined;
export function relaxedSimdNative(): boolean {
  relaxedNative ??= WebAssembly.validate(decode(relaxedB64));
  return relaxedNative;
}

/** Node 20 ships relaxed SIMD behind a flag: switch it on before compiling (a no-op on Node 22+). */
async function enableRelaxedFlag(): Promise<void> {
  const proc = (globalThis as { process?: { versions?: { node?: string } } }).process;
  if (!proc?.versions?.node) return;
  try {
    const v8 = await import('node:v8');
    v8.setFlagsFromString('--experimental-wasm-relaxed-simd');
  } catch {
    // Not Node, or flags locked: validation below decides.
  }
}

/** Compiles (once per process) the module for `isa`; throws `unimplemented` if the runtime lacks it. */
export async function loadKernels(isa: KernelIsa): Promise<WebAssembly.Module> {
  const hit = cache.get(isa);
  if (hit) return hit;
  const bytes = decode(isa === 'relaxed' ? relaxedB64 : simd128B64);
  if (isa === 'relaxed' && !relaxedSimdNative()) await enableRelaxedFlag();
  if (!WebAssembly.validate(bytes)) {
    throw new DnnlError('unimplemented', `engine: this runtime cannot compile the ${isa} kernels (WebAssembly ${isa === 'relaxed' ? 'relaxed SIMD' : 'SIMD128'} unsupported)`);
  }
  const mod = await WebAssembly.compile(bytes);
  cache.set(isa, mod);
  return mod;
}

/** 'auto': relaxed SIMD when the runtime has it on by default (Node 22+, recent browsers), else SIMD128. */
export function resolveIsa(choice: KernelChoice): KernelIsa | undefined {
  if (choice === 'none') return undefined;
  if (choice !== 'auto') return choice;
  return WebAssembly.validate(decode(relaxedB64)) ? 'relaxed' : 'simd128';
}

export async function instantiate(mod: WebAssembly.Module, memory: WebAssembly.Memory, stackTop: number): Promise<KernelExports> {
  const inst = await WebAssembly.instantiate(mod, { env: { memory } });
  const ex = inst.exports as unknown as KernelExports;
  ex.__stack_pointer.value = stackTop;
  return ex;
}
