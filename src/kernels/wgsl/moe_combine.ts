import { WGSL_EXACT_HELPERS } from './wgsl_exact.js';

/** Error code of a row_of entry out of range (the cpu kernel's ERR_COMBINE_ROW). */
export const COMBINE_ERR_ROW = 130;
/** Tokens past this fold into the dispatch's z dimension. */
export const COMBINE_Y_FOLD = 32768;
/** Invocations per workgroup of the combine kernel (a column each, or four: combineVec4Fits). */
export const COMBINE_WG = 64;

/**
 * Whether the combine can take four columns per invocation (vec4 loads and stores, 16-byte aligned):
 * f32 dst, N and both row strides multiples of 4. On an H200 the scalar kernel moved ~1 TB/s.
 */
export function combineVec4Fits(dst: string, N: number, srcLd: number, dstLd: number): boolean {
  return dst === 'f32' && N % 4 === 0 && srcLd % 4 === 0 && dstLd % 4 === 0;
}
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
export function combineWgsl(dst: 'f32' | 'bf16' | 'f16', fusedCheck = false, vec4 = false): string {
  // vec4: four columns per invocation (combineVec4Fits), componentwise the scalar kernel's arithmetic.
  const F = vec4 ? 'vec4<f32>' : 'f32';
  const at = (i: string): string => (vec4 ? `(${i}) / 4u` : i);
  const store = dst === 'f32'
    ? `D[${at('di')}] = acc;`
    : `let h = ${dst === 'f16' ? 'ex_f16_bits' : 'ex_bf16_bits'}(bitcast<u32>(acc)); let sh = (di & 1u) * 16u;
    atomicAnd(&D[di >> 1u], ~(0xffffu << sh)); atomicOr(&D[di >> 1u], h << sh);`;
  return /* wgsl */ `
${PARAMS}
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> Y: array<${F}>;
@group(0) @binding(2) var<storage, read> RO: array<i32>;
@group(0) @binding(3) var<storage, read> W: array<f32>;
@group(0) @binding(4) var<storage, read_write> D: array<${dst === 'f32' ? F : 'atomic<u32>'}>;
@group(0) @binding(5) var<storage, ${fusedCheck ? 'read_write' : 'read'}> status: array<u32>;
${dst === 'f32' ? '' : WGSL_EXACT_HELPERS}
fn opaque(p: ${F}) -> ${F} { return bitcast<${F}>(bitcast<${vec4 ? 'vec4<u32>' : 'u32'}>(p) ^ ${vec4 ? 'vec4<u32>(P.zero)' : 'P.zero'}); }
// Checked before (status); tested again so that nothing out of range is ever read.
fn slot_ok(r: i32) -> bool { return r >= 0 && (P.scattered == 1u || u32(r) < P.rows); }
// y of slot i (row_of entry r) at the invocation's column, 0 for a slot without a row.
fn slot_y(r: i32, i: u32, n: u32) -> ${F} {
  if (!slot_ok(r)) { return ${F}(0.0f); }
  let row = select(u32(r), i, P.scattered == 1u);
  return Y[${at('row * P.srcLd + n')}];
}
// What slot i adds: its weighted y, y, or +0 without a row.
fn slot_term(r: i32, i: u32, y: ${F}) -> ${F} {
  if (!slot_ok(r)) { return ${F}(0.0f); }
  if (P.weighted == 1u) { return opaque(W[i] * y); }
  return y;
}
${fusedCheck ? `var<workgroup> first: atomic<u32>;
var<workgroup> firstU: u32;` : ''}

@compute @workgroup_size(${COMBINE_WG})
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_index) li: u32) {
  let t = wg.z * ${COMBINE_Y_FOLD}u + wg.y;
  let n = (wg.x * ${COMBINE_WG}u + li)${vec4 ? ' * 4u' : ''};${fusedCheck ? `
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
  // Four slots at a time: their row_of entries, then their y values, are loaded together (one chain of
  // dependent loads per four slots rather than per slot: the kernel is latency-bound); a slot without a
  // row adds +0, which leaves acc's bits as they are (acc starts at +0 and so is never -0).
  var acc = ${F}(0.0f);
  var s = 0u;
  for (; s + 4u <= P.k; s += 4u) {
    let i0 = t * P.k + s;
    let r = vec4<i32>(RO[i0], RO[i0 + 1u], RO[i0 + 2u], RO[i0 + 3u]);
    let y0 = slot_y(r.x, i0, n);
    let y1 = slot_y(r.y, i0 + 1u, n);
    let y2 = slot_y(r.z, i0 + 2u, n);
    let y3 = slot_y(r.w, i0 + 3u, n);
    acc = acc + slot_term(r.x, i0, y0);
    acc = acc + slot_term(r.y, i0 + 1u, y1);
    acc = acc + slot_term(r.z, i0 + 2u, y2);
    acc = acc + slot_term(r.w, i0 + 3u, y3);
  }
  for (; s < P.k; s++) {
    let i = t * P.k + s;
    let r = RO[i];
    acc = acc + slot_term(r, i, slot_y(r, i, n));
  }
  let di = t * P.dstLd + n;
  ${store}
}
`;
}
