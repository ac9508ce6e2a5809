import { WGSL_EXACT_HELPERS } from './wgsl_exact.js';

/** Error code of a row_of entry out of range (the cpu kernel's ERR_COMBINE_ROW). */
export const COMBINE_ERR_ROW = 130;
/** Tokens past this fold into the dispatch's z dimension. */
export const COMBINE_Y_FOLD = 32768;
/** Columns per workgroup of the combine kernel. */
export const COMBINE_WG = 64;
/**
 * Up to this many row_of entries (T k: decode sizes) every combine workgroup checks them all itself
 * (`combineWgsl(dt, true)`): no check dispatch before it (~10 us of host time through Dawn on an H200).
 */
export const COMBINE_FUSED_CHECK = 256;

/**
 * Params (uniform, u32 x 12): T, k, N, srcLd, dstLd, rows, scattered, weighted, slot (word of the
 * status slot), zero (always 0: see `opaque`), pad, pad.
 */
const PARAMS = 'struct Params { T: u32, k: u32, N: u32, srcLd: u32, dstLd: u32, rows: u32, scattered: u32, weighted: u32, slot: u32, zero: u32, _p0: u32, _p1: u32 }';

/**
 * `moe-combine-check`: one workgroup reads every row_of entry; the first (lowest index) outside
 * [-1, rows) (routed) or below -1 (scattered) goes to the status slot: [code, index, value, rows].
 * The combine that follows in the same pass reads the slot and writes nothing when it is set.
 */
export function combineCheckWgsl(): string {
  return /* wgsl */ `
${PARAMS}
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> RO: array<i32>;
@group(0) @binding(2) var<storage, read_write> status: array<u32>;
var<workgroup> first: atomic<u32>;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) li: u32) {
  if (li == 0u) { atomicStore(&first, 0xffffffffu); }
  workgroupBarrier();
  let n = P.T * P.k;
  for (var i = li; i < n; i += 256u) {
    let r = RO[i];
    if (r < -1 || (P.scattered == 0u && r >= i32(P.rows))) { atomicMin(&first, i); break; }
  }
  workgroupBarrier();
  if (li == 0u) {
    let i = atomicLoad(&first);
    if (i != 0xffffffffu) {
      status[P.slot] = ${COMBINE_ERR_ROW}u; status[P.slot + 1u] = i; status[P.slot + 2u] = bitcast<u32>(RO[i]); status[P.slot + 3u] = P.rows;
    }
  }
}
`;
}

/**
 * `moe-combine`: out[t, n] = sum over s = 0..k-1 with row_of[t, s] >= 0 of f32(w[t, s] * y[row, n])
 * (or y[row, n] unweighted), added in f32 from +0 in slot order: one invocation per (t, n), no
 * atomics on floats, the cpu engine's bits. The product is passed through an integer XOR with a
 * uniform zero (`opaque`) so that no compiler can contract the multiply and the add into an FMA (WGSL
 * allows contraction; the cpu rounds the product first). dst f32, or bf16 / f16 converted with
 * integer code (wgsl_exact.ts) and stored into its half of the word with atomics (the other half is
 * another invocation's, or not ours). Grid: (ceil(N / 64), min(T, fold), ceil(T / fold)).
 */
export function combineWgsl(dst: 'f32' | 'bf16' | 'f16', fusedCheck = false): string {
  const store = dst === 'f32'
    ? 'D[di] = acc;'
    : `let h = ${dst === 'f16' ? 'ex_f16_bits' : 'ex_bf16_bits'}(bitcast<u32>(acc)); let sh = (di & 1u) * 16u;
    atomicAnd(&D[di >> 1u], ~(0xffffu << sh)); atomicOr(&D[di >> 1u], h << sh);`;
  return /* wgsl */ `
${PARAMS}
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> Y: array<f32>;
@group(0) @binding(2) var<storage, read> RO: array<i32>;
@group(0) @binding(3) var<storage, read> W: array<f32>;
@group(0) @binding(4) var<storage, read_write> D: array<${dst === 'f32' ? 'f32' : 'atomic<u32>'}>;
@group(0) @binding(5) var<storage, ${fusedCheck ? 'read_write' : 'read'}> status: array<u32>;
${dst === 'f32' ? '' : WGSL_EXACT_HELPERS}
fn opaque(p: f32) -> f32 { return bitcast<f32>(bitcast<u32>(p) ^ P.zero); }
${fusedCheck ? `var<workgroup> first: atomic<u32>;
var<workgroup> firstU: u32;` : ''}

@compute @workgroup_size(${COMBINE_WG})
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_index) li: u32) {
  let t = wg.z * ${COMBINE_Y_FOLD}u + wg.y;
  let n = wg.x * ${COMBINE_WG}u + li;${fusedCheck ? `
  // The check of moe-combine-check, by every workgroup (few entries): the first bad entry skips them all,
  // workgroup 0 reports it.
  if (li == 0u) { atomicStore(&first, 0xffffffffu); }
  workgroupBarrier();
  for (var i = li; i < P.T * P.k; i += ${COMBINE_WG}u) {
    let r = RO[i];
    if (r < -1 || (P.scattered == 0u && r >= i32(P.rows))) { atomicMin(&first, i); break; }
  }
  workgroupBarrier();
  if (li == 0u) { firstU = atomicLoad(&first); }
  let bad = workgroupUniformLoad(&firstU);
  if (bad != 0xffffffffu) {
    if (li == 0u && wg.x == 0u && wg.y == 0u && wg.z == 0u) {
      status[P.slot] = ${COMBINE_ERR_ROW}u; status[P.slot + 1u] = bad; status[P.slot + 2u] = bitcast<u32>(RO[bad]); status[P.slot + 3u] = P.rows;
    }
    return;
  }
  if (t >= P.T || n >= P.N) { return; }` : `
  if (status[P.slot] != 0u || t >= P.T || n >= P.N) { return; }`}
  var acc = 0.0f;
  for (var s = 0u; s < P.k; s++) {
    let i = t * P.k + s;
    let r = RO[i];
    // Checked before (status); tested again so that nothing out of range is ever read.
    if (r < 0 || (P.scattered == 0u && u32(r) >= P.rows)) { continue; }
    let row = select(u32(r), i, P.scattered == 1u);
    let y = Y[row * P.srcLd + n];
    if (P.weighted == 1u) { acc = acc + opaque(W[i] * y); } else { acc = acc + y; }
  }
  let di = t * P.dstLd + n;
  ${store}
}
`;
}
