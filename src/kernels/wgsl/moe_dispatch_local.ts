/**
 * moe.dispatch with its counts, starts and errors in workgroup memory (G <= DISPATCH_LOCAL_MAX_G local
 * experts): the same stable counting sort, outputs and error keys as moe_dispatch.ts, without storage
 * atomics, a serial storage scan or a report pass.
 *
 * - One block of slots and no hidden copy (decode): `dispatchOneWgsl`, one workgroup does everything.
 *   The H200 took 22-41 us for the storage-scratch form of this (a chain of dependent L2 atomics, a
 *   256-step rank loop, a binary search of storage starts per row); here every lookup is workgroup memory.
 * - Up to DISPATCH_LOCAL_MAX_BLOCKS blocks: two passes (+ the indirect hidden copy of moe_dispatch.ts).
 *   `place`: per block, the slots' local experts and ranks, the block's count per expert (a whole row:
 *   nothing has to be zeroed for the next execution) and the block's smallest error key (a word each:
 *   no flag to reset). `write`: every workgroup sums the blocks' counts itself (nb loads per expert),
 *   scans them in workgroup memory and writes its 256 slots / rows / offsets entries; workgroup 0 also
 *   writes the copy's indirect arguments and, after an error, the status slot.
 *
 * Error keys as moe_dispatch.ts: slot i: i; map entry e: n + e; expert g over capacity: n + E + g; the
 * smallest is reported (workgroup atomicMin: the order of the invocations cannot show).
 */
import { DISPATCH_BLOCK, DISPATCH_COMMON, DISPATCH_EMAP, DISPATCH_ID_BINDING, DISPATCH_IDS, DISPATCH_STATUS, DISPATCH_WRITE_BINDINGS, reportFnWgsl } from './moe_dispatch.js';

/** Local experts the workgroup-memory forms hold (counts, bases and starts: 12 KiB). */
export const DISPATCH_LOCAL_MAX_G = 1024;
/** Blocks of slots the two-pass form takes: each write workgroup reads nb counts per expert. */
export const DISPATCH_LOCAL_MAX_BLOCKS = 128;

/** Words of the two-pass form's scratch: 0 spare, 1 used rows (the copy reads it), 2-3 spare, block keys [nbp], block counts [nb, G], local ids + 1 [n], ranks [n]. */
export function dispatchLocalScratchWords(n: number, G: number, nbp: number): number {
  const nb = Math.ceil(n / DISPATCH_BLOCK);
  return 4 + nbp + nb * G + 2 * n;
}

/** P.nbp is the number of place workgroups (nbp): blocks of slots, or of map entries where E > n. */
const LAYOUT = /* wgsl */ `
const NONE = 0xffffffffu;
fn ERRW() -> u32 { return 4u; }
fn BLKW() -> u32 { return 4u + P.nbp; }
fn LOCW() -> u32 { return BLKW() + P.nb * P.G; }
fn RANKW() -> u32 { return LOCW() + P.n; }
`;

const shared = (gmax: number): string => /* wgsl */ `
var<workgroup> loc: array<i32, ${DISPATCH_BLOCK}>;
var<workgroup> keyW: atomic<u32>;
var<workgroup> flagW: u32;
var<workgroup> cntW: array<u32, ${gmax}>;

fn fail(key: u32) { atomicMin(&keyW, key); }

/** Slot i validated (range; batched: no repeat within its token) and mapped: its local expert, or -1. */
fn local_of(i: u32) -> i32 {
  var l = -1;
  if (i < P.n) {
    let e = ids[i];
    if (e < 0 || e >= i32(P.E)) {
      fail(i);
    } else {
      var dup = false;
      if (P.batched == 1u) {
        for (var s = i - i % P.k; s < i; s++) { if (ids[s] == e) { dup = true; } }
      }
      if (dup) {
        fail(i);
      } else {
        l = e;
        if (P.hasMap == 1u) { l = emap[u32(e)]; }
        // A bad map entry is reported by its own check; its slots are placed nowhere.
        if (l < -1 || l >= i32(P.G)) { l = -1; }
      }
    }
  }
  return l;
}

fn check_map_entry(e: u32) {
  let v = emap[e];
  if (v < -1 || v >= i32(P.G)) { fail(P.n + e); }
}

/** The rank of block slot li among the block's m slots of expert l; its count stored in cntW when it is the last. */
fn rank_in_block(li: u32, l: i32, m: u32) -> u32 {
  var before = 0u;
  for (var j = 0u; j < li; j++) { if (loc[j] == l) { before++; } }
  var last = true;
  for (var j = li + 1u; j < m; j++) { if (loc[j] == l) { last = false; break; } }
  if (last) { cntW[u32(l)] = before + 1u; }
  return before;
}

fn clear_counts(li: u32) {
  if (li == 0u) { atomicStore(&keyW, NONE); }
  for (var g = li; g < P.G; g += ${DISPATCH_BLOCK}u) { cntW[g] = 0u; }
  workgroupBarrier();
}
`;

