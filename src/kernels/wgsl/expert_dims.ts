/**
 * `expert-dims`: the runtime-dims pass of Proposal #3 (grouped_gemm) on the gpu engine. One workgroup
 * reads the rows of every expert (`ARG.RUNTIME_DIMS`, s32) on the device, checks each against its
 * expert's row capacity with the cpu engine's rules and codes (runtime_dims.ts DIMS_ERR), and writes,
 * per expert, the M word of each of that expert's GEMM params slots (a uniform the `gemm-tiled` dense
 * kernel reads as P.M; one slot, or one per row window of an expert larger than one binding,
 * expert_windows.ts) and its indirect dispatch arguments. Any violation writes the status slot and zero
 * rows and zero workgroups for every expert, so nothing is computed and nothing is written. The host
 * never reads the rows. The violation reported is the one the cpu engine reports first: every
 * expert's rows against its src / dst (negative, then beyond their capacity), then each per-row operand
 * (per-row scales, zero points, binary src1) in the cpu's order, given as (expert, capacity) checks.
 *
 * WGSL has no arrays of buffer bindings (no pointer tables): each expert keeps its own bind group and
 * its own dispatch. An expert whose capacity makes a small grid is dispatched directly over it (tiles
 * at or past M_i return at once); a larger one takes the indirect arguments written here, since Dawn
 * validates each `dispatchWorkgroupsIndirect` with a compute pass of its own (0.7-1.1 ms per expert on an
 * H100, reports/compare-gpu-h100-s15*.md).
 */

/**
 * Words per expert in `info` (written by the host per execution): capacity (the least of src, dst and
 * its per-row operands), tm, N tiles, max y tiles, first params slot, params slots, src / dst capacity.
 */
export const EXPERT_INFO_WORDS = 7;
/** Words per per-row operand check (written by the host): expert, rows of capacity. */
export const EXPERT_CHECK_WORDS = 2;
/** Status code for rows beyond a per-row operand's capacity (y: the check's index). */
export const DIMS_ERR_OPERAND = 65;
/** Words per expert in the indirect arguments buffer (x, y, z, pad: 16 bytes apart). */
export const EXPERT_ARGS_WORDS = 4;
/** Status code for rows that need more M tiles than one dispatch dimension allows (gpu engine only). */
export const DIMS_ERR_TILES = 64;

/** Params (uniform, 4 x u32): E, slot (word of the status slot), pStride (words between experts' GEMM params), checks. */
export function expertDimsWgsl(): string {
  return /* wgsl */ `
struct Params { E: u32, slot: u32, pStride: u32, checks: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> dims: array<i32>;
@group(0) @binding(2) var<storage, read> info: array<u32>;
@group(0) @binding(3) var<storage, read_write> params: array<u32>;
@group(0) @binding(4) var<storage, read_write> args: array<u32>;
@group(0) @binding(5) var<storage, read_write> status: array<u32>;
@group(0) @binding(6) var<storage, read> checks: array<u32>;

var<workgroup> bad: atomic<u32>;
var<workgroup> badAny: u32;

// The rule expert e breaks (0: none), in the cpu engine's order: negative, then above capacity.
fn violation(e: u32) -> u32 {
  let m = dims[e];
  if (m < 0) { return 6u; }
  let rows = u32(m);
  if (rows > info[${EXPERT_INFO_WORDS}u * e]) { return 7u; }
  let tm = info[${EXPERT_INFO_WORDS}u * e + 1u];
  if ((rows + tm - 1u) / tm > info[${EXPERT_INFO_WORDS}u * e + 3u]) { return ${DIMS_ERR_TILES}u; }
  return 0u;
}

fn report(code: u32, e: u32, y: u32) {
  status[P.slot] = code; status[P.slot + 1u] = e; status[P.slot + 2u] = bitcast<u32>(dims[e]); status[P.slot + 3u] = y;
}

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) li: u32) {
  _ = checks[0];
  if (li == 0u) { atomicStore(&bad, 0u); }
  workgroupBarrier();
  for (var e = li; e < P.E; e += 256u) {
    if (violation(e) != 0u) { atomicOr(&bad, 1u); }
  }
  workgroupBarrier();
  if (li == 0u) { badAny = atomicLoad(&bad); }
  let anyBad = workgroupUniformLoad(&badAny);
  for (var e = li; e < P.E; e += 256u) {
    var m = 0u; var x = 0u; var y = 0u;
    if (anyBad == 0u) {
      m = u32(dims[e]);
      let tm = info[${EXPERT_INFO_WORDS}u * e + 1u];
      y = (m + tm - 1u) / tm;
      x = select(0u, info[${EXPERT_INFO_WORDS}u * e + 2u], y > 0u);
    }
    let first = info[${EXPERT_INFO_WORDS}u * e + 4u];
    for (var j = 0u; j < info[${EXPERT_INFO_WORDS}u * e + 5u]; j++) { params[(first + j) * P.pStride] = m; }
    let a = ${EXPERT_ARGS_WORDS}u * e;
    args[a] = x; args[a + 1u] = y; args[a + 2u] = select(0u, 1u, x > 0u && y > 0u);
  }
  if (anyBad != 0u && li == 0u) {
    // The first violation in the cpu engine's order: src / dst of every expert, then the per-row operands.
    for (var e = 0u; e < P.E; e++) {
      let sd = info[${EXPERT_INFO_WORDS}u * e + 6u];
      var c = 0u;
      if (dims[e] < 0) { c = 6u; } else if (u32(dims[e]) > sd) { c = 7u; }
      if (c != 0u) { report(c, e, sd); return; }
    }
    for (var j = 0u; j < P.checks; j++) {
      let e = checks[${EXPERT_CHECK_WORDS}u * j];
      if (u32(dims[e]) > checks[${EXPERT_CHECK_WORDS}u * j + 1u]) { report(${DIMS_ERR_OPERAND}u, e, j); return; }
    }
    for (var e = 0u; e < P.E; e++) {
      let c = violation(e);
      if (c != 0u) { report(c, e, info[${EXPERT_INFO_WORDS}u * e]); return; }
    }
  }
}
`;
}
