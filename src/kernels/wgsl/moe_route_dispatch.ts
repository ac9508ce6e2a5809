import { WGSL_VMATH } from './wgsl_vmath.js';
import { DISPATCH_BLOCK } from './moe_dispatch.js';
import { dispatchOneFnWgsl } from './moe_dispatch_local.js';
import { ROUTING_REPORT, routingHeaderWgsl, routingKey, routingOutputsWgsl, type RoutingKernelConfig } from './moe_routing.js';
import { checkAllWgsl, routeTokenFnWgsl, routingTokenWorkgroupBytes } from './moe_routing_token.js';

/**
 * moe.routing + moe.dispatch of a decode step in one dispatch (one workgroup of 256): the route
 * kernel's check of every logit (checkAllWgsl) and its per-token routing (route_token), `ng` tokens at
 * once in groups of 256 / ng invocations (routeDispatchGroups), the experts kept in workgroup memory as well as written to the ids / weights outputs; then
 * the dispatch's one-workgroup form (dispatch_one) on those ids. The same WGSL functions as the two
 * kernels, so the same bits, outputs and error keys: a routing error is reported in the routing's
 * status slot and nothing is written (the dispatch does not run on ids that were not routed), a
 * dispatch error (an expert map entry) in the dispatch's slot.
 *
 * Both kernels name their uniform `P`, their ids `ids`, their status binding `status` and `report`:
 * the routing part is renamed (whole words) and its bindings moved by ROUTE_BINDING_BASE (one bind
 * group: one setBindGroup), the dispatch part keeps its names with `ids` a workgroup array. A decode layer thus records one dispatch where it recorded two
 * (3 Dawn calls and a pass boundary fewer).
 */

/** The routing part's binding n is ROUTE_BINDING_BASE + n (one bind group with the dispatch's 0-11). */
export const ROUTE_BINDING_BASE = 16;

/** Whole-word renames of the routing part (its own names against the dispatch's), its bindings moved past the dispatch's. */
const ROUTE_RENAMES: readonly [RegExp, string][] = [
  [/\bParams\b/g, 'RouteParams'], [/\bP\b/g, 'RP'],
  [/\bids\b/g, 'route_ids'], [/\bstatus\b/g, 'route_status'], [/\breport\b/g, 'route_report'],
];

function routePart(c: RoutingKernelConfig, ng: number): string {
  // checkAllWgsl ends the kernel after reporting an error: here route_all says so to main instead.
  const check = checkAllWgsl(c, `${DISPATCH_BLOCK}u`).replace(/return;(\s*\})$/, 'return false;$1');
  // Group gi (WG lanes) routes tokens gi, gi + ng, ...: ng at once, its experts copied from its TOPI row.
  const [gi, at] = ng > 1 ? ['li / WG', '[gi]'] : ['0u', ''];
  let s = `${routingHeaderWgsl(c)}
${routingOutputsWgsl(c)}
${ROUTING_REPORT}
${routeTokenFnWgsl(c, DISPATCH_BLOCK, true, ng)}
fn route_all(li: u32) -> bool {
  let t = 0u;
  ${check}
  let gi = ${gi};
  let gl = li % WG;
  for (var t0 = 0u; t0 < P.T; t0 += ${ng}u) {
    let tt = t0 + gi;
    route_token(tt, gl${ng > 1 ? ', gi' : ''});
    workgroupBarrier();
    if (tt < P.T) { for (var q = gl; q < K; q += WG) { DISPATCH_IDS[tt * K + q] = i32(TOPI${at}[q]); } }
  }
  workgroupBarrier();
  return true;
}`;
  for (const [re, to] of ROUTE_RENAMES) s = s.replace(re, to);
  s = s.replace(/@binding\((\d+)\)/g, (_m, b: string) => `@binding(${ROUTE_BINDING_BASE + Number(b)})`);
  // The dispatch part reads the experts from the workgroup copy, named as its kernels name the ids.
  return s.replace('DISPATCH_IDS', 'ids');
}

/**
 * Most tokens the fused kernel routes at once: groups of 256 / 8 = 32 invocations, one warp on NVIDIA,
 * each lane ranking E / 32 experts (2 for MoE-B); the layer fuses up to 8 tokens by default.
 */
export const ROUTE_DISPATCH_MAX_GROUPS = 8;

/**
 * How many tokens at once (a power of two, up to T rounded up and ROUTE_DISPATCH_MAX_GROUPS) the
 * fused kernel routes with `maxBytes` of workgroup memory: each token its own scores (routeDispatchBytes).
 */
export function routeDispatchGroups(c: RoutingKernelConfig, T: number, G: number, maxBytes: number): number {
  let ng = 1;
  while (ng < T && ng < ROUTE_DISPATCH_MAX_GROUPS && routeDispatchBytes(c, 2 * ng, G) <= maxBytes) ng *= 2;
  return ng;
}

/** Pipeline key: the routing config, the tokens routed at once and the local experts G (the dispatch's workgroup arrays). */
export function routeDispatchKey(c: RoutingKernelConfig, ng: number, G: number): string {
  return `${routingKey(c, 'route')}:x${ng}:dispatch-one:G${G}`;
}

/** Workgroup bytes of the fused kernel routing `ng` tokens at once. */
export function routeDispatchBytes(c: RoutingKernelConfig, ng: number, G: number): number {
  // Dispatch: loc, sh, ids [256] each, cntW [G], startW [G + 1], two words.
  return routingTokenWorkgroupBytes(c, DISPATCH_BLOCK, ng) + 4 * (3 * DISPATCH_BLOCK + 2 * G + 3);
}

export function routeDispatchWgsl(c: RoutingKernelConfig, ng: number, G: number): string {
  return /* wgsl */ `${WGSL_VMATH}
${routePart(c, ng)}
var<workgroup> ids: array<i32, ${DISPATCH_BLOCK}>;
${dispatchOneFnWgsl(Math.max(1, G))}

@compute @workgroup_size(${DISPATCH_BLOCK})
fn main(@builtin(local_invocation_index) li: u32) {
  if (!route_all(li)) { return; }
  dispatch_one(li);
}
`;
}

/** Storage buffers the fused kernel binds: the dispatch's map, four outputs and status; the routing's logits, [bias], ids, weights, status. */
export const routeDispatchStorageBuffers = (bias: boolean): number => 10 + (bias ? 1 : 0);
