import { WGSL_EXACT_HELPERS } from './wgsl_exact.js';

/** Error codes of the cpu kernel (wasm/src/quant-rows-s8.c). */
export const QROWS_ERR_OFFS = 101;
export const QROWS_ERR_NONFINITE = 102;
/** Rows per grid row: (1024, ceil(rows / 1024)) stays far inside the 65535 per-dimension limit. */
export const QROWS_FOLD = 1024;

/**
 * `quant-rows-s8`: per-row symmetric int8 quantization, one workgroup per row, in integer arithmetic on
 * the f32 bit patterns (wgsl_exact.ts), so codes and scales are the cpu engine's bit for bit on any
 * device: amax = max |x| (bits of non-negative floats order like the floats), s = RNE(amax / 127)
 * (1 for a zero row), q = RNE(x / s) saturated. A row holding a NaN or an infinity is not written and
 * reported (the lowest such row: the slot's index word holds its complement, taken with atomicMax);
 * a grouped src reads offsets[G] on the device (rows at or past it untouched; outside [0, rows]:
 * nothing written, reported by workgroup 0). Codes go four to a u32 word: a word inside the row is
 * stored whole, a word shared with a neighbouring row (or padding) gets its bytes with atomics.
 * Params (uniform, u32 x 8): rows, cols, srcLd, dstLd (elements), G, slot, pad, pad.
 * Grid: (min(rows, fold), ceil(rows / fold)); `WG` invocations per row (quantRowsWorkgroup).
 */
/** Invocations per row: 256 for long rows, 64 for short ones (fewer idle invocations per workgroup). */
export function quantRowsWorkgroup(cols: number): number {
  return cols >= 1024 ? 256 : 64;
}

/** WGSL: the f32 bits of element i of a float array `buf` read as u32 words (16-bit types two to a word). */
export function floatBitsLoad(src: 'f32' | 'bf16' | 'f16', buf: string): string {
  return src === 'f32' ? `${buf}[i]` : src === 'bf16' ? `((${buf}[i >> 1u] >> ((i & 1u) * 16u)) & 0xffffu) << 16u`
    : `ex_f16_to_f32_bits((${buf}[i >> 1u] >> ((i & 1u) * 16u)) & 0xffffu)`;
}

export function quantRowsWgsl(src: 'f32' | 'bf16' | 'f16', grouped: boolean, WG: number): string {
  const load = floatBitsLoad(src, 'X');
  return /* wgsl */ `
struct Params { rows: u32, cols: u32, srcLd: u32, dstLd: u32, G: u32, slot: u32, _p0: u32, _p1: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> X: array<u32>;
@group(0) @binding(2) var<storage, read_write> Q: array<atomic<u32>>;
@group(0) @binding(3) var<storage, read_write> S: array<u32>;
@group(0) @binding(4) var<storage, read_write> status: array<atomic<u32>>;
${grouped ? '@group(0) @binding(5) var<storage, read> OFFS: array<i32>;' : ''}
${WGSL_EXACT_HELPERS}
var<workgroup> amax: atomic<u32>;

fn bits(i: u32) -> u32 { return ${load}; }

@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_index) li: u32) {
  let r = wg.y * ${QROWS_FOLD}u + wg.x;
  var rows = P.rows;
  ${grouped ? `let last = OFFS[P.G];
  if (last < 0 || last > i32(P.rows)) {
    if (r == 0u && li == 0u) { atomicStore(&status[P.slot], ${QROWS_ERR_OFFS}u); atomicStore(&status[P.slot + 1u], P.G); atomicStore(&status[P.slot + 2u], bitcast<u32>(last)); atomicStore(&status[P.slot + 3u], P.rows); }
    return;
  }
  rows = u32(last);` : ''}
  if (r >= rows) { return; }
  // amax starts at 0: WGSL zero-initializes workgroup memory.
  let x0 = r * P.srcLd;
  var m = 0u;
  for (var c = li; c < P.cols; c += ${WG}u) { m = max(m, bits(x0 + c) & 0x7fffffffu); }
  if (m != 0u) { atomicMax(&amax, m); }
  workgroupBarrier();
  // Every invocation reads the same value; no barrier follows, so the returns below need no uniformity.
  let a = atomicLoad(&amax);
  if (a >= 0x7f800000u) {
    if (li == 0u) { atomicStore(&status[P.slot], ${QROWS_ERR_NONFINITE}u); atomicMax(&status[P.slot + 1u], ~r); }
    return;
  }
  let s = select(0x3f800000u, ex_div127(a), a != 0u);
  if (li == 0u) { S[r] = s; }
  let q0 = r * P.dstLd;
  let q1 = q0 + P.cols;
  for (var w = (q0 >> 2u) + li; w <= ((q1 + 3u) >> 2u) - 1u && q1 > q0; w += ${WG}u) {
    var word = 0u;
    var mask = 0u;
    for (var b = 0u; b < 4u; b++) {
      let e = 4u * w + b;
      if (e < q0 || e >= q1) { continue; }
      let code = bitcast<u32>(ex_quant_s8(bits(x0 + (e - q0)), s)) & 0xffu;
      word = word | (code << (8u * b));
      mask = mask | (0xffu << (8u * b));
    }
    if (mask == 0xffffffffu) { atomicStore(&Q[w], word); }
    else { atomicAnd(&Q[w], ~mask); atomicOr(&Q[w], word); }
  }
}
`;
}
