import { rowMapRulesWgsl } from './gemm_rows.js';

/**
 * `grouped-schedule`: one workgroup that reads the runtime offsets on the device, validates them with
 * the rules (and the error codes, OFFS_ERR) of the cpu engine, and writes the tile schedule of the GEMM
 * that follows in the same submit: the indirect dispatch arguments and one (group, first row, end row)
 * entry per M tile. Bad offsets write the status slot and zero dispatch arguments, so the GEMM runs no
 * workgroup and touches nothing out of range. The host never reads the offsets.
 *
 * It is also the one place that reads the other runtime data of a matmul's rows (the cpu engine's
 * load_groups / check_row_maps, same rules, order and codes, ROW_ERR):
 *  - an expert map (attr.setExpertMap): entries checked against [0, experts); each tile then holds
 *    the group's *expert* (weights, bias, their scales / zero points) beside the group itself (src /
 *    dst scales, zero points, binary src1 with one entry per group);
 *  - zero-filled ungrouped rows (attr.setZeroFillUngroupedRows): offsets[0] may be > 0, and the rows
 *    [0, offsets[0]) and [offsets[G], total) get tiles marked ZERO_TILE (the GEMM stores zeros there);
 *  - MoE row maps (gather / scatter): token ids and slots of the routed rows [0, offsets[G]) checked in
 *    row order; a scatter's duplicate (token, slot) pairs found with a per-dst-row "first row" table;
 *  - batched token counts (the `counts` mode): counts[g] in [0, capacity], copied to [4 + g].
 *
 * Schedule buffer (u32): [0..2] indirect args (x = N tiles, y, z), [3] tile count (0 on error),
 * [4 + 4t ..] tile t = (e, m0, m1, g): expert e (= g without a map) and group g. Tiles past 65535
 * fold into z (Y_FOLD per z step). Grouped K (variable K per group) has no table: [4 + g] holds the
 * validated offsets, args = (N tiles, M tiles, G); batched counts likewise hold the validated counts
 * at [4 + g].
 */
export const SCHED_HEADER_WORDS = 4;
export const SCHED_TILE_WORDS = 4;
export const Y_FOLD = 32768;
/** The group word of a tile whose rows are in no group (attr.setZeroFillUngroupedRows): the GEMM stores zeros. */
export const ZERO_TILE = 0xffffffff;

/** Words of the schedule buffer for a problem with `rows` rows (capacity) in `ranges` row ranges and M tile `tm`. */
export function scheduleWords(rows: number, ranges: number, tm: number): number {
  return SCHED_HEADER_WORDS + SCHED_TILE_WORDS * (Math.ceil(rows / tm) + ranges);
}

/**
 * At most how many tiles the schedule writes for `rows` rows (capacity) in `ranges` row ranges: a range
 * of n rows takes ceil(n / tm) <= (n + tm - 1) / tm tiles, and at most min(ranges, rows) ranges hold a row,
 * so the tiles sum to at most (rows + min(ranges, rows) (tm - 1)) / tm. With one-row tiles that is `rows`:
 * a decode grid launches no workgroup that finds no tile.
 */
export function scheduleTileBound(rows: number, ranges: number, tm: number): number {
  return Math.floor((rows + Math.min(ranges, rows) * (tm - 1)) / tm);
}

/**
 * A direct dispatch over `x` column workgroups and at most `tiles` schedule tiles (y, folded into z as the
 * schedule folds its own arguments). Workgroups past the tile count the schedule wrote (S[3], 0 after an
 * error) return at once. Direct rather than indirect: Dawn validates each indirect dispatch with an
 * extra internal dispatch, ~160 us of host time per call on an H200, far more than the GPU time of the
 * few idle workgroups this grid adds.
 */
export function scheduleGrid(x: number, tiles: number): [number, number, number] {
  return [x, Math.min(tiles, Y_FOLD), Math.ceil(tiles / Y_FOLD)];
}

/** What the schedule reads besides the offsets (each adds bindings, so it is part of the pipeline key). */
export interface ScheduleConfig {
  /** attr.setExpertMap: binding 6, `[G]` s32. */
  readonly expertMap: boolean;
  /** MoE row maps: binding 7 token index; a scatter adds binding 8 (slots) and 9 (first-row table). */
  readonly rows: 'none' | 'gather' | 'scatter';
  /** Batched token counts: `offs` holds G counts (no offsets). */
  readonly counts: boolean;
}