/** Padded exclusive scan of cntW into startW (batched: g * cap), 256 invocations, G <= gmax; then the report. */
const scan = (gmax: number): string => /* wgsl */ `
var<workgroup> sh: array<u32, 256>;
var<workgroup> startW: array<u32, ${gmax + 1}>;

fn padded(g: u32) -> u32 { return (cntW[g] + P.block - 1u) / P.block * P.block; }

fn scan_starts(li: u32) {
  let per = (P.G + 255u) / 256u;
  let g0 = min(li * per, P.G);
  let g1 = min(g0 + per, P.G);
  var s = 0u;
  for (var g = g0; g < g1; g++) {
    if (P.batched == 1u && cntW[g] > P.cap) { fail(P.n + P.E + g); }
    s += padded(g);
  }
  sh[li] = s;
  workgroupBarrier();
  for (var d = 1u; d < 256u; d <<= 1u) {
    var v = 0u;
    if (li >= d) { v = sh[li - d]; }
    workgroupBarrier();
    sh[li] += v;
    workgroupBarrier();
  }
  var run = sh[li] - s;
  for (var g = g0; g < g1; g++) {
    startW[g] = select(run, g * P.cap, P.batched == 1u);
    run += padded(g);
  }
  if (li == 255u) { startW[P.G] = select(sh[255], P.G * P.cap, P.batched == 1u); }
  workgroupBarrier();
}

/** Whether routed row r is taken by no slot (alignment padding, unused capacity, past the last start). */
fn is_free(r: u32) -> bool {
  if (P.batched == 1u) {
    let g = r / P.cap;
    return r - g * P.cap >= cntW[g];
  }
  if (r >= startW[P.G]) { return true; }
  var lo = 0u;
  var hi = P.G;
  while (hi - lo > 1u) {
    let mid = (lo + hi) / 2u;
    if (startW[mid] <= r) { lo = mid; } else { hi = mid; }
  }
  return r - startW[lo] >= cntW[lo];
}

fn write_row_offs(i: u32) {
  if (i < P.R && is_free(i)) {
    ti[i] = -1;
    ks[i] = -1;
  }
  if (P.batched == 1u) {
    if (i < P.G) { offs[i] = i32(cntW[i]); }
  } else if (i <= P.G) {
    offs[i] = i32(startW[i]);
  }
}

fn write_slot(i: u32, l: i32, at: u32) {
  if (l < 0) {
    rowOf[i] = -1;
  } else {
    let pos = startW[u32(l)] + at;
    rowOf[i] = i32(pos);
    ti[pos] = i32(i / P.k);
    ks[pos] = i32(i % P.k);
  }
}

${reportFnWgsl('/** The violation of key (counts from cntW) written to the status slot. */\nfn report(key: u32) {', 'i32(cntW[i])').slice(1)}
fn key_now(li: u32) -> u32 {
  if (li == 0u) { flagW = atomicLoad(&keyW); }
  return workgroupUniformLoad(&flagW);
}
`;

/** The hidden copy's indirect arguments (moe_dispatch.ts's scan pass writes the same): none after an error. */
const COPY_ARGS = /* wgsl */ `
fn copy_args(used: u32, failed: bool) {
  let count = select(used * P.K, (used * P.K + 1u) / 2u, P.half == 1u);
  let wg = (count + 255u) / 256u;
  var x = min(wg, P.maxDim);
  var y = 0u;
  if (x > 0u) { y = (wg + x - 1u) / x; }
  if (failed) { x = 0u; y = 0u; }
  args[0] = x;
  args[1] = y;
  args[2] = 1u;
}
`;

