/**
 * `grouped-schedule`: one workgroup that reads the runtime offsets on the device, validates them with
 * the rules (and the error codes, OFFS_ERR) of the cpu engine, and writes the tile schedule of the GEMM
 * that follows in the same submit: the indirect dispatch arguments and one (group, first row, end row)
 * entry per M tile. Bad offsets write the status slot and zero dispatch arguments, so the GEMM runs no
 * workgroup and touches nothing out of range. The host never reads the offsets.
 *
 * Schedule buffer (u32): [0..2] indirect args (x = N tiles, y, z), [3] tile count (0 on error),
 * [4 + 3t ..] tile t = (g, m0, m1). Tiles past 65535 fold into z (Y_FOLD per z step). Grouped K
 * (variable K per group) has no table: [4 + g] holds the validated offsets, args = (N tiles, M tiles, G).
 */
export const SCHED_HEADER_WORDS = 4;
export const SCHED_TILE_WORDS = 3;
export const Y_FOLD = 32768;

/** Words of the schedule buffer for a problem with `rows` rows (capacity) in `G` groups and M tile `tm`. */
export function scheduleWords(rows: number, G: number, tm: number): number {
  return SCHED_HEADER_WORDS + SCHED_TILE_WORDS * (Math.ceil(rows / tm) + G);
}

/**
 * Params (uniform, u32): G, total (extent the offsets may reach), tm, tilesN, slot (word of the status
 * slot), hasOther (1: a second offsets buffer must equal the primary), kMode (1: grouped K, no tile
 * table: args = (tilesN, tilesM, G)), tilesM (kMode), sizesLen (1: host-known per-group sizes given).
 */
export function groupedScheduleWgsl(): string {
  return /* wgsl */ `
struct Params { G: u32, total: u32, tm: u32, tilesN: u32, slot: u32, hasOther: u32, kMode: u32, tilesM: u32, hasSizes: u32, _p0: u32, _p1: u32, _p2: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> offs: array<i32>;
@group(0) @binding(2) var<storage, read> other: array<i32>;
@group(0) @binding(3) var<storage, read> sizes: array<i32>;
@group(0) @binding(4) var<storage, read_write> sched: array<u32>;
@group(0) @binding(5) var<storage, read_write> status: array<u32>;

var<workgroup> scan: array<u32, 256>;
var<workgroup> bad: atomic<u32>;
var<workgroup> badAny: u32;
var<workgroup> carry: u32;

fn fail(code: u32, i: u32, x: i32, y: i32) {
  status[P.slot] = code; status[P.slot + 1u] = i; status[P.slot + 2u] = bitcast<u32>(x); status[P.slot + 3u] = bitcast<u32>(y);
}

// The first violation in the cpu engine's rule order, found by one thread (error path only).
fn reportFirst() {
  let G = P.G;
  sched[0] = 0u; sched[1] = 0u; sched[2] = 0u; sched[3] = 0u;
  if (offs[0] != 0) { fail(1u, 0u, offs[0], 0); return; }
  for (var i = 1u; i <= G; i++) { if (offs[i] < offs[i - 1u]) { fail(2u, i, offs[i], offs[i - 1u]); return; } }
  if (offs[G] > i32(P.total)) { fail(3u, G, offs[G], i32(P.total)); return; }
  if (P.hasSizes == 1u) { for (var i = 0u; i < G; i++) { if (offs[i + 1u] - offs[i] != sizes[i]) { fail(5u, i, offs[i + 1u] - offs[i], sizes[i]); return; } } }
  for (var i = 0u; i <= G; i++) { if (other[i] != offs[i]) { fail(4u, i, other[i], offs[i]); return; } }
}

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) li: u32) {
  let G = P.G;
  if (li == 0u) { atomicStore(&bad, 0u); carry = 0u; }
  workgroupBarrier();
  // Pass 1: any rule broken? (each thread checks its groups)
  for (var g = li; g <= G; g += 256u) {
    let x = offs[g];
    var b = false;
    if (g == 0u) { b = x != 0; }
    else { b = x < offs[g - 1u]; }
    if (g == G && x > i32(P.total)) { b = true; }
    if (P.hasOther == 1u && other[g] != x) { b = true; }
    if (P.hasSizes == 1u && g < G && offs[g + 1u] - x != sizes[g]) { b = true; }
    if (b) { atomicOr(&bad, 1u); }
  }
  workgroupBarrier();
  if (li == 0u) { badAny = atomicLoad(&bad); }
  if (workgroupUniformLoad(&badAny) != 0u) {
    if (li == 0u) { reportFirst(); }
    return;
  }
  if (P.kMode == 1u) {
    // Grouped K: the GEMM reads the validated offsets from the schedule, not the caller's buffer.
    for (var g = li; g <= G; g += 256u) { sched[4u + g] = u32(offs[g]); }
    if (li == 0u) { sched[0] = P.tilesN; sched[1] = P.tilesM; sched[2] = G; sched[3] = 1u; }
    return;
  }
  // Pass 2: tiles per group, an exclusive scan in chunks of 256 groups, the table.
  for (var base = 0u; base < G; base += 256u) {
    let g = base + li;
    var c = 0u;
    if (g < G) { c = (u32(offs[g + 1u] - offs[g]) + P.tm - 1u) / P.tm; }
    scan[li] = c;
    workgroupBarrier();
    for (var s = 1u; s < 256u; s <<= 1u) {
      var v = 0u;
      if (li >= s) { v = scan[li - s]; }
      workgroupBarrier();
      scan[li] += v;
      workgroupBarrier();
    }
    let start = carry + scan[li] - c;
    if (g < G) {
      let m0 = u32(offs[g]);
      let m1 = u32(offs[g + 1u]);
      for (var j = 0u; j < c; j++) {
        let t = 4u + 3u * (start + j);
        sched[t] = g; sched[t + 1u] = m0 + j * P.tm; sched[t + 2u] = min(m0 + (j + 1u) * P.tm, m1);
      }
    }
    workgroupBarrier();
    if (li == 255u) { carry = start + c; }
    workgroupBarrier();
  }
  if (li == 0u) {
    let n = carry;
    sched[0] = P.tilesN;
    sched[1] = min(n, ${Y_FOLD}u);
    sched[2] = (n + ${Y_FOLD - 1}u) / ${Y_FOLD}u;
    sched[3] = n;
  }
}
`;
}
