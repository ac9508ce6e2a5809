import { WGSL_VMATH } from './wgsl_vmath.js';

/** What a routing pipeline is specialised for (everything of the pd but T and the logits' strides). */
export interface RoutingKernelConfig {
  readonly E: number;
  readonly k: number;
  readonly groups: number;
  readonly kgroup: number;
  readonly gmode: 0 | 1;
  readonly softmax: boolean;
  readonly renorm: boolean;
  readonly dt: 'f32' | 'bf16' | 'f16';
  readonly bias: boolean;
  /** Scores in a storage scratch buffer `[T, E4 (x2 with bias)]` instead of per-invocation arrays (large E). */
  readonly scratch: boolean;
}

/** Invocations per workgroup of both routing kernels (one token each). */
export const ROUTE_WG = 64;

/**
 * Bytes of per-invocation arrays the in-register variant needs. WGSL caps the private address space
 * of a shader at 8 KiB; past a quarter of that the scores go to a storage scratch buffer.
 */
export function routingPrivateBytes(c: Omit<RoutingKernelConfig, 'scratch'>): number {
  const E4 = (c.E + 3) & ~3;
  return 4 * (E4 * (c.bias ? 2 : 1) + 2 * c.k + 2 * c.kgroup + c.groups);
}
export const ROUTING_PRIVATE_LIMIT = 2048;

export function routingKey(c: RoutingKernelConfig, which: 'check' | 'route'): string {
  return `moe-routing-${which}:E${c.E}:k${c.k}:g${c.groups}:${c.kgroup}:${c.gmode}:${c.softmax ? 'softmax' : 'sigmoid'}:${c.renorm ? 'renorm' : ''}:${c.dt}:${c.bias ? 'bias' : ''}:${c.scratch ? 'scratch' : ''}`;
}

/**
 * The module-scope names of a routing kernel's parts (routingHeaderWgsl, routingOutputsWgsl,
 * routingReportWgsl, moe_routing_token.ts's routeTokenFnWgsl and checkAllWgsl) that a kernel holding
 * them next to another kernel's parts may have to change, and where their bindings start: the fused
 * route + dispatch kernel (moe_route_dispatch.ts) passes its own. ROUTING_NAMES: the routing kernels'.
 */
export interface RoutingNames {
  /** The params struct and its uniform (binding 0). */
  readonly paramsType: string;
  readonly params: string;
  /** Storage bindings: logits (1), correction bias (2), ids (3), weights (4), check flag (5), status (6). */
  readonly src: string;
  readonly bias: string;
  readonly ids: string;
  readonly wts: string;
  readonly flag: string;
  readonly status: string;
  /** The function that writes an error to the status slot. */
  readonly report: string;
  /** Binding n of the routing kernel is bindingBase + n. */
  readonly bindingBase: number;
}

export const ROUTING_NAMES: RoutingNames = Object.freeze({
  paramsType: 'Params', params: 'P', src: 'src', bias: 'bias', ids: 'ids', wts: 'wts', flag: 'flag', status: 'status', report: 'report', bindingBase: 0,
});

/** `@group(0) @binding(b)` of the routing kernel's binding b, moved by n.bindingBase. */
function binding(n: RoutingNames, b: number): string {
  return `@group(0) @binding(${n.bindingBase + b})`;
}

/** Params (uniform): T, the logits' element strides, the status slot's word, scale and eps (f32), zero (a runtime 0). */
const paramsStruct = (n: RoutingNames): string => `struct ${n.paramsType} { T: u32, st: u32, se: u32, slot: u32, scale: f32, eps: f32, zero: u32, _p: u32 }`;

/** Status codes (runtime_data.ts ROUTE_ERR, wasm/src/moe-route.c). */
const NAN = 110, POS_INF = 111, NO_FINITE = 112;
export const ROUTE_ERR_BIAS = 113;