/**
 * The one-workgroup form's declarations but its ids binding, and its body as `fn dispatch_one(li)`
 * (256 invocations), for up to `gmax` local experts. The fused route + dispatch kernel
 * (moe_route_dispatch.ts) declares `ids` as the workgroup array its routing fills.
 */
export function dispatchOneFnWgsl(gmax: number): string {
  return /* wgsl */ `${DISPATCH_COMMON}
${DISPATCH_EMAP}
${DISPATCH_WRITE_BINDINGS}
${DISPATCH_STATUS}
${LAYOUT}
${shared(gmax)}
${scan(gmax)}

fn dispatch_one(li: u32) {
  clear_counts(li);
  let l = local_of(li);
  loc[li] = l;
  if (P.hasMap == 1u) { for (var e = li; e < P.E; e += ${DISPATCH_BLOCK}u) { check_map_entry(e); } }
  workgroupBarrier();
  var rank = 0u;
  if (l >= 0) { rank = rank_in_block(li, l, P.n); }
  workgroupBarrier();
  scan_starts(li);
  let key = key_now(li);
  if (key != NONE) {
    if (li == 0u) { report(key); }
    return;
  }
  if (li < P.n) { write_slot(li, l, rank); }
  for (var i = li; i < max(P.R, P.G + 1u); i += ${DISPATCH_BLOCK}u) { write_row_offs(i); }
}`;
}

/** The whole dispatch in one workgroup: n <= 256 slots, no hidden copy, no scratch. */
export function dispatchOneWgsl(): string {
  return /* wgsl */ `${DISPATCH_ID_BINDING}
${dispatchOneFnWgsl(DISPATCH_LOCAL_MAX_G)}

@compute @workgroup_size(${DISPATCH_BLOCK})
fn main(@builtin(local_invocation_index) li: u32) {
  dispatch_one(li);
}
`;
}

/** Two-pass form, pass 1: one workgroup per block of slots (and of map entries). */
export function dispatchLocalPlaceWgsl(): string {
  return /* wgsl */ `${DISPATCH_COMMON}
${DISPATCH_IDS}
@group(0) @binding(3) var<storage, read_write> scr: array<u32>;
${LAYOUT}
${shared(DISPATCH_LOCAL_MAX_G)}

@compute @workgroup_size(${DISPATCH_BLOCK})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
  let b = wid.y * nwg.x + wid.x;
  if (b >= P.nbp) { return; }
  clear_counts(li);
  let i = b * ${DISPATCH_BLOCK}u + li;
  let l = local_of(i);
  loc[li] = l;
  if (P.hasMap == 1u && i < P.E) { check_map_entry(i); }
  workgroupBarrier();
  if (i < P.n) {
    var rank = 0u;
    if (l >= 0) { rank = rank_in_block(li, l, min(${DISPATCH_BLOCK}u, P.n - b * ${DISPATCH_BLOCK}u)); }
    scr[LOCW() + i] = u32(l + 1);
    scr[RANKW() + i] = rank;
  }
  workgroupBarrier();
  if (b < P.nb) { for (var g = li; g < P.G; g += ${DISPATCH_BLOCK}u) { scr[BLKW() + b * P.G + g] = cntW[g]; } }
  if (li == 0u) { scr[ERRW() + b] = atomicLoad(&keyW); }
}
`;
}

/** Two-pass form, pass 2: every workgroup scans the block counts itself and writes its 256 slots, rows and offsets entries. */
export function dispatchLocalWriteWgsl(): string {
  return /* wgsl */ `${DISPATCH_COMMON}
${DISPATCH_IDS}
@group(0) @binding(3) var<storage, read_write> scr: array<u32>;
@group(0) @binding(4) var<storage, read_write> args: array<u32>;
${DISPATCH_WRITE_BINDINGS}
${DISPATCH_STATUS}
${LAYOUT}
${shared(DISPATCH_LOCAL_MAX_G)}
${scan(DISPATCH_LOCAL_MAX_G)}
var<workgroup> baseW: array<u32, ${DISPATCH_LOCAL_MAX_G}>;

${COPY_ARGS}
@compute @workgroup_size(${DISPATCH_BLOCK})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
  let w = wid.y * nwg.x + wid.x;
  clear_counts(li);
  for (var p = li; p < P.nbp; p += ${DISPATCH_BLOCK}u) { fail(scr[ERRW() + p]); }
  for (var g = li; g < P.G; g += ${DISPATCH_BLOCK}u) {
    var total = 0u;
    var base = 0u;
    for (var b = 0u; b < P.nb; b++) {
      if (b == w) { base = total; }
      total += scr[BLKW() + b * P.G + g];
    }
    cntW[g] = total;
    baseW[g] = base;
  }
  workgroupBarrier();
  scan_starts(li);
  let key = key_now(li);
  if (key != NONE) {
    if (w == 0u && li == 0u) {
      report(key);
      copy_args(0u, true);
    }
    return;
  }
  if (w == 0u && li == 0u) {
    scr[1] = startW[P.G];
    copy_args(startW[P.G], false);
  }
  let i = w * ${DISPATCH_BLOCK}u + li;
  if (i < P.n) {
    let l1 = scr[LOCW() + i];
    let l = i32(l1) - 1;
    var at = 0u;
    if (l >= 0) { at = baseW[u32(l)] + scr[RANKW() + i]; }
    write_slot(i, l, at);
  }
  write_row_offs(i);
}
`;
}