export const PLAIN_SCHEDULE: ScheduleConfig = { expertMap: false, rows: 'none', counts: false };

export function groupedScheduleKey(c: ScheduleConfig): string {
  return `grouped-schedule:${c.expertMap ? 'map' : ''}:${c.rows}:${c.counts ? 'counts' : ''}`;
}

/** Bytes of the uniform params. */
export const SCHED_PARAMS_BYTES = 64;

/**
 * Params (uniform, 16 x u32): G, total (extent the offsets may reach; counts: the batch capacity), tm,
 * tilesN, slot (word of the status slot), hasOther (1: a second offsets buffer must equal the primary),
 * kMode (1: grouped K, counts or moe.activation's offsets check, no tile table: args = (tilesN, tilesM, G)), tilesM, hasSizes (1:
 * host-known per-group sizes given), zeroFill, experts (map bound), topK (scatter), tokens (bound of a
 * token id), dstRows (scatter: entries of the first-row table), _, _.
 */
export function groupedScheduleWgsl(c: ScheduleConfig = PLAIN_SCHEDULE): string {
  const map = c.expertMap, gather = c.rows === 'gather', scatter = c.rows === 'scatter';
  const rowMaps = gather || scatter;
  const bindings = [
    map ? '@group(0) @binding(6) var<storage, read> emap: array<i32>;' : '',
    rowMaps ? '@group(0) @binding(7) var<storage, read> tix: array<i32>;' : '',
    scatter ? '@group(0) @binding(8) var<storage, read> tks: array<i32>;' : '',
    scatter ? '@group(0) @binding(9) var<storage, read_write> first: array<atomic<u32>>;' : '',
  ].filter((s) => s).join('\n');
  const mapBad = map ? 'if (g < G && (emap[g] < 0 || emap[g] >= i32(P.experts))) { b = true; }' : '';
  const mapFirst = map ? 'for (var i = 0u; i < G; i++) { if (emap[i] < 0 || emap[i] >= i32(P.experts)) { fail(11u, i, emap[i], i32(P.experts)); return; } }' : '';
  const expertOf = map ? 'u32(emap[g])' : 'g';
  return /* wgsl */ `
struct Params { G: u32, total: u32, tm: u32, tilesN: u32, slot: u32, hasOther: u32, kMode: u32, tilesM: u32, hasSizes: u32, zeroFill: u32, experts: u32, topK: u32, tokens: u32, dstRows: u32, _p0: u32, _p1: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> offs: array<i32>;
@group(0) @binding(2) var<storage, read> other: array<i32>;
@group(0) @binding(3) var<storage, read> sizes: array<i32>;
@group(0) @binding(4) var<storage, read_write> sched: array<u32>;
@group(0) @binding(5) var<storage, read_write> status: array<u32>;
${bindings}

var<workgroup> scan: array<u32, 256>;
var<workgroup> bad: atomic<u32>;
var<workgroup> badAny: u32;
var<workgroup> carry: u32;

fn fail(code: u32, i: u32, x: i32, y: i32) {
  status[P.slot] = code; status[P.slot + 1u] = i; status[P.slot + 2u] = bitcast<u32>(x); status[P.slot + 3u] = bitcast<u32>(y);
}

fn firstBad(x: i32) -> bool {
  return x < 0 || (x != 0 && P.zeroFill == 0u);
}

// The first violation in the cpu engine's rule order, found by one thread (error path only).
fn reportFirst() {
  let G = P.G;
  sched[0] = 0u; sched[1] = 0u; sched[2] = 0u; sched[3] = 0u;
  if (firstBad(offs[0])) { fail(1u, 0u, offs[0], 0); return; }
  for (var i = 1u; i <= G; i++) { if (offs[i] < offs[i - 1u]) { fail(2u, i, offs[i], offs[i - 1u]); return; } }
  if (offs[G] > i32(P.total)) { fail(3u, G, offs[G], i32(P.total)); return; }
  if (P.hasSizes == 1u) { for (var i = 0u; i < G; i++) { if (offs[i + 1u] - offs[i] != sizes[i]) { fail(5u, i, offs[i + 1u] - offs[i], sizes[i]); return; } } }
  if (P.hasOther == 1u) { for (var i = 0u; i <= G; i++) { if (other[i] != offs[i]) { fail(4u, i, other[i], offs[i]); return; } } }
  ${mapFirst}
}
${c.counts ? countsMainWgsl() : offsetsMainWgsl(c, mapBad, expertOf)}
${rowMaps ? rowMapsWgsl(scatter) : ''}
`;
}