/** Params, logits binding, flag, logit_bits / row_error / fail_key: shared by the routing kernels. */
export function routingHeaderWgsl(c: RoutingKernelConfig, n: RoutingNames = ROUTING_NAMES): string {
  const { params: P, src } = n;
  // 16-bit logits sit two per u32 word (low half first); every type is read as the bits of its f32 value.
  const bits = c.dt === 'f32' ? `return ${src}[i];` : `
  let h = (${src}[i >> 1u] >> ((i & 1u) * 16u)) & 0xffffu;
  ${c.dt === 'bf16' ? 'return h << 16u;' : `
  let s = (h & 0x8000u) << 16u;
  let x = (h >> 10u) & 0x1fu;
  let m = h & 0x3ffu;
  if (x == 0u) { return s | bitcast<u32>(f32(m) * 5.9604644775390625e-8f); }
  if (x == 31u) { return s | 0x7f800000u | (m << 13u); }
  return s | ((x + 112u) << 23u) | (m << 13u);`}`;
  return /* wgsl */ `
${paramsStruct(n)}
${binding(n, 0)} var<uniform> ${P}: ${n.paramsType};
${binding(n, 1)} var<storage, read> ${src}: array<u32>;
${c.bias ? `${binding(n, 2)} var<storage, read> ${n.bias}: array<u32>;` : ''}
${binding(n, 5)} var<storage, read_write> ${n.flag}: array<atomic<u32>>;
const E = ${c.E}u;
const SOFTMAX = ${c.softmax};

// The f32 bits of logit (t, e): exact for every storage type (f16 decoded by hand: subnormals, inf, NaN kept).
fn logit_bits(t: u32, e: u32) -> u32 {
  let i = t * ${P}.st + e * ${P}.se;
  ${bits}
}
fn is_nan(b: u32) -> bool { return (b & 0x7fffffffu) > 0x7f800000u; }

// The first rule token t breaks, in the cpu kernel's order: (code, expert); code 0 when none.
fn row_error(t: u32) -> vec2<u32> {
  var finite = false;
  for (var e = 0u; e < E; e++) {
    let b = logit_bits(t, e);
    if (is_nan(b)) { return vec2<u32>(${NAN}u, e); }
    if (SOFTMAX && b == 0x7f800000u) { return vec2<u32>(${POS_INF}u, e); }
    finite = finite || b != 0xff800000u;
  }
  if (SOFTMAX && !finite) { return vec2<u32>(${NO_FINITE}u, 0u); }
  return vec2<u32>(0u, 0u);
}

// Errors are ranked by key (token t: t; bias entry e: T + e): the flag keeps the smallest, inverted so that 0 means none.
fn fail_key(key: u32) { atomicMax(&${n.flag}[0], 0xffffffffu - key); }
`;
}

/**
 * Pass 1: every token's logits and every bias entry checked, the first violation's key in the flag.
 * One workgroup per token, its invocations reading the row together (a row read by one invocation,
 * E dependent loads long, took most of the routing's time at T = 256 on an H200); workgroup 0 also
 * checks the bias. The rules are row_error's (the report, on the error path only, re-derives the code).
 * Grid: T workgroups of ROUTE_WG.
 */
export function routingCheckWgsl(c: RoutingKernelConfig): string {
  return /* wgsl */ `${routingHeaderWgsl(c)}
var<workgroup> BAD: atomic<u32>;
var<workgroup> FIN: atomic<u32>;
@compute @workgroup_size(${ROUTE_WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
  let t = wid.y * nwg.x + wid.x;
  if (li == 0u) { atomicStore(&BAD, 0u); atomicStore(&FIN, 0u); }
  workgroupBarrier();
  if (t < P.T) {
    for (var e = li; e < E; e += ${ROUTE_WG}u) {
      let b = logit_bits(t, e);
      if (is_nan(b) || (SOFTMAX && b == 0x7f800000u)) { atomicOr(&BAD, 1u); }
      if (b != 0xff800000u) { atomicOr(&FIN, 1u); }
    }
  }
  workgroupBarrier();
  if (li == 0u && t < P.T && (atomicLoad(&BAD) != 0u || (SOFTMAX && atomicLoad(&FIN) == 0u))) { fail_key(t); }
  ${c.bias ? `if (t == 0u) { for (var e = li; e < E; e += ${ROUTE_WG}u) { if (((bias[e] >> 23u) & 0xffu) == 0xffu) { fail_key(P.T + e); } } }` : ''}
}
`;
}

