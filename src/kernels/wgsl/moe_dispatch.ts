/**
 * moe.dispatch on the device: a stable counting sort of the T k routed slots by local expert, in five
 * dispatches of one compute pass (the placement of wasm/src/moe-dispatch.c, deterministic without
 * float atomics; integer atomics only where their order cannot show):
 *
 * 1. `place`: one invocation per slot (256 per block) validates its id (range; in the batched format no
 *    repeat within the token) and maps it to a local expert; the first E invocations check the expert
 *    map. Within its block a slot's rank among the block's slots of the same expert is counted in
 *    workgroup memory; the block's count per expert goes to the scratch.
 * 2. `scan`: one workgroup turns the per-block counts into each block's base per expert, the expert
 *    counts (batched: checked against the capacity) and the padded expert starts (an exclusive scan),
 *    and writes the indirect arguments of the copy (zero after an error).
 * 3. `write`: row_of, token_index and token_ks of every slot, -1 on rows no slot takes, and the offsets
 *    (or the batched counts). Row of slot i = start[l] + base[block(i), l] + rank[i]: ascending token,
 *    then slot, within each expert.
 * 4. `copy` (with hidden): every routed row's hidden values, zeros on alignment padding.
 * 5. `report`: after an error, the first violation in the cpu's order written to the status slot; and
 *    the flag and block counts zeroed, as the next execution's place pass needs them (the scan rewrites
 *    the counts and starts in full), so no clear of the scratch precedes an execution.
 *
 * This storage-scratch form runs where the workgroup-memory forms of moe_dispatch_local.ts do not fit
 * (more than DISPATCH_LOCAL_MAX_G local experts or DISPATCH_LOCAL_MAX_BLOCKS blocks of slots); its
 * hidden copy (pass 4) serves both.
 *
 * Errors are ranked by a key (slot i: i; map entry e: n + e; expert g over capacity: n + E + g) and the
 * smallest is kept in scratch word 0 by an integer atomicMax of its complement (0: none); passes 3 and 4
 * write nothing once it is set.
 */

/** Slots per block of the place pass (its workgroup size). */
export const DISPATCH_BLOCK = 256;

/** Words of the scratch buffer: flag, used rows, 2 spare, counts [G], starts [G + 1], block bases [nb, G], local ids [n], ranks [n]. */
export function dispatchScratchWords(n: number, G: number): number {
  const nb = Math.ceil(n / DISPATCH_BLOCK);
  return 5 + 2 * G + nb * G + 2 * n;
}


/**
 * Params (uniform, u32): n = T k, k, E, G, R (routed-row capacity), cap (batched), block (alignment),
 * batched, nb (blocks), slot (status word), K, hld (hidden row stride), hasMap, maxDim (workgroups per
 * grid dimension), half (16-bit hidden), nbp (place workgroups of moe_dispatch_local.ts's two-pass form).
 */
export const DISPATCH_COMMON = /* wgsl */ `
struct Params { n: u32, k: u32, E: u32, G: u32, R: u32, cap: u32, block: u32, batched: u32, nb: u32, slot: u32, K: u32, hld: u32, hasMap: u32, maxDim: u32, half: u32, nbp: u32 }
@group(0) @binding(0) var<uniform> P: Params;
fn CNT() -> u32 { return 4u; }
fn START() -> u32 { return 4u + P.G; }
fn BLK() -> u32 { return 5u + 2u * P.G; }
fn LOC() -> u32 { return BLK() + P.nb * P.G; }
fn RANK() -> u32 { return LOC() + P.n; }
`;

const SCRATCH_RW = '@group(0) @binding(3) var<storage, read_write> scr: array<atomic<u32>>;';
export const DISPATCH_ID_BINDING = '@group(0) @binding(1) var<storage, read> ids: array<i32>;';
export const DISPATCH_EMAP = '@group(0) @binding(2) var<storage, read> emap: array<i32>;';
export const DISPATCH_IDS = `${DISPATCH_ID_BINDING}\n${DISPATCH_EMAP}`;
const FAIL = 'fn fail_key(key: u32) { atomicMax(&scr[0], 0xffffffffu - key); }';
const GID = '(wid.y * nwg.x + wid.x) * 256u + li';
const BUILTINS = '@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32';

