import { WGSL_VMATH } from './wgsl_vmath.js';
import { ROUTE_WG, ROUTING_NAMES, routingHeaderWgsl, routingOutputsWgsl, routingReportWgsl, type RoutingKernelConfig, type RoutingNames } from './moe_routing.js';

/**
 * `moe-routing` pass 2, one workgroup per token: the ROUTE_WG invocations share the token's experts,
 * so a decode step (T = 1) does not run E exps, a sort and the weights on one invocation (30 us on an
 * H200 for E = 64, against ~5 us here). Bits are those of the one-invocation kernel (moe_routing.ts)
 * and of wasm/src/moe-route.c:
 *  - the softmax max is exact in any order; each exp is elementwise; the sum keeps the cpu's four lanes
 *    (lane l adds experts e = l mod 4 in ascending e, then (l0 + l1) + (l2 + l3)), one invocation per lane;
 *  - the top-k is a rank: expert e precedes j when its value is larger, or equal with e < j (the cpu's
 *    insertion keeps the earlier of equal values), and takes slot rank(e) when that is below k;
 *  - grouped selection: each group's score (its max, or max + second max, scanned in ascending e) by one
 *    invocation, ranked the same way; experts of unselected groups do not compete;
 *  - the weights are summed in slot order by one invocation.
 * Used where the scores fit workgroup memory (`routingTokenFits`); larger E takes the one-invocation
 * kernel with its storage scratch.
 */

/**
 * Bytes of workgroup memory route_token needs for `c` in a workgroup of `wg` invocations routing `ng`
 * tokens at once (routeTokenFnWgsl): each token its scores, group and top-k words and LANE; RED and
 * the check's words once.
 */
export function routingTokenWorkgroupBytes(c: Omit<RoutingKernelConfig, 'scratch'>, wg = ROUTE_WG, ng = 1): number {
  const E4 = (c.E + 3) & ~3;
  return 4 * (ng * (E4 * (c.bias ? 2 : 1) + 2 * c.groups + 2 * c.k + 4) + wg + 4);
}

/** Whether the workgroup-per-token kernel applies (its scores in workgroup memory, at most 8 KiB). */
export function routingTokenFits(c: Omit<RoutingKernelConfig, 'scratch'>): boolean {
  return routingTokenWorkgroupBytes(c) <= 8192;
}

/**
 * At most how many tokens (and logits) the route kernel checks itself (`routingTokenWgsl` with
 * `checked`): every workgroup checks every logit, so the check pass (and its flag) goes away where
 * that is a few loads per invocation (decode).
 */
export const ROUTE_CHECKED_MAX_T = 32;
export const ROUTE_CHECKED_MAX_LOGITS = 4096;

/** Whether routing `T` tokens of `E` experts checks the logits inside the route kernel. */
export function routingCheckedFits(T: number, E: number): boolean {
  return T <= ROUTE_CHECKED_MAX_T && T * E <= ROUTE_CHECKED_MAX_LOGITS;
}

/**
 * The rules of the check pass (routingCheckWgsl: the smallest violating key, a token t or bias entry
 * T + e) found by each workgroup over all the logits, in parallel: an element is NaN, or +inf under
 * softmax; a token has no finite logit under softmax (a bit per token, T <= 32); a bias entry is not
 * finite. `KEYW` is the key, 0xffffffff for none. The report itself (row_error, one invocation) runs
 * only on the error path. `wg`: the workgroup's size (a WGSL expression), the loops' stride; `n`: the
 * routing part's names (RoutingNames); `exit`: the statement that ends the caller after an error.
 */
