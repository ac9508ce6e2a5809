import { WGSL_ELTWISE_HELPERS } from './wgsl_eltwise.js';
import { gluColumnWgsl, gluFnWgsl, type GluConfig } from './wgsl_quant.js';
import { SCHED_HEADER_WORDS } from './grouped_schedule.js';

export const ACT_Y_FOLD = 32768;
export const ACT_WG = 64;

export function activationKey(g: GluConfig, grouped: boolean): string {
  return `moe-activation:${g.alg}.${g.layout}.${g.alpha}.${g.limit}:${grouped ? 'grouped' : 'plain'}`;
}

/**
 * `moe-activation`: act[r, j] = glu_act(h[r, gate col], h[r, up col]) with the fused GEMM epilogue's
 * WGSL (wgsl_quant.ts `gluFnWgsl`, `gluColumnWgsl`): the same formulas as `attr.postOps.appendGlu` on
 * the gpu engine. A grouped src's offsets are checked on the device first by the grouped matmul's
 * `grouped-schedule` pass (grouped_schedule.ts, kMode: every rule of the cpu engine, the status slot
 * written on a violation), dispatched just before in the same pass: this kernel reads its verdict
 * (SCHED[3], 0 after a violation: nothing is touched) and the validated offsets[G] (SCHED[4 + G]); rows at
 * or past it are not touched.
 * Params (uniform, u32 x 8): N (= 2I, named as the GLU column helper expects), I, rows, srcLd, dstLd,
 * G, pad, pad. Grid: (ceil(I / 64), min(rows, fold), ceil(rows / fold)).
 */
export function activationWgsl(g: GluConfig, grouped: boolean): string {
  return /* wgsl */ `
struct Params { N: u32, I: u32, rows: u32, srcLd: u32, dstLd: u32, G: u32, _p0: u32, _p1: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> H: array<f32>;
@group(0) @binding(2) var<storage, read_write> A: array<f32>;
${grouped ? '@group(0) @binding(3) var<storage, read> SCHED: array<u32>;' : ''}
${WGSL_ELTWISE_HELPERS}
${gluColumnWgsl(g.layout)}
${gluFnWgsl(g)}
@compute @workgroup_size(${ACT_WG})
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_index) li: u32) {
  let r = wg.z * ${ACT_Y_FOLD}u + wg.y;
  let j = wg.x * ${ACT_WG}u + li;
  var rows = P.rows;
  ${grouped ? `if (SCHED[3] == 0u) { return; }
  rows = min(SCHED[${SCHED_HEADER_WORDS}u + P.G], P.rows);` : ''}
  if (r >= rows || j >= P.I) { return; }
  let x = r * P.srcLd;
  A[r * P.dstLd + j] = glu_act(H[x + glu_col(j, 0u)], H[x + glu_col(j, 1u)]);
}
`;
}
