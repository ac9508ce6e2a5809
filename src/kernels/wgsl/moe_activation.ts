import { WGSL_ELTWISE_HELPERS } from './wgsl_eltwise.js';
import { gluColumnWgsl, gluFnWgsl, type GluConfig } from './wgsl_quant.js';

/** Error code of a grouped src whose last offset is outside [0, rows] (the cpu kernel's ERR_ACT_OFFS). */
export const ACT_ERR_OFFS = 140;
export const ACT_Y_FOLD = 32768;
export const ACT_WG = 64;

export function activationKey(g: GluConfig, grouped: boolean): string {
  return `moe-activation:${g.alg}.${g.layout}.${g.alpha}.${g.limit}:${grouped ? 'grouped' : 'plain'}`;
}

/**
 * `moe-activation`: act[r, j] = glu_act(h[r, gate col], h[r, up col]) with the fused GEMM epilogue's
 * WGSL (wgsl_quant.ts `gluFnWgsl`, `gluColumnWgsl`): the same formulas as `attr.postOps.appendGlu` on
 * the gpu engine. A grouped src reads offsets[G] on the device: rows at or past it are not touched, and
 * a value outside [0, rows] writes the status slot (workgroup 0) and nothing else.
 * Params (uniform, u32 x 8): N (= 2I, named as the GLU column helper expects), I, rows, srcLd, dstLd,
 * G, slot, pad. Grid: (ceil(I / 64), min(rows, fold), ceil(rows / fold)).
 */
export function activationWgsl(g: GluConfig, grouped: boolean): string {
  return /* wgsl */ `
struct Params { N: u32, I: u32, rows: u32, srcLd: u32, dstLd: u32, G: u32, slot: u32, _p0: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> H: array<f32>;
@group(0) @binding(2) var<storage, read_write> A: array<f32>;
${grouped ? `@group(0) @binding(3) var<storage, read> OFFS: array<i32>;
@group(0) @binding(4) var<storage, read_write> status: array<u32>;` : ''}
${WGSL_ELTWISE_HELPERS}
${gluColumnWgsl(g.layout)}
${gluFnWgsl(g)}
@compute @workgroup_size(${ACT_WG})
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_index) li: u32) {
  let r = wg.z * ${ACT_Y_FOLD}u + wg.y;
  let j = wg.x * ${ACT_WG}u + li;
  var rows = P.rows;
  ${grouped ? `let last = OFFS[P.G];
  if (last < 0 || last > i32(P.rows)) {
    if (r == 0u && j == 0u) { status[P.slot] = ${ACT_ERR_OFFS}u; status[P.slot + 1u] = P.G; status[P.slot + 2u] = bitcast<u32>(last); status[P.slot + 3u] = P.rows; }
    return;
  }
  rows = u32(last);` : ''}
  if (r >= rows || j >= P.I) { return; }
  let x = r * P.srcLd;
  A[r * P.dstLd + j] = glu_act(H[x + glu_col(j, 0u)], H[x + glu_col(j, 1u)]);
}
`;
}