/** `place(b, li)`: slot b * 256 + li validated, mapped, ranked within block b; the block's count per expert. */
const PLACE_FN = /* wgsl */ `
var<workgroup> loc: array<i32, ${DISPATCH_BLOCK}>;

fn place(b: u32, li: u32) {
  let i = b * ${DISPATCH_BLOCK}u + li;
  var l = -1;
  if (i < P.n) {
    let e = ids[i];
    if (e < 0 || e >= i32(P.E)) {
      fail_key(i);
    } else {
      var dup = false;
      if (P.batched == 1u) {
        for (var s = i - i % P.k; s < i; s++) { if (ids[s] == e) { dup = true; } }
      }
      if (dup) {
        fail_key(i);
      } else {
        l = e;
        if (P.hasMap == 1u) { l = emap[u32(e)]; }
        // A bad map entry is reported by its own check; its slots are placed nowhere.
        if (l < -1 || l >= i32(P.G)) { l = -1; }
      }
    }
    atomicStore(&scr[LOC() + i], u32(l + 1));
  }
  loc[li] = l;
  workgroupBarrier();
  if (l >= 0) {
    var before = 0u;
    var after = 0u;
    for (var j = 0u; j < ${DISPATCH_BLOCK}u; j++) {
      if (loc[j] == l) {
        if (j < li) { before++; } else if (j > li) { after++; }
      }
    }
    atomicStore(&scr[RANK() + i], before);
    if (after == 0u) { atomicStore(&scr[BLK() + b * P.G + u32(l)], before + 1u); }
  }
}

fn check_map_entry(e: u32) {
  let v = emap[e];
  if (v < -1 || v >= i32(P.G)) { fail_key(P.n + e); }
}
`;

export function dispatchPlaceWgsl(): string {
  return /* wgsl */ `${DISPATCH_COMMON}
${DISPATCH_IDS}
${SCRATCH_RW}
${FAIL}
${PLACE_FN}
@compute @workgroup_size(${DISPATCH_BLOCK})
fn main(${BUILTINS}) {
  let b = wid.y * nwg.x + wid.x;
  place(b, li);
  let i = b * ${DISPATCH_BLOCK}u + li;
  if (P.hasMap == 1u && i < P.E) { check_map_entry(i); }
}
`;
}

/**
 * `scan(li)` (one workgroup): per expert, the blocks' counts turned into bases, the count, the padded
 * start; then the starts' end and the used rows (scr[1]).
 */
const SCAN_FN = /* wgsl */ `
var<workgroup> sh: array<u32, 256>;
var<workgroup> carry: u32;

fn scan(li: u32) {
  if (li == 0u) { carry = 0u; }
  workgroupBarrier();
  for (var base = 0u; base < P.G; base += 256u) {
    let g = base + li;
    var c = 0u;
    if (g < P.G) {
      var run = 0u;
      for (var b = 0u; b < P.nb; b++) {
        let at = BLK() + b * P.G + g;
        let x = atomicLoad(&scr[at]);
        atomicStore(&scr[at], run);
        run += x;
      }
      c = run;
      atomicStore(&scr[CNT() + g], run);
      if (P.batched == 1u && run > P.cap) { fail_key(P.n + P.E + g); }
    }
    let padded = (c + P.block - 1u) / P.block * P.block;
    sh[li] = padded;
    workgroupBarrier();
    for (var s = 1u; s < 256u; s <<= 1u) {
      var v = 0u;
      if (li >= s) { v = sh[li - s]; }
      workgroupBarrier();
      sh[li] += v;
      workgroupBarrier();
    }
    let start = carry + sh[li] - padded;
    if (g < P.G) { atomicStore(&scr[START() + g], select(start, g * P.cap, P.batched == 1u)); }
    workgroupBarrier();
    if (li == 255u) { carry = start + padded; }
    workgroupBarrier();
  }
  storageBarrier();
  workgroupBarrier();
  if (li == 0u) {
    atomicStore(&scr[START() + P.G], select(carry, P.G * P.cap, P.batched == 1u));
    atomicStore(&scr[1], select(carry, P.R, P.batched == 1u));
  }
}
`;