/** Batched token counts: the cpu's rules (negative, above the capacity) in group order; valid counts at [4 + g]. */
function countsMainWgsl(): string {
  return /* wgsl */ `
fn countCode(g: u32) -> u32 {
  if (offs[g] < 0) { return 6u; }
  if (offs[g] > i32(P.total)) { return 7u; }
  return 0u;
}

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) li: u32) {
  let G = P.G;
  if (li == 0u) { atomicStore(&bad, 0xffffffffu); }
  workgroupBarrier();
  for (var g = li; g < G; g += 256u) { if (countCode(g) != 0u) { atomicMin(&bad, g); } }
  workgroupBarrier();
  if (li == 0u) { badAny = atomicLoad(&bad); }
  let b = workgroupUniformLoad(&badAny);
  if (b != 0xffffffffu) {
    if (li == 0u) {
      sched[0] = 0u; sched[1] = 0u; sched[2] = 0u; sched[3] = 0u;
      let code = countCode(b);
      fail(code, b, offs[b], select(0, i32(P.total), code == 7u));
    }
    return;
  }
  for (var g = li; g < G; g += 256u) { sched[4u + g] = u32(offs[g]); }
  if (li == 0u) { sched[0] = P.tilesN; sched[1] = P.tilesM; sched[2] = G; sched[3] = 1u; }
}`;
}

function offsetsMainWgsl(c: ScheduleConfig, mapBad: string, expertOf: string): string {
  const rowMaps = c.rows !== 'none';
  return /* wgsl */ `
fn tileAt(i: u32, e: u32, m0: u32, m1: u32, g: u32) {
  let t = 4u + 4u * i;
  sched[t] = e; sched[t + 1u] = m0; sched[t + 2u] = m1; sched[t + 3u] = g;
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
    if (g == 0u) { b = firstBad(x); }
    else { b = x < offs[g - 1u]; }
    if (g == G && x > i32(P.total)) { b = true; }
    if (P.hasOther == 1u && other[g] != x) { b = true; }
    if (P.hasSizes == 1u && g < G && offs[g + 1u] - x != sizes[g]) { b = true; }
    ${mapBad}
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
  ${rowMaps ? 'if (!rowMapsOk(li, u32(offs[G]))) { return; }' : ''}
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
      let e = ${expertOf};
      for (var j = 0u; j < c; j++) { tileAt(start + j, e, m0 + j * P.tm, min(m0 + (j + 1u) * P.tm, m1), g); }
    }
    workgroupBarrier();
    if (li == 255u) { carry = start + c; }
    workgroupBarrier();
  }
  var n = workgroupUniformLoad(&carry);
  if (P.zeroFill == 1u) {
    // Rows in no group: [0, offs[0]) then [offs[G], total), ZERO_TILE tiles after the groups'.
    let lead = u32(offs[0]);
    let tail0 = u32(offs[G]);
    let c0 = (lead + P.tm - 1u) / P.tm;
    let c1 = (P.total - tail0 + P.tm - 1u) / P.tm;
    for (var j = li; j < c0 + c1; j += 256u) {
      if (j < c0) { tileAt(n + j, ${ZERO_TILE}u, j * P.tm, min((j + 1u) * P.tm, lead), 0u); }
      else { let i = j - c0; tileAt(n + j, ${ZERO_TILE}u, tail0 + i * P.tm, min(tail0 + (i + 1u) * P.tm, P.total), 0u); }
    }
    n += c0 + c1;
  }
  if (li == 0u) {
    sched[0] = P.tilesN;
    sched[1] = min(n, ${Y_FOLD}u);
    sched[2] = (n + ${Y_FOLD - 1}u) / ${Y_FOLD}u;
    sched[3] = n;
  }
}`;
}

/**
 * The row maps of the routed rows [0, rows), checked like the cpu's check_row_maps: the first row (in
 * row order) that breaks a rule reports it. A scatter's duplicates: every valid row puts ~row into
 * first[token * topK + slot] with atomicMax (the earliest row wins, whatever the thread order); a
 * row whose entry names an earlier row repeats that row's pair. Returns false (schedule zeroed, status
 * written) on a violation; uniform across the workgroup.
 */