/** The outputs (ids, weights) and the constants of a route kernel: shared by both route kernels. */
export function routingOutputsWgsl(c: RoutingKernelConfig, n: RoutingNames = ROUTING_NAMES): string {
  return /* wgsl */ `${binding(n, 3)} var<storage, read_write> ${n.ids}: array<i32>;
${binding(n, 4)} var<storage, read_write> ${n.wts}: array<f32>;
const E4 = ${(c.E + 3) & ~3}u;
const K = ${c.k}u;
const G = ${c.groups}u;
const KG = ${c.kgroup}u;
const PER = ${c.E / c.groups}u;
const RENORM = ${c.renorm};`;
}

/** The status binding and `report(key)`: the error of the smallest key, in the status slot. */
export function routingReportWgsl(n: RoutingNames = ROUTING_NAMES): string {
  const { params: P, status } = n;
  return /* wgsl */ `
${binding(n, 6)} var<storage, read_write> ${status}: array<u32>;
fn ${n.report}(key: u32) {
  var code = ${ROUTE_ERR_BIAS}u;
  var i = 0u;
  var x = key - ${P}.T;
  if (key < ${P}.T) {
    let r = row_error(key);
    code = r.x;
    i = key;
    x = r.y;
  }
  ${status}[${P}.slot] = code;
  ${status}[${P}.slot + 1u] = i;
  ${status}[${P}.slot + 2u] = x;
  ${status}[${P}.slot + 3u] = 0u;
}
`;
}

/**
 * Pass 2: one invocation per token routes it exactly as wasm/src/moe-route.c does (four-lane softmax
 * sums, the same top-n insertion, slot-order weight sum), or, when pass 1 flagged an error, writes
 * nothing and the first invocation reports the error in the status slot.
 */