export function dispatchScanWgsl(): string {
  return /* wgsl */ `${DISPATCH_COMMON}
${SCRATCH_RW}
@group(0) @binding(4) var<storage, read_write> args: array<u32>;
${FAIL}
${SCAN_FN}
@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) li: u32) {
  scan(li);
  if (li == 0u) {
    let used = atomicLoad(&scr[1]);
    let count = select(used * P.K, (used * P.K + 1u) / 2u, P.half == 1u);
    let wg = (count + 255u) / 256u;
    var x = min(wg, P.maxDim);
    var y = 0u;
    if (x > 0u) { y = (wg + x - 1u) / x; }
    if (atomicLoad(&scr[0]) != 0u) { x = 0u; y = 0u; }
    args[0] = x;
    args[1] = y;
    args[2] = 1u;
  }
}
`;
}

export const DISPATCH_WRITE_BINDINGS = /* wgsl */ `
@group(0) @binding(5) var<storage, read_write> rowOf: array<i32>;
@group(0) @binding(6) var<storage, read_write> ti: array<i32>;
@group(0) @binding(7) var<storage, read_write> ks: array<i32>;
@group(0) @binding(8) var<storage, read_write> offs: array<i32>;`;

/** `write_at(i)`: row_of of slot i, token index / k of routed row i (-1 on free rows), offsets (or counts) entry i. */
const WRITE_FN = /* wgsl */ `
fn cnt(g: u32) -> u32 { return atomicLoad(&scr[CNT() + g]); }
fn start(g: u32) -> u32 { return atomicLoad(&scr[START() + g]); }

fn write_at(i: u32) {
  if (i < P.n) {
    let l1 = atomicLoad(&scr[LOC() + i]);
    if (l1 == 0u) {
      rowOf[i] = -1;
    } else {
      let l = l1 - 1u;
      let pos = start(l) + atomicLoad(&scr[BLK() + (i / ${DISPATCH_BLOCK}u) * P.G + l]) + atomicLoad(&scr[RANK() + i]);
      rowOf[i] = i32(pos);
      ti[pos] = i32(i / P.k);
      ks[pos] = i32(i % P.k);
    }
  }
  if (i < P.R) {
    // Rows no slot takes (alignment padding, unused capacity): token -1.
    var free = false;
    if (P.batched == 1u) {
      let g = i / P.cap;
      free = i - g * P.cap >= cnt(g);
    } else if (i >= start(P.G)) {
      free = true;
    } else {
      var lo = 0u;
      var hi = P.G;
      while (hi - lo > 1u) {
        let mid = (lo + hi) / 2u;
        if (start(mid) <= i) { lo = mid; } else { hi = mid; }
      }
      free = i - start(lo) >= cnt(lo);
    }
    if (free) {
      ti[i] = -1;
      ks[i] = -1;
    }
  }
  if (P.batched == 1u) {
    if (i < P.G) { offs[i] = i32(cnt(i)); }
  } else if (i <= P.G) {
    offs[i] = i32(start(i));
  }
}
`;

export function dispatchWriteWgsl(): string {
  return /* wgsl */ `${DISPATCH_COMMON}
${SCRATCH_RW}
${DISPATCH_WRITE_BINDINGS}
${WRITE_FN}
@compute @workgroup_size(256)
fn main(${BUILTINS}) {
  if (atomicLoad(&scr[0]) != 0u) { return; }
  write_at(${GID});
}
`;
}

/**
 * The hidden copy: f32 one element per invocation (bits copied), 16-bit one u32 word (two halves) per
 * invocation. Dispatched over the rows' capacity (invocations past the used rows return) or, for a
 * large capacity, indirectly over the used rows; either way it copies nothing when the grid the
 * placing pass wrote (`cargs`, zero after an error) is empty.
 */