function rowMapsWgsl(scatter: boolean): string {
  return /* wgsl */ `
var<workgroup> badRow: atomic<u32>;
var<workgroup> badRowU: u32;
${rowMapRulesWgsl({ prefix: '', ti: 'tix', ks: 'tks', scatter, fail: 'fail' })}

fn rowMapsOk(li: u32, rows: u32) -> bool {
  if (li == 0u) { atomicStore(&badRow, 0xffffffffu); }
  ${scatter ? 'for (var d = li; d < P.dstRows; d += 256u) { atomicStore(&first[d], 0u); }' : ''}
  storageBarrier();
  workgroupBarrier();
  for (var r = li; r < rows; r += 256u) {
    if (row_code(r) != 0u) { atomicMin(&badRow, r); }
    ${scatter ? 'else if (tix[r] >= 0) { atomicMax(&first[u32(tix[r]) * P.topK + u32(tks[r])], ~r); }' : ''}
  }
  storageBarrier();
  workgroupBarrier();
  ${scatter ? `for (var r = li; r < rows; r += 256u) {
    if (row_code(r) == 0u && tix[r] >= 0 && ~atomicLoad(&first[u32(tix[r]) * P.topK + u32(tks[r])]) < r) { atomicMin(&badRow, r); }
  }
  workgroupBarrier();` : ''}
  if (li == 0u) { badRowU = atomicLoad(&badRow); }
  let b = workgroupUniformLoad(&badRowU);
  if (b == 0xffffffffu) { return true; }
  if (li == 0u) {
    sched[0] = 0u; sched[1] = 0u; sched[2] = 0u; sched[3] = 0u;
    report_row(b);
  }
  return false;
}`;
}

/**
 * The schedule inside the GEMM at decode sizes (no dispatch of its own): each workgroup of the GEMM
 * validates the runtime offsets, expert map and row maps itself (the rules, order and codes of the
 * schedule above; every read clamped to what the rules allow), then finds its (group, rows) tile from
 * the offsets with a workgroup prefix sum of the per-group tile counts. After a violation no
 * workgroup touches anything, and the designated workgroup (`report`) writes the status slot. One
 * chunk of 256 groups and 256 rows (INLINE_MAX_GROUPS / ROWS): the cost per workgroup stays a few
 * barriers.
 */
export const INLINE_MAX_GROUPS = 256;
export const INLINE_MAX_ROWS = 256;

/** What the in-kernel schedule reads (each adds bindings: part of the pipeline key). */
export interface InlineScheduleConfig {
  readonly expertMap: boolean;
  readonly rows: 'none' | 'gather' | 'scatter';
  /** A second offsets buffer may have to equal the primary (runtime: P.hasOther). */
  readonly other: boolean;
  /** Host-known per-group sizes to check. */
  readonly sizes: boolean;
  /** Rows per tile. */
  readonly tm: number;
}

/** Bindings of the in-kernel schedule (the row maps use the GEMM's token index / slots bindings). */
export const INLINE_OFFS_BINDING = 30;
export const INLINE_OTHER_BINDING = 31;
export const INLINE_SIZES_BINDING = 32;
export const INLINE_STATUS_BINDING = 33;
export const INLINE_MAP_BINDING = 34;

export function inlineScheduleKey(c: InlineScheduleConfig): string {
  return `isched${c.expertMap ? 'M' : ''}${c.other ? 'O' : ''}${c.sizes ? 'S' : ''}-${c.rows}`;
}

/** The bindings a pass with the in-kernel schedule adds (`report`: the status slot too). */
export function inlineScheduleBindings(c: InlineScheduleConfig, report: boolean): number[] {
  const out = [INLINE_OFFS_BINDING];
  if (c.other) out.push(INLINE_OTHER_BINDING);
  if (c.sizes) out.push(INLINE_SIZES_BINDING);
  if (report) out.push(INLINE_STATUS_BINDING);
  if (c.expertMap) out.push(INLINE_MAP_BINDING);
  return out;
}

