import { WGSL_VMATH } from './wgsl_vmath.js';
import { DISPATCH_BLOCK } from './moe_dispatch.js';
import { dispatchOneFnWgsl } from './moe_dispatch_local.js';
import { ROUTING_REPORT, routingHeaderWgsl, routingKey, routingOutputsWgsl, type RoutingKernelConfig } from './moe_routing.js';
import { checkAllWgsl, routeTokenFnWgsl } from './moe_routing_token.js';

/**
 * moe.routing + moe.dispatch of a decode step in one dispatch (one workgroup of 256): the route
 * kernel's check of every logit (checkAllWgsl) and its per-token routing (route_token) for each token
 * in turn, the experts kept in workgroup memory as well as written to the ids / weights outputs; then
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

function routePart(c: RoutingKernelConfig): string {
  // checkAllWgsl ends the kernel after reporting an error: here route_all says so to main instead.
  const check = checkAllWgsl(c).replace(/return;(\s*\})$/, 'return false;$1');
  let s = `${routingHeaderWgsl(c)}
${routingOutputsWgsl(c)}
${ROUTING_REPORT}
${routeTokenFnWgsl(c, DISPATCH_BLOCK, true)}
fn route_all(li: u32) -> bool {
  let t = 0u;
  ${check}
  for (var tt = 0u; tt < P.T; tt++) {
    route_token(tt, li);
    workgroupBarrier();
    if (li < K) { DISPATCH_IDS[tt * K + li] = i32(TOPI[li]); }
  }
  workgroupBarrier();
  return true;
}`;
  for (const [re, to] of ROUTE_RENAMES) s = s.replace(re, to);
  s = s.replace(/@binding\((\d+)\)/g, (_m, b: string) => `@binding(${ROUTE_BINDING_BASE + Number(b)})`);
  // The dispatch part reads the experts from the workgroup copy, named as its kernels name the ids.
  return s.replace('DISPATCH_IDS', 'ids');
}

/** Pipeline key: the routing config and the local experts G (the dispatch's workgroup arrays). */
export function routeDispatchKey(c: RoutingKernelConfig, G: number): string {
  return `${routingKey(c, 'route')}:dispatch-one:G${G}`;
}

/** Workgroup bytes of the fused kernel beyond the routing's (routingTokenFits counts those). */
export function routeDispatchExtraBytes(G: number): number {
  // Dispatch: loc, sh, ids [256] each, cntW [G], startW [G + 1], two words; routing's RED grows to 256.
  return 4 * (3 * DISPATCH_BLOCK + 2 * G + 3 + (DISPATCH_BLOCK - 64));
}

export function routeDispatchWgsl(c: RoutingKernelConfig, G: number): string {
  return /* wgsl */ `${WGSL_VMATH}
${routePart(c)}
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