export function checkAllWgsl(c: RoutingKernelConfig, wg = 'WG', n: RoutingNames = ROUTING_NAMES, exit = 'return;'): string {
  const P = n.params;
  return /* wgsl */ `
  if (li == 0u) { atomicStore(&KEYW, 0xffffffffu); atomicStore(&FINW, 0u); }
  workgroupBarrier();
  for (var i = li; i < ${P}.T * E; i += ${wg}) {
    let tt = i / E;
    let b = logit_bits(tt, i % E);
    if (is_nan(b) || (SOFTMAX && b == 0x7f800000u)) { atomicMin(&KEYW, tt); }
    if (b != 0xff800000u) { atomicOr(&FINW, 1u << tt); }
  }
  ${c.bias ? `for (var e = li; e < E; e += ${wg}) { if (((${n.bias}[e] >> 23u) & 0xffu) == 0xffu) { atomicMin(&KEYW, ${P}.T + e); } }` : ''}
  workgroupBarrier();
  if (SOFTMAX && li < ${P}.T && ((atomicLoad(&FINW) >> li) & 1u) == 0u) { atomicMin(&KEYW, li); }
  workgroupBarrier();
  if (li == 0u) { FLAGW = atomicLoad(&KEYW); }
  let key = workgroupUniformLoad(&FLAGW);
  if (key != 0xffffffffu) {
    if (t == 0u && li == 0u) { ${n.report}(key); }
    ${exit}
  }`;
}

/**
 * The per-token routing of a workgroup of `wg` invocations as `fn route_token(t, li)` (t uniform), with
 * its workgroup memory and, with `checked`, the check's words (checkAllWgsl). Shared by the route
 * kernel (one token per workgroup) and the fused route + dispatch kernel (moe_route_dispatch.ts).
 * With `ng` > 1 (a power of two) the workgroup routes `ng` tokens at once: `fn route_token(t, li, gi)`,
 * group gi of WG = wg / ng invocations (li its lane) routes token t with row gi of each workgroup
 * array; t differs between groups, so a t past the last token cannot return before the barriers: it
 * routes the last token again and writes nothing. The bits do not depend on WG (>= 4): the max is
 * exact in any order, the sum keeps its four lanes (one invocation each), the top-k is a rank, the
 * weights are summed in slot order by one invocation. `n`: the routing part's names (RoutingNames).
 */