/**
 * WGSL of the in-kernel schedule: `fn sched_tile(li, t, designated) -> vec4u` = (group + 1, its
 * expert (the group without a map) or ZERO_TILE, m0, m1) for tile t (x = 1 on a ZERO_TILE tile), (0,
 * ..) past the last tile or after a violation. Called by every invocation in uniform control flow. Needs in the pass's `Params P`: G, total, hasOther, hasSizes,
 * zeroFill, experts, topK, tokens; and (row maps) `TI` / `KS` declared by the pass. `report`: this
 * pass declares the status binding and reports (its designated workgroup does).
 *
 * Three barriers, since every workgroup of the GEMM runs it (thousands at decode with K splits):
 * (A) each invocation checks its group's offsets rules, its routed row's maps (row index clamped to
 * the capacity, so the reads stay in range whatever the offsets say) and counts its group's tiles;
 * (B) a scatter's duplicates against earlier rows, and the tile counts summed in 16 chunks of 16;
 * (C) one invocation turns the chunk sums into starts, decides (and on the designated workgroup
 * reports) the first violation; (D) each group's invocation finds whether tile t is one of its own.
 * Workgroup memory starts zeroed (WGSL), so the flags need no initialising barrier.
 */
export function inlineScheduleWgsl(c: InlineScheduleConfig, report: boolean): string {
  const map = c.expertMap, gather = c.rows === 'gather', scatter = c.rows === 'scatter';
  const rowMaps = gather || scatter;
  const tm = c.tm;
  const decl = [
    `@group(0) @binding(${INLINE_OFFS_BINDING}) var<storage, read> OFFS: array<i32>;`,
    c.other ? `@group(0) @binding(${INLINE_OTHER_BINDING}) var<storage, read> OTHER: array<i32>;` : '',
    c.sizes ? `@group(0) @binding(${INLINE_SIZES_BINDING}) var<storage, read> SIZES: array<i32>;` : '',
    report ? `@group(0) @binding(${INLINE_STATUS_BINDING}) var<storage, read_write> STATUS: array<u32>;` : '',
    map ? `@group(0) @binding(${INLINE_MAP_BINDING}) var<storage, read> EMAP: array<i32>;` : '',
  ].filter((s) => s).join('\n');
  const fail = report ? `fn sc_fail(code: u32, i: u32, x: i32, y: i32) {
  STATUS[0] = code; STATUS[1] = i; STATUS[2] = bitcast<u32>(x); STATUS[3] = bitcast<u32>(y);
}

// The first violation of the offsets in the cpu engine's rule order, by one invocation (error path only).
fn sc_report_offsets() {
  let G = P.G;
  if (sc_first_bad(OFFS[0])) { sc_fail(1u, 0u, OFFS[0], 0); return; }
  for (var i = 1u; i <= G; i++) { if (OFFS[i] < OFFS[i - 1u]) { sc_fail(2u, i, OFFS[i], OFFS[i - 1u]); return; } }
  if (OFFS[G] > i32(P.total)) { sc_fail(3u, G, OFFS[G], i32(P.total)); return; }
  ${c.sizes ? 'if (P.hasSizes == 1u) { for (var i = 0u; i < G; i++) { if (OFFS[i + 1u] - OFFS[i] != SIZES[i]) { sc_fail(5u, i, OFFS[i + 1u] - OFFS[i], SIZES[i]); return; } } }' : ''}
  ${c.other ? 'if (P.hasOther == 1u) { for (var i = 0u; i <= G; i++) { if (OTHER[i] != OFFS[i]) { sc_fail(4u, i, OTHER[i], OFFS[i]); return; } } }' : ''}
  ${map ? 'for (var i = 0u; i < G; i++) { if (EMAP[i] < 0 || EMAP[i] >= i32(P.experts)) { sc_fail(11u, i, EMAP[i], i32(P.experts)); return; } }' : ''}
}
` : '';
  const reportIt = report ? `if (designated && !ok) {
      if (atomicLoad(&sc_bad) != 0u) { sc_report_offsets(); }
      ${rowMaps ? 'else { sc_report_row(~atomicLoad(&sc_row)); }' : ''}
    }` : '';
  return /* wgsl */ `
${decl}
var<workgroup> sc_c: array<u32, 256>;
var<workgroup> sc_chunk: array<u32, 16>;
var<workgroup> sc_bad: atomic<u32>;
// ~(first bad routed row), 0: none.
var<workgroup> sc_row: atomic<u32>;
var<workgroup> sc_ok: u32;
var<workgroup> sc_n: u32;
var<workgroup> sc_tile: vec4u;
${scatter ? 'var<workgroup> sc_key: array<i32, 256>;' : ''}

fn sc_first_bad(x: i32) -> bool {
  return x < 0 || (x != 0 && P.zeroFill == 0u);
}
${fail}
${rowMaps ? rowMapRulesWgsl({ prefix: 'sc_', ti: 'TI', ks: 'KS', scatter, fail: report ? 'sc_fail' : undefined }) : ''}

fn sched_tile(li: u32, t: u32, designated: bool) -> vec4u {
  let G = P.G;
  // (A) The offsets rules (and the expert map), one group per invocation (G <= 256); tiles per group.
  for (var g = li; g <= G; g += 256u) {
    let x = OFFS[g];
    var b = false;
    if (g == 0u) { b = sc_first_bad(x); } else { b = x < OFFS[g - 1u]; }
    if (g == G && x > i32(P.total)) { b = true; }
    ${c.other ? 'if (P.hasOther == 1u && OTHER[g] != x) { b = true; }' : ''}
    ${c.sizes ? 'if (P.hasSizes == 1u && g < G && OFFS[g + 1u] - x != SIZES[g]) { b = true; }' : ''}
    ${map ? 'if (g < G && (EMAP[g] < 0 || EMAP[g] >= i32(P.experts))) { b = true; }' : ''}
    if (b) { atomicOr(&sc_bad, 1u); }
  }
  var c = 0u;
  if (li < G) { c = (u32(OFFS[li + 1u] - OFFS[li]) + ${tm - 1}u) / ${tm}u; }
  sc_c[li] = c;
  ${rowMaps ? `// The row maps of the routed rows [0, offs[G]) (at most 256: one per invocation).
  let rows = min(u32(max(OFFS[G], 0)), P.total);
  if (li < rows) {
    let code = sc_row_code(li);
    if (code != 0u) { atomicMax(&sc_row, ~li); }
    ${scatter ? 'sc_key[li] = select(-1, TI[li] * i32(P.topK) + KS[li], code == 0u && TI[li] >= 0);' : ''}
  }` : ''}
  workgroupBarrier();
  // (B) A scatter's duplicate (token, slot) pairs: the later row of a pair breaks the rule; chunk sums.
  ${scatter ? `if (li < rows && sc_key[li] >= 0) {
    for (var j = 0u; j < li; j++) { if (sc_key[j] == sc_key[li]) { atomicMax(&sc_row, ~li); break; } }
  }` : ''}
  if (li < 16u) {
    var s = 0u;
    for (var j = 0u; j < 16u; j++) { s += sc_c[li * 16u + j]; }
    sc_chunk[li] = s;
  }
  workgroupBarrier();
  // (C) Chunk starts; the verdict (reported by the designated workgroup).
  if (li == 0u) {
    var s = 0u;
    for (var j = 0u; j < 16u; j++) { let x = sc_chunk[j]; sc_chunk[j] = s; s += x; }
    sc_n = s;
    let ok = atomicLoad(&sc_bad) == 0u${rowMaps ? ' && atomicLoad(&sc_row) == 0u' : ''};
    sc_ok = select(0u, 1u, ok);
    ${reportIt}
  }
  workgroupBarrier();
  // (D) The group holding tile t (or, past the groups' tiles, a zero-fill tile).
  if (sc_ok == 1u) {
    if (li < G) {
      var start = sc_chunk[li / 16u];
      for (var j = li & ~15u; j < li; j++) { start += sc_c[j]; }
      if (t >= start && t < start + c) {
        let m0 = u32(OFFS[li]) + (t - start) * ${tm}u;
        sc_tile = vec4u(li + 1u, ${map ? 'u32(EMAP[li])' : 'li'}, m0, min(m0 + ${tm}u, u32(OFFS[li + 1u])));
      }
    }
    if (P.zeroFill == 1u && li == 0u && t >= sc_n) {
      // Rows in no group: [0, offs[0]) then [offs[G], total), ZERO_TILE tiles after the groups'.
      let lead = u32(OFFS[0]);
      let tail0 = u32(OFFS[G]);
      let c0 = (lead + ${tm - 1}u) / ${tm}u;
      let c1 = (P.total - tail0 + ${tm - 1}u) / ${tm}u;
      let j = t - sc_n;
      if (j < c0) { sc_tile = vec4u(1u, ${ZERO_TILE}u, j * ${tm}u, min((j + 1u) * ${tm}u, lead)); }
      else if (j < c0 + c1) { let i = j - c0; sc_tile = vec4u(1u, ${ZERO_TILE}u, tail0 + i * ${tm}u, min(tail0 + (i + 1u) * ${tm}u, P.total)); }
    }
  }
  return workgroupUniformLoad(&sc_tile);
}
`;
}
