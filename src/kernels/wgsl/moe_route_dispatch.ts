import { WGSL_VMATH } from './wgsl_vmath.js';
import { DISPATCH_BLOCK } from './moe_dispatch.js';
import { dispatchOneFnWgsl } from './moe_dispatch_local.js';
import { ROUTING_NAMES, routingHeaderWgsl, routingKey, routingOutputsWgsl, routingReportWgsl, type RoutingKernelConfig, type RoutingNames } from './moe_routing.js';
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
 * the routing part is generated with its own names (ROUTE_NAMES) and its bindings moved by
 * ROUTE_BINDING_BASE (one bind group: one setBindGroup), the dispatch part keeps its names with `ids`
 * a workgroup array. A decode layer thus records one dispatch where it recorded two (3 Dawn calls and
 * a pass boundary fewer).
 */

/** The routing part's binding n is ROUTE_BINDING_BASE + n (one bind group with the dispatch's 0-11). */
export const ROUTE_BINDING_BASE = 16;

/**
 * The routing part's names where the dispatch part declares the same (its params, ids, status and
 * report); the others are the routing kernels' own. test/moe_route_dispatch_wgsl.test.ts checks that
 * the two parts declare no name twice.
 */
export const ROUTE_NAMES: RoutingNames = Object.freeze({
  ...ROUTING_NAMES, paramsType: 'RouteParams', params: 'RP', ids: 'route_ids', status: 'route_status', report: 'route_report', bindingBase: ROUTE_BINDING_BASE,
});

/** The dispatch part's ids, as its kernels name them: here the workgroup copy the routing part fills. */
const DISPATCH_IDS = 'ids';

function routePart(c: RoutingKernelConfig, ng: number, n: RoutingNames): string {
  // checkAllWgsl ends the kernel after reporting an error: here route_all says so to main instead.
  const check = checkAllWgsl(c, `${DISPATCH_BLOCK}u`, n, 'return false;');
  // Group gi (WG lanes) routes tokens gi, gi + ng, ...: ng at once, its experts copied from its TOPI row.
  const [gi, at] = ng > 1 ? ['li / WG', '[gi]'] : ['0u', ''];
  const P = n.params;
  return `${routingHeaderWgsl(c, n)}
${routingOutputsWgsl(c, n)}
${routingReportWgsl(n)}
${routeTokenFnWgsl(c, DISPATCH_BLOCK, true, ng, n)}
fn route_all(li: u32) -> bool {
  let t = 0u;
  ${check}
  let gi = ${gi};
  let gl = li % WG;
  for (var t0 = 0u; t0 < ${P}.T; t0 += ${ng}u) {
    let tt = t0 + gi;
    route_token(tt, gl${ng > 1 ? ', gi' : ''});
    workgroupBarrier();
    if (tt < ${P}.T) { for (var q = gl; q < K; q += WG) { ${DISPATCH_IDS}[tt * K + q] = i32(TOPI${at}[q]); } }
  }
  workgroupBarrier();
  return true;
}`;
}

/** The dispatch part: the workgroup copy of the ids and dispatch_one for up to G local experts. */
function dispatchPart(G: number): string {
  return `var<workgroup> ${DISPATCH_IDS}: array<i32, ${DISPATCH_BLOCK}>;
${dispatchOneFnWgsl(Math.max(1, G))}`;
}

/**
 * The fused kernel's two parts (routeDispatchWgsl joins them): `names` are the routing part's,
 * ROUTE_NAMES but in a test that shows a collision is caught.
 */
export function routeDispatchParts(c: RoutingKernelConfig, ng: number, G: number, names: RoutingNames = ROUTE_NAMES): { route: string; dispatch: string } {
  return { route: routePart(c, ng, names), dispatch: dispatchPart(G) };
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
  const { route, dispatch } = routeDispatchParts(c, ng, G);
  return /* wgsl */ `${WGSL_VMATH}
${route}
${dispatch}

@compute @workgroup_size(${DISPATCH_BLOCK})
fn main(@builtin(local_invocation_index) li: u32) {
  if (!route_all(li)) { return; }
  dispatch_one(li);
}
`;
}

/** Storage buffers the fused kernel binds: the dispatch's map, four outputs and status; the routing's logits, [bias], ids, weights, status. */
export const routeDispatchStorageBuffers = (bias: boolean): number => 10 + (bias ? 1 : 0);