export function routingWgsl(c: RoutingKernelConfig): string {
  const E4 = (c.E + 3) & ~3;
  const sel = c.bias ? 'SELS' : 'SCORE';
  const storage = c.scratch
    ? `@group(0) @binding(7) var<storage, read_write> scr: array<f32>;`
    : `var<private> SCORE: array<f32, ${E4}>;${c.bias ? `\nvar<private> SELS: array<f32, ${E4}>;` : ''}`;
  let body = /* wgsl */ `${routingHeaderWgsl(c)}
${WGSL_VMATH}
${routingOutputsWgsl(c)}
${storage}
var<private> topv: array<f32, K>;
var<private> topi: array<u32, K>;
var<private> tn: u32;
var<private> gtv: array<f32, KG>;
var<private> gti: array<u32, KG>;
var<private> gn: u32;
var<private> gmask: array<u32, G>;
var<private> sb: u32;

fn ninf() -> f32 { return bitcast<f32>(0xff800000u | P.zero); }
fn fmax(a: f32, b: f32) -> f32 { return select(b, a, a > b); }

// A top-K list in descending value, ties to the lower index (candidates arrive in ascending index).
fn top_push(x: f32, idx: u32) {
  var p: u32;
  if (tn == K) {
    if (!(x > topv[K - 1u])) { return; }
    p = K - 1u;
  } else {
    p = tn;
    tn++;
  }
  while (p > 0u && topv[p - 1u] < x) {
    topv[p] = topv[p - 1u];
    topi[p] = topi[p - 1u];
    p--;
  }
  topv[p] = x;
  topi[p] = idx;
}
fn group_push(x: f32, idx: u32) {
  var p: u32;
  if (gn == KG) {
    if (!(x > gtv[KG - 1u])) { return; }
    p = KG - 1u;
  } else {
    p = gn;
    gn++;
  }
  while (p > 0u && gtv[p - 1u] < x) {
    gtv[p] = gtv[p - 1u];
    gti[p] = gti[p - 1u];
    p--;
  }
  gtv[p] = x;
  gti[p] = idx;
}

${routingReportWgsl()}
@compute @workgroup_size(${ROUTE_WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
  let t = (wid.y * nwg.x + wid.x) * ${ROUTE_WG}u + li;
  let f = atomicLoad(&flag[0]);
  if (f != 0u) {
    if (t == 0u) { report(0xffffffffu - f); }
    return;
  }
  if (t >= P.T) { return; }
  sb = t * E4 * ${c.bias ? 2 : 1}u;
  for (var e = 0u; e < E4; e++) {
    if (e < E) { SCORE[e] = bitcast<f32>(logit_bits(t, e)); } else { SCORE[e] = ninf(); }
  }
  if (SOFTMAX) {
    var vm = vec4<f32>(ninf());
    for (var e = 0u; e < E4; e += 4u) {
      for (var l = 0u; l < 4u; l++) {
        let x = SCORE[e + l];
        vm[l] = select(vm[l], x, vm[l] < x);
      }
    }
    let m = fmax(fmax(vm.x, vm.y), fmax(vm.z, vm.w));
    var acc = vec4<f32>(0.0f);
    for (var e = 0u; e < E4; e += 4u) {
      for (var l = 0u; l < 4u; l++) {
        let x = vm_exp(SCORE[e + l] - m);
        SCORE[e + l] = x;
        acc[l] = acc[l] + x;
      }
    }
    let s = (acc.x + acc.y) + (acc.z + acc.w);
    for (var e = 0u; e < E4; e++) { SCORE[e] = SCORE[e] / s; }
  } else {
    for (var e = 0u; e < E4; e++) { SCORE[e] = vm_logistic(SCORE[e]); }
  }
  ${c.bias ? 'for (var e = 0u; e < E; e++) { SELS[e] = SCORE[e] + bitcast<f32>(bias[e]); }' : ''}
  tn = 0u;
  if (G > 1u) {
    gn = 0u;
    for (var g = 0u; g < G; g++) {
      var a = ninf();
      var b = ninf();
      for (var e = g * PER; e < (g + 1u) * PER; e++) {
        let v = ${sel}[e];
        if (v > a) { b = a; a = v; } else if (v > b) { b = v; }
      }
      ${c.gmode === 0 ? 'group_push(a, g);' : 'group_push(a + b, g);'}
    }
    for (var g = 0u; g < G; g++) { gmask[g] = 0u; }
    for (var q = 0u; q < gn; q++) { gmask[gti[q]] = 1u; }
    for (var g = 0u; g < G; g++) {
      if (gmask[g] == 0u) { continue; }
      for (var e = g * PER; e < (g + 1u) * PER; e++) { top_push(${sel}[e], e); }
    }
  } else {
    for (var e = 0u; e < E; e++) { top_push(${sel}[e], e); }
  }
  // Weights: the (uncorrected) scores of the chosen experts, summed in slot order.
  var sum = 0.0f;
  for (var q = 0u; q < K; q++) {
    topv[q] = SCORE[topi[q]];
    sum = sum + topv[q];
  }
  let den = sum + P.eps;
  let o = t * K;
  for (var q = 0u; q < K; q++) {
    var x = topv[q];
    if (RENORM) { x = select(0.0f, x / den, den > 0.0f); }
    ids[o + q] = i32(topi[q]);
    wts[o + q] = x * P.scale;
  }
}
`;
  if (c.scratch) body = body.replaceAll('SCORE[', 'scr[sb + ').replaceAll('SELS[', `scr[sb + E4 + `);
  return body;
}