export function dispatchCopyWgsl(half: boolean): string {
  const body = half ? /* wgsl */ `
  let total = used * P.K;
  if (2u * j >= total) { return; }
  var word = 0u;
  var keep = 0u;
  var changed = false;
  for (var h = 0u; h < 2u; h++) {
    let e = 2u * j + h;
    var take = false;
    var v = 0u;
    if (e < total) {
      let r = e / P.K;
      let c = e - r * P.K;
      let t = ti[r];
      if (t >= 0) {
        let s = u32(t) * P.hld + c;
        v = (hid[s >> 1u] >> ((s & 1u) * 16u)) & 0xffffu;
        take = true;
      } else if (P.batched == 0u) {
        take = true;
      }
    }
    if (take) { word |= v << (16u * h); changed = true; } else { keep |= 0xffffu << (16u * h); }
  }
  if (!changed) { return; }
  if (keep != 0u) { word |= dst[j] & keep; }
  dst[j] = word;` : /* wgsl */ `
  if (j >= used * P.K) { return; }
  let r = j / P.K;
  let c = j - r * P.K;
  let t = ti[r];
  if (t >= 0) { dst[j] = hid[u32(t) * P.hld + c]; } else if (P.batched == 0u) { dst[j] = 0u; }`;
  return /* wgsl */ `${DISPATCH_COMMON}
@group(0) @binding(3) var<storage, read> scr: array<u32>;
@group(0) @binding(4) var<storage, read> cargs: array<u32>;
@group(0) @binding(6) var<storage, read> ti: array<i32>;
@group(0) @binding(9) var<storage, read> hid: array<u32>;
@group(0) @binding(10) var<storage, read_write> dst: array<u32>;

@compute @workgroup_size(256)
fn main(${BUILTINS}) {
  if (cargs[0] == 0u) { return; }
  let j = ${GID};
  let used = scr[1];${body}
}
`;
}

export const DISPATCH_STATUS = '@group(0) @binding(11) var<storage, read_write> status: array<u32>;';

/**
 * WGSL `report`: the violation of dispatch error `key` (a slot id, then an expert map entry, then an
 * expert over capacity: its count read by `count`, an i32 expression of i) written to the status slot
 * with its words. `head` opens the function and defines `key`. Shared by every dispatch form.
 */
export function reportFnWgsl(head: string, count: string): string {
  return /* wgsl */ `
${head}
  var code = 0u;
  var i = 0u;
  var a = 0;
  var b = 0;
  if (key < P.n) {
    i = key;
    let e = ids[key];
    a = e;
    if (e < 0 || e >= i32(P.E)) {
      code = 120u;
      b = i32(P.E);
    } else {
      code = 121u;
      for (var s = key - key % P.k; s < key; s++) {
        if (ids[s] == e) { b = i32(s % P.k); break; }
      }
    }
  } else if (key < P.n + P.E) {
    code = 122u;
    i = key - P.n;
    a = emap[i];
    b = i32(P.G);
  } else {
    code = 123u;
    i = key - P.n - P.E;
    a = ${count};
    b = i32(P.cap);
  }
  status[P.slot] = code;
  status[P.slot + 1u] = i;
  status[P.slot + 2u] = bitcast<u32>(a);
  status[P.slot + 3u] = bitcast<u32>(b);
}
`;
}

/** `report(f)`: the violation of flag value f (its key inverted) written to the status slot, with its words. */
const REPORT_FN = reportFnWgsl('fn report(f: u32) {\n  let key = 0xffffffffu - f;', 'i32(atomicLoad(&scr[CNT() + i]))');

/** The flag and block counts zeroed for the next execution (after everything of this one read them). */
const RESET = /* wgsl */ `
  for (var j = li; j < P.nb * P.G; j += 256u) { atomicStore(&scr[BLK() + j], 0u); }
  if (li == 0u) {
    atomicStore(&scr[0], 0u);
    if (f != 0u) { report(f); }
  }`;

export function dispatchReportWgsl(): string {
  return /* wgsl */ `${DISPATCH_COMMON}
${DISPATCH_IDS}
${SCRATCH_RW}
${DISPATCH_STATUS}
${REPORT_FN}
var<workgroup> flagW: u32;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) li: u32) {
  if (li == 0u) { flagW = atomicLoad(&scr[0]); }
  let f = workgroupUniformLoad(&flagW);
${RESET}
}
`;
}