/** Local experts and blocks of slots the one-pass grid form takes (its workgroup memory holds two more count arrays). */
export const DISPATCH_GRID_MAX_G = 512;
export const DISPATCH_GRID_MAX_BLOCKS = 32;

/**
 * One pass for several blocks (prefill up to DISPATCH_GRID_MAX_BLOCKS x 256 slots, or hidden at
 * decode): every workgroup reads every slot itself (n / 256 ids per invocation), counting each expert's
 * slots and those before its block with workgroup atomic adds (integers: the order cannot show), and
 * finds every error, so no workgroup waits for another and no scratch links two passes; then its own
 * block's ranks (a loop over the block's earlier slots), the scan and its 256 slots, rows and offsets
 * entries. Workgroup 0 writes the copy's arguments and, after an error, the status slot.
 */
export function dispatchGridWgsl(): string {
  const gmax = DISPATCH_GRID_MAX_G;
  return /* wgsl */ `${DISPATCH_COMMON}
${DISPATCH_IDS}
@group(0) @binding(3) var<storage, read_write> scr: array<u32>;
@group(0) @binding(4) var<storage, read_write> args: array<u32>;
${DISPATCH_WRITE_BINDINGS}
${DISPATCH_STATUS}
${LAYOUT}
${shared(gmax)}
${scan(gmax)}
${COPY_ARGS}
var<workgroup> cntA: array<atomic<u32>, ${gmax}>;
var<workgroup> baseA: array<atomic<u32>, ${gmax}>;

@compute @workgroup_size(${DISPATCH_BLOCK})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
  let w = wid.y * nwg.x + wid.x;
  let first = w * ${DISPATCH_BLOCK}u;
  if (li == 0u) { atomicStore(&keyW, NONE); }
  loc[li] = -1;
  for (var g = li; g < P.G; g += ${DISPATCH_BLOCK}u) {
    atomicStore(&cntA[g], 0u);
    atomicStore(&baseA[g], 0u);
  }
  workgroupBarrier();
  for (var s = li; s < P.n; s += ${DISPATCH_BLOCK}u) {
    let l = local_of(s);
    if (l >= 0) {
      atomicAdd(&cntA[u32(l)], 1u);
      if (s < first) { atomicAdd(&baseA[u32(l)], 1u); }
    }
    if (s >= first && s < first + ${DISPATCH_BLOCK}u) { loc[s - first] = l; }
  }
  if (P.hasMap == 1u) { for (var e = li; e < P.E; e += ${DISPATCH_BLOCK}u) { check_map_entry(e); } }
  workgroupBarrier();
  for (var g = li; g < P.G; g += ${DISPATCH_BLOCK}u) { cntW[g] = atomicLoad(&cntA[g]); }
  let l = loc[li];
  var at = 0u;
  if (l >= 0) {
    at = atomicLoad(&baseA[u32(l)]);
    for (var j = 0u; j < li; j++) { if (loc[j] == l) { at++; } }
  }
  workgroupBarrier();
  scan_starts(li);
  let key = key_now(li);
  if (key != NONE) {
    if (w == 0u && li == 0u) {
      report(key);
      copy_args(0u, true);
    }
    return;
  }
  if (w == 0u && li == 0u) {
    scr[1] = startW[P.G];
    copy_args(startW[P.G], false);
  }
  let i = first + li;
  if (i < P.n) { write_slot(i, l, at); }
  write_row_offs(i);
}
`;
}