export function routeTokenFnWgsl(c: RoutingKernelConfig, wg: number, checked: boolean, ng = 1, n: RoutingNames = ROUTING_NAMES): string {
  const P = n.params;
  const E4 = (c.E + 3) & ~3;
  const groupSize = wg / ng;
  const grouped = ng > 1;
  // The per-token workgroup arrays: with ng > 1 a row each of the ng tokens routed at once, group gi
  // indexing its own row.
  const rows = (type: string, len: number): string => (grouped ? `array<array<${type}, ${len}>, ${ng}>` : `array<${type}, ${len}>`);
  const row = (name: string): string => (grouped ? `${name}[gi]` : name);
  const SCORE = row('SCORE');
  const SELS = row('SELS');
  const GS = row('GS');
  const GSEL = row('GSEL');
  const TOPI = row('TOPI');
  const RED = row('RED');
  const LANE = row('LANE');
  const sel = c.bias ? SELS : SCORE;
  return /* wgsl */ `const WG = ${groupSize}u;
var<workgroup> SCORE: ${rows('f32', E4)};
${c.bias ? `var<workgroup> SELS: ${rows('f32', E4)};` : ''}
var<workgroup> GS: ${rows('f32', c.groups)};
var<workgroup> GSEL: ${rows('u32', c.groups)};
var<workgroup> TOPI: ${rows('u32', c.k)};
var<workgroup> RED: ${rows('f32', groupSize)};
var<workgroup> LANE: ${rows('f32', 4)};
var<workgroup> FLAGW: u32;
${checked ? 'var<workgroup> KEYW: atomic<u32>;\nvar<workgroup> FINW: atomic<u32>;' : ''}

fn ninf() -> f32 { return bitcast<f32>(0xff800000u | ${P}.zero); }
fn fmax(a: f32, b: f32) -> f32 { return select(b, a, a > b); }

// Token t's top-k: ids and weights written, its experts left in TOPI.
fn route_token(t: u32, li: u32${grouped ? ', gi: u32' : ''}) {
  ${grouped ? `let tl = min(t, ${P}.T - 1u);` : `if (t >= ${P}.T) { return; }`}
  for (var e = li; e < E4; e += WG) {
    if (e < E) { ${SCORE}[e] = bitcast<f32>(logit_bits(${grouped ? 'tl' : 't'}, e)); } else { ${SCORE}[e] = ninf(); }
  }
  workgroupBarrier();
  if (SOFTMAX) {
    var m = ninf();
    for (var e = li; e < E4; e += WG) { m = fmax(m, ${SCORE}[e]); }
    ${RED}[li] = m;
    workgroupBarrier();
    for (var h = WG / 2u; h > 0u; h = h / 2u) {
      if (li < h) { ${RED}[li] = fmax(${RED}[li], ${RED}[li + h]); }
      workgroupBarrier();
    }
    let mx = ${RED}[0];
    for (var e = li; e < E4; e += WG) { ${SCORE}[e] = vm_exp(${SCORE}[e] - mx); }
    workgroupBarrier();
    if (li < 4u) {
      var acc = 0.0f;
      for (var e = li; e < E4; e += 4u) { acc = acc + ${SCORE}[e]; }
      ${LANE}[li] = acc;
    }
    workgroupBarrier();
    let s = (${LANE}[0] + ${LANE}[1]) + (${LANE}[2] + ${LANE}[3]);
    for (var e = li; e < E4; e += WG) { ${SCORE}[e] = ${SCORE}[e] / s; }
  } else {
    for (var e = li; e < E4; e += WG) { ${SCORE}[e] = vm_logistic(${SCORE}[e]); }
  }
  ${c.bias ? `for (var e = li; e < E; e += WG) { ${SELS}[e] = ${SCORE}[e] + bitcast<f32>(${n.bias}[e]); }` : ''}
  workgroupBarrier();
  if (G > 1u) {
    for (var g = li; g < G; g += WG) {
      var a = ninf();
      var b = ninf();
      for (var e = g * PER; e < (g + 1u) * PER; e++) {
        let v = ${sel}[e];
        if (v > a) { b = a; a = v; } else if (v > b) { b = v; }
      }
      ${GS}[g] = ${c.gmode === 0 ? 'a' : 'a + b'};
    }
    workgroupBarrier();
    for (var g = li; g < G; g += WG) {
      let v = ${GS}[g];
      var r = 0u;
      for (var h = 0u; h < G; h++) { if (${GS}[h] > v || (${GS}[h] == v && h < g)) { r++; } }
      ${GSEL}[g] = select(0u, 1u, r < KG);
    }
    workgroupBarrier();
  }
  for (var e = li; e < E; e += WG) {
    if (G > 1u && ${GSEL}[e / PER] == 0u) { continue; }
    let v = ${sel}[e];
    var r = 0u;
    for (var j = 0u; j < E; j++) {
      if (G > 1u && ${GSEL}[j / PER] == 0u) { continue; }
      let w = ${sel}[j];
      if (w > v || (w == v && j < e)) { r++; }
    }
    if (r < K) { ${TOPI}[r] = e; }
  }
  workgroupBarrier();
  // Weights: the (uncorrected) scores of the chosen experts, summed in slot order.
  if (li == 0u${grouped ? ` && t < ${P}.T` : ''}) {
    var sum = 0.0f;
    for (var q = 0u; q < K; q++) { sum = sum + ${SCORE}[${TOPI}[q]]; }
    let den = sum + ${P}.eps;
    let o = t * K;
    for (var q = 0u; q < K; q++) {
      var x = ${SCORE}[${TOPI}[q]];
      if (RENORM) { x = select(0.0f, x / den, den > 0.0f); }
      ${n.ids}[o + q] = i32(${TOPI}[q]);
      ${n.wts}[o + q] = x * ${P}.scale;
    }
  }
}`;
}

/**
 * The route kernel; `checked`: it checks every logit itself (routingCheckedFits) instead of reading
 * the check pass's flag.
 */
export function routingTokenWgsl(c: RoutingKernelConfig, checked = false): string {
  return /* wgsl */ `${routingHeaderWgsl(c)}
${WGSL_VMATH}
${routingOutputsWgsl(c)}
${routingReportWgsl()}
${routeTokenFnWgsl(c, ROUTE_WG, checked)}

@compute @workgroup_size(${ROUTE_WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
  // One token per workgroup: t and the flag are uniform, so the early returns keep the barriers uniform.
  let t = wid.y * nwg.x + wid.x;
  ${checked ? checkAllWgsl(c) : `if (li == 0u) { FLAGW = atomicLoad(&flag[0]); }
  let f = workgroupUniformLoad(&FLAGW);
  if (f != 0u) {
    if (t == 0u && li == 0u) { report(0xffffffffu - f); }
    return;
  }`}
  route_token(t, li);
}
`;
}
