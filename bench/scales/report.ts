/** Terminal table, Markdown and self-contained HTML (inline SVG) renderings of the scales results. */
import { FAMILIES, type Family, type Recipe } from './recipes.js';
import type { ErrorStats } from './metrics.js';

export interface Bytes {
  readonly weights: number;
  readonly scales: number;
  readonly zeroPoints: number;
  readonly global: number;
  readonly total: number;
  readonly bitsPerWeight: number;
  /** f32 weight bytes / total. */
  readonly compression: number;
}

export interface Result {
  readonly recipe: Recipe;
  readonly srcDesc: string;
  readonly weiDesc: string;
  /** The attribute calls, as code. */
  readonly calls: readonly string[];
  readonly bytes: Bytes;
  /** Relative Frobenius error of the dequantized operands vs the f32 originals. */
  readonly opErr: { readonly src: number; readonly wei: number };
  /** Who quantized each operand (`tool`, or a library helper such as `quant.perBlockMx`). */
  readonly quantBy: { readonly src: string; readonly wei: string };
  /** Library quantizer vs the tool's: a note on agreement (empty if no library helper was used). */
  readonly libAgree: string;
  readonly status: 'ok' | 'rejected' | 'failed';
  /** Library message when rejected / failed; for a recipe that ran, the failure worked around (threads=1 fallback). */
  readonly message?: string;
  readonly stage?: string;
  /** Error of the library result vs the float64 product of the f32 operands (all rows). */
  readonly err?: ErrorStats;
  /** Library result vs the float64 product of the dequantized operands (sampled rows): should be ~1e-7. */
  readonly implCheck?: { readonly relFro: number; readonly maxRel: number };
  /** Not run by the library: the tool's float64 emulation error on the sampled rows. */
  readonly emulated?: ErrorStats;
  readonly time?: { readonly median: number; readonly min: number; readonly max: number; readonly runs: number };
  readonly gflops?: number;
  readonly implInfo?: string;
}

export interface Check {
  readonly name: string;
  readonly pass: boolean | undefined;
  readonly detail: string;
}

export interface RunInfo {
  readonly command: string;
  readonly date: string;
  readonly node: string;
  readonly cores: number;
  readonly threads: number;
  readonly commit: string;
  readonly workload: string;
  readonly sizes: readonly number[];
  readonly outliers: string;
  readonly totalSeconds: number;
  readonly flops: number;
  readonly selfTest: string;
  readonly notes: readonly string[];
}

// ----------------------------------------------------------------------------------------------
// number formatting
// ----------------------------------------------------------------------------------------------

export function sci(x: number | undefined, digits = 2): string {
  if (x === undefined || x !== x) return '-';
  if (x === 0) return '0';
  const a = Math.abs(x);
  if (a >= 0.01 && a < 1000) return x.toPrecision(digits + 1).replace(/(\.\d*?)0+$/, '$1').replace(/\.$/, '');
  return x.toExponential(digits - 1 < 0 ? 0 : digits - 1).replace('e-', 'e-').replace('e+', 'e');
}

function fix(x: number | undefined, d: number): string {
  return x === undefined || x !== x ? '-' : x.toFixed(d);
}

function shortImpl(s: string | undefined): string {
  return s ?? '-';
}

/** The library computed what the recipe says (its output matches the float64 dequantized product). */
export const IMPL_TOL = 1e-5;
export function implOk(r: Result): boolean {
  return r.implCheck !== undefined && r.implCheck.relFro < IMPL_TOL;
}

/**
 * Recipes on the error-vs-size Pareto frontier: no other recipe that ran has both fewer (or equal)
 * bits per weight and a lower error.
 */
export function paretoIds(results: readonly Result[]): Set<string> {
  const ok = results.filter((r) => r.status === 'ok' && r.err && implOk(r));
  return new Set(ok.filter((r) => !ok.some((o) => o !== r && o.bytes.bitsPerWeight <= r.bytes.bitsPerWeight && o.err!.relFro < r.err!.relFro)).map((r) => r.recipe.id));
}

// ----------------------------------------------------------------------------------------------
// table (shared by terminal and Markdown)
// ----------------------------------------------------------------------------------------------

const HEAD = ['recipe', 'src', 'weights', 'bits/w', 'MB w+s', 'x f32', 'rel.Frob', 'max abs', 'cosine', 'SQNR dB', 'median ms', 'GFLOP/s', 'impl', 'check'];

function rowCells(r: Result, pareto: Set<string>): string[] {
  const b = r.bytes;
  const ok = r.status === 'ok';
  return [
    r.recipe.id + (pareto.has(r.recipe.id) ? ' *' : ''),
    r.srcDesc,
    r.weiDesc,
    fix(b.bitsPerWeight, 2),
    fix(b.total / 1e6, 2),
    fix(b.compression, 2),
    ok ? sci(r.err?.relFro, 3) : r.status,
    ok ? sci(r.err?.maxAbs, 3) : '',
    ok ? (r.err ? r.err.cosine.toFixed(6) : '-') : '',
    ok ? fix(r.err?.sqnrDb, 1) : '',
    ok ? fix(r.time?.median, 1) + (r.time && r.time.runs < 3 ? `(n${r.time.runs})` : '') : '',
    ok ? fix(r.gflops, 2) : '',
    ok ? shortImpl(r.implInfo) : '',
    ok && r.implCheck ? sci(r.implCheck.relFro, 1) + (implOk(r) ? '' : ' WRONG') : '',
  ];
}

export function terminalTable(results: readonly Result[]): string {
  const pareto = paretoIds(results);
  const rows = [HEAD, ...results.map((r) => rowCells(r, pareto))];
  const w = HEAD.map((_, c) => Math.max(...rows.map((r) => r[c].length)));
  const right = new Set([3, 4, 5, 6, 7, 8, 9, 10, 11, 13]);
  const line = (r: string[]): string => r.map((v, c) => (right.has(c) ? v.padStart(w[c]) : v.padEnd(w[c]))).join('  ');
  return [line(rows[0]), w.map((n) => '-'.repeat(n)).join('  '), ...rows.slice(1).map(line)].join('\n');
}

function mdEscape(s: string): string {
  return s.replace(/\|/g, '\\|');
}

function mdTable(head: string[], rows: string[][]): string {
  return [`| ${head.join(' | ')} |`, `|${head.map(() => '---').join('|')}|`, ...rows.map((r) => `| ${r.map(mdEscape).join(' | ')} |`)].join('\n');
}

// ----------------------------------------------------------------------------------------------
// Markdown
// ----------------------------------------------------------------------------------------------

export function markdown(results: readonly Result[], checks: readonly Check[], info: RunInfo): string {
  const ok = results.filter((r) => r.status === 'ok');
  const notRun = results.filter((r) => r.status !== 'ok');
  const out: string[] = [];
  out.push('# Quantization recipes on a grouped MoE GEMM (`npm run scales`)', '');
  out.push(`Generated ${info.date} by \`${info.command}\` — node ${info.node}, ${info.cores} cores, engine threads ${info.threads}, commit ${info.commit}, ${info.totalSeconds.toFixed(0)} s.`, '');
  out.push(`**Workload**: ${info.workload}. Rows per expert (Zipf routing): ${info.sizes.join(' + ')}. ${info.outliers}`, '');
  out.push('Every recipe runs through the library\'s grouped matmul (RFC Proposal #1: `memory.desc.grouped` src/dst, plain `[E,K,N]` weights, scales and zero points as RFC 0002 attributes). ' +
    'Errors are against the float64 product of the original f32 operands over all rows; **check** is the library result against the float64 product of the *dequantized* operands (sampled rows) — it should be ~1e-7, which shows the library computes the recipe and the error is the recipe\'s. ' +
    'Bytes are weights + weight scales (+ zero points, + NVFP4 per-expert globals); activation scales are computed per call and not counted. Speed: median of repeated runs (`(nK)` = only K runs, slow implementation), GFLOP/s = 2·ΣM·K·N / median.', '');
  out.push('## Results', '');
  const pareto = paretoIds(results);
  out.push('`*` marks the error-vs-size Pareto frontier: no other recipe has both fewer bits per weight and a lower error.', '');
  out.push(mdTable(HEAD, results.filter((r) => r.status === 'ok').map((r) => rowCells(r, pareto))), '');
  out.push('## Checks', '');
  for (const c of checks) out.push(`- ${c.pass === undefined ? '⚪ n/a' : c.pass ? '✅ pass' : '❌ FAIL'} — **${c.name}**: ${c.detail}`);
  out.push('');
  const worked = results.filter((r) => r.status === 'ok' && r.message);
  if (worked.length) {
    out.push('## Library failures worked around', '');
    out.push('These recipes failed with the requested thread count and were rerun on a single-thread engine; their figures come from that run (speed not comparable).', '');
    out.push(mdTable(['recipe', 'failure'], worked.map((r) => [r.recipe.id, r.message ?? ''])), '');
  }
  if (notRun.length) {
    out.push('## Not run by the library', '');
    out.push('Combinations the library rejected (pd creation) or failed to execute, with its message. "Emulated" is the tool\'s own float64 emulation of the recipe on the sampled rows, for orientation only — not a library result.', '');
    out.push(mdTable(['recipe', 'src', 'weights', 'bits/w', 'stage', 'library message', 'emulated rel.Frob'], notRun.map((r) => [r.recipe.id, r.srcDesc, r.weiDesc, fix(r.bytes.bitsPerWeight, 2), r.stage ?? r.status, r.message ?? '', sci(r.emulated?.relFro, 3)])), '');
  }
  out.push('## Recipes as attribute calls', '');
  out.push(mdTable(['recipe', 'family', 'attribute calls', 'quantized by', 'operand error src / weights', 'note'],
    results.map((r) => [r.recipe.id, r.recipe.family, r.calls.length ? r.calls.map((c) => `\`${c}\``).join(' ') : '(none)', `${r.quantBy.src} / ${r.quantBy.wei}${r.libAgree ? ` (${r.libAgree})` : ''}`, `${sci(r.opErr.src, 2)} / ${sci(r.opErr.wei, 2)}`, r.recipe.note ?? ''])), '');
  if (ok.length === 0) out.push('_No recipe ran._', '');
  out.push('## Notes', '');
  for (const n of info.notes) out.push(`- ${n}`);
  out.push(`- Encoder self-test: ${info.selfTest}`);
  out.push('');
  return out.join('\n');
}

// ----------------------------------------------------------------------------------------------
// HTML with inline SVG
// ----------------------------------------------------------------------------------------------

const COLORS: Record<Family, string> = {
  baseline: '#555555',
  'weight-only': '#1f77b4',
  'int8 W8A8': '#d62728',
  W4A8: '#9467bd',
  fp8: '#2ca02c',
  MX: '#ff7f0e',
  NVFP4: '#8c564b',
};

function esc(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

interface Pt { x: number; y: number; label: string; color: string; title: string; pareto?: boolean }

/** Log-axis ticks covering [lo, hi]: decades, or 1-2-5 steps when the range is under 3 decades. */
function niceLogTicks(lo: number, hi: number): number[] {
  const e0 = Math.floor(Math.log10(lo)), e1 = Math.ceil(Math.log10(hi));
  if (e1 - e0 > 3) return Array.from({ length: e1 - e0 + 1 }, (_, i) => 10 ** (e0 + i));
  const all: number[] = [];
  for (let e = e0; e <= e1; e++) for (const m of [1, 2, 5]) all.push(m * 10 ** e);
  const first = all.findLastIndex((t) => t <= lo * (1 + 1e-12));
  const last = all.findIndex((t) => t >= hi * (1 - 1e-12));
  return all.slice(Math.max(0, first), last < 0 ? all.length : last + 1);
}

/** Scatter plot, x log2 (bits per weight), y log10 (error); labels placed greedily with leader lines. */
function scatter(points: Pt[], xLabel: string, yLabel: string, xRange?: [number, number]): string {
  const W = 900, H = 520, L = 70, R = 20, T = 20, B = 50;
  const pts = points.filter((p) => p.y > 0 && Number.isFinite(p.y) && (!xRange || (p.x >= xRange[0] && p.x <= xRange[1])));
  if (!pts.length) return '<p>(no data)</p>';
  const ylo = Math.min(...pts.map((p) => p.y)), yhi = Math.max(...pts.map((p) => p.y));
  const ticks = niceLogTicks(ylo, yhi);
  const l0 = Math.log10(ticks[0]), l1 = Math.log10(ticks[ticks.length - 1]);
  const [x0, x1] = xRange ?? [Math.log2(Math.min(...pts.map((p) => p.x))) - 0.15, Math.log2(Math.max(...pts.map((p) => p.x))) + 0.25].map((v) => 2 ** v) as [number, number];
  const lx = (x: number): number => (xRange ? x : Math.log2(x));
  const X = (x: number): number => L + ((lx(x) - lx(x0)) / (lx(x1) - lx(x0))) * (W - L - R);
  const Y = (y: number): number => T + (1 - (Math.log10(y) - l0) / Math.max(1e-9, l1 - l0)) * (H - T - B);
  const s: string[] = [`<svg viewBox="0 0 ${W} ${H}" width="100%" role="img" aria-label="${esc(yLabel)} vs ${esc(xLabel)}" font-family="sans-serif" font-size="11">`];
  for (const t of ticks) s.push(`<line x1="${L}" x2="${W - R}" y1="${Y(t)}" y2="${Y(t)}" stroke="#ddd"/><text x="${L - 6}" y="${Y(t) + 4}" text-anchor="end">${sci(t, 1)}</text>`);
  const xt = xRange ? Array.from({ length: Math.floor(x1) - Math.ceil(x0) + 1 }, (_, i) => Math.ceil(x0) + i) : [1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 32].filter((v) => v >= x0 && v <= x1);
  for (const x of xt) s.push(`<line x1="${X(x)}" x2="${X(x)}" y1="${T}" y2="${H - B}" stroke="#eee"/><text x="${X(x)}" y="${H - B + 16}" text-anchor="middle">${x}</text>`);
  s.push(`<rect x="${L}" y="${T}" width="${W - L - R}" height="${H - T - B}" fill="none" stroke="#888"/>`);
  s.push(`<text x="${(L + W - R) / 2}" y="${H - 10}" text-anchor="middle">${esc(xLabel)}</text>`);
  s.push(`<text transform="translate(16 ${(T + H - B) / 2}) rotate(-90)" text-anchor="middle">${esc(yLabel)}</text>`);
  // Greedy label placement: try right/left of the point at growing vertical offsets; boxes never overlap
  // each other or a point; a displaced label gets a leader line.
  const boxes: { x0: number; x1: number; y0: number; y1: number }[] = pts.map((p) => ({ x0: X(p.x) - 5, x1: X(p.x) + 5, y0: Y(p.y) - 5, y1: Y(p.y) + 5 }));
  const hit = (b: { x0: number; x1: number; y0: number; y1: number }): boolean =>
    b.x0 < L || b.x1 > W - R || b.y0 < T || b.y1 > H - B || boxes.some((o) => b.x0 < o.x1 && o.x0 < b.x1 && b.y0 < o.y1 && o.y0 < b.y1);
  const dots: string[] = [], labels: string[] = [];
  const front = pts.filter((p) => p.pareto).sort((a, b) => a.x - b.x);
  if (front.length > 1) {
    let d = `M${X(front[0].x).toFixed(1)},${Y(front[0].y).toFixed(1)}`;
    for (let i = 1; i < front.length; i++) d += ` H${X(front[i].x).toFixed(1)} V${Y(front[i].y).toFixed(1)}`;
    s.push(`<path d="${d}" fill="none" stroke="#333" stroke-width="1" stroke-dasharray="4 3"><title>Pareto frontier</title></path>`);
  }
  for (const p of [...pts].sort((a, b) => b.y - a.y)) {
    const cx = X(p.x), cy = Y(p.y);
    dots.push(`<circle cx="${cx.toFixed(1)}" cy="${cy.toFixed(1)}" r="4.5" fill="${p.color}" fill-opacity="0.85" stroke="#fff" stroke-width="0.8"><title>${esc(p.title)}</title></circle>`);
    const w = 6.2 * p.label.length + 4;
    let placed: { x: number; y: number; anchor: string; box: { x0: number; x1: number; y0: number; y1: number } } | undefined;
    for (let k = 0; k < 40 && !placed; k++) {
      const dy = (k % 2 === 0 ? 1 : -1) * Math.ceil(k / 2) * 12;
      for (const side of [1, -1]) {
        const tx = cx + side * 8, ty = cy + dy + 4;
        const box = side > 0 ? { x0: tx, x1: tx + w, y0: ty - 10, y1: ty + 2 } : { x0: tx - w, x1: tx, y0: ty - 10, y1: ty + 2 };
        if (!hit(box)) {
          placed = { x: tx, y: ty, anchor: side > 0 ? 'start' : 'end', box };
          break;
        }
      }
    }
    if (!placed) continue;
    boxes.push(placed.box);
    if (Math.abs(placed.y - 4 - cy) > 6) labels.push(`<line x1="${cx.toFixed(1)}" y1="${cy.toFixed(1)}" x2="${placed.x.toFixed(1)}" y2="${(placed.y - 4).toFixed(1)}" stroke="${p.color}" stroke-opacity="0.5" stroke-width="0.7"/>`);
    labels.push(`<text x="${placed.x.toFixed(1)}" y="${placed.y.toFixed(1)}" text-anchor="${placed.anchor}" fill="${p.color}">${esc(p.label)}</text>`);
  }
  s.push(...labels, ...dots, '</svg>');
  return s.join('');
}

interface Bar { label: string; value: number; color: string; title: string; text: string; faded?: boolean }

/** Horizontal bars, optionally log-scaled. */
function hbars(bars: Bar[], axis: string, log: boolean, R = 170): string {
  const rowH = 18, L = 130, W = 900, T = 10, B = 36;
  const H = T + B + rowH * bars.length;
  const vals = bars.map((b) => b.value).filter((v) => v > 0 && Number.isFinite(v));
  if (!vals.length) return '<p>(no data)</p>';
  const vmax = Math.max(...vals);
  let scale: (v: number) => number;
  let ticks: number[];
  if (log) {
    ticks = niceLogTicks(Math.min(...vals), vmax);
    const l0 = Math.log10(ticks[0]) - 0.3, l1 = Math.log10(ticks[ticks.length - 1]);
    scale = (v) => (v > 0 ? ((Math.log10(v) - l0) / (l1 - l0)) * (W - L - R) : 0);
  } else {
    const raw = vmax / 6, mag = 10 ** Math.floor(Math.log10(raw));
    const step = [1, 2, 5, 10].map((m) => m * mag).find((v) => v >= raw) ?? 10 * mag;
    const top = Math.ceil(vmax / step) * step;
    ticks = Array.from({ length: Math.round(top / step) + 1 }, (_, i) => i * step);
    scale = (v) => (v / top) * (W - L - R);
  }
  const tickText = (t: number): string => (log ? sci(t, 1) : String(Number(t.toPrecision(6))));
  const s: string[] = [`<svg viewBox="0 0 ${W} ${H}" width="100%" role="img" aria-label="${esc(axis)}" font-family="sans-serif" font-size="11">`];
  for (const t of ticks) s.push(`<line x1="${L + scale(t)}" x2="${L + scale(t)}" y1="${T}" y2="${H - B}" stroke="#e4e4e4"/><text x="${L + scale(t)}" y="${H - B + 14}" text-anchor="middle">${tickText(t)}</text>`);
  bars.forEach((b, i) => {
    const y = T + i * rowH;
    const w = Math.max(0, scale(b.value));
    s.push(`<text x="${L - 6}" y="${y + 13}" text-anchor="end">${esc(b.label)}</text>`);
    s.push(`<rect x="${L}" y="${y + 3}" width="${w.toFixed(1)}" height="${rowH - 5}" fill="${b.color}"${b.faded ? ' fill-opacity="0.35" stroke="' + b.color + '" stroke-dasharray="3 2"' : ''}><title>${esc(b.title)}</title></rect>`);
    s.push(`<text x="${(L + w + 4).toFixed(1)}" y="${y + 13}">${esc(b.text)}</text>`);
  });
  s.push(`<text x="${L + (W - L - R) / 2}" y="${H - 6}" text-anchor="middle">${esc(axis)}</text></svg>`);
  return s.join('');
}

function legend(): string {
  return `<p class="legend">${FAMILIES.map((f) => `<span><i style="background:${COLORS[f]}"></i>${esc(f)}</span>`).join(' ')}</p>`;
}

function htmlTable(head: string[], rows: string[][], cls = ''): string {
  return `<div class="scroll"><table class="${cls}"><thead><tr>${head.map((h) => `<th>${esc(h)}</th>`).join('')}</tr></thead><tbody>${rows.map((r) => `<tr>${r.map((c) => `<td>${esc(c)}</td>`).join('')}</tr>`).join('')}</tbody></table></div>`;
}

export function html(results: readonly Result[], checks: readonly Check[], info: RunInfo): string {
  const ok = results.filter((r) => r.status === 'ok' && r.err);
  const pareto = paretoIds(results);
  const notRun = results.filter((r) => r.status !== 'ok');
  const title = (r: Result): string =>
    `${r.recipe.id} (${r.recipe.family})\nsrc ${r.srcDesc}, weights ${r.weiDesc}\n${r.bytes.bitsPerWeight.toFixed(2)} bits/weight, ${(r.bytes.total / 1e6).toFixed(2)} MB\nrel.Frob ${sci(r.err?.relFro, 3)}, cosine ${r.err?.cosine.toFixed(6)}\n${r.implInfo ?? ''} ${fix(r.time?.median, 1)} ms`;
  const good = ok.filter(implOk);
  const pts = good.map((r) => ({ x: r.bytes.bitsPerWeight, y: r.err!.relFro, label: r.recipe.id, color: COLORS[r.recipe.family], title: title(r), pareto: pareto.has(r.recipe.id) }));
  const scatterSvg = scatter(pts, 'bits per weight, log scale (weights + scales + zero points + globals)', 'relative Frobenius error of the output (log)');
  const zoomSvg = pts.some((p) => p.x <= 9.5) ? scatter(pts, 'bits per weight (weights + scales + zero points + globals)', 'relative Frobenius error of the output (log)', [3.8, 9.4]) : '';
  const errBars = hbars([...good].sort((a, b) => b.err!.sqnrDb - a.err!.sqnrDb).map((r) => ({ label: r.recipe.id, value: r.err!.sqnrDb, color: COLORS[r.recipe.family], title: title(r), text: `${r.err!.sqnrDb.toFixed(1)} dB · rel.Frob ${sci(r.err!.relFro, 3)} · ${r.bytes.bitsPerWeight.toFixed(2)} b/w` })),
    'SQNR of the output, dB = -20·log10(rel. Frobenius error); longer is better', false, 250);
  const speedBars = hbars([...good].sort((a, b) => (b.gflops ?? 0) - (a.gflops ?? 0)).map((r) => ({ label: r.recipe.id, value: r.gflops ?? 0, color: COLORS[r.recipe.family], faded: (r.implInfo ?? '').startsWith('ref'), title: title(r), text: `${fix(r.gflops, 2)} GFLOP/s · ${fix(r.time?.median, 1)} ms · ${r.implInfo ?? ''}` })),
    'GFLOP/s (median run; faded, dashed = reference implementation ref:any)', false, 330);
  const css = `body{font-family:system-ui,sans-serif;margin:24px auto;max-width:1200px;padding:0 16px;color:#222}
table{border-collapse:collapse;font-size:12px;margin:8px 0 20px}th,td{border:1px solid #ccc;padding:3px 6px;text-align:right}
th{background:#f3f3f3}td:nth-child(-n+3){text-align:left}table.left td{text-align:left}
.legend span{margin-right:14px;font-size:13px}.legend i{display:inline-block;width:11px;height:11px;margin-right:4px;border-radius:6px}
.scroll{overflow-x:auto}.pass{color:#18794e}.fail{color:#c62828}.na{color:#777}code{font-size:12px}h2{margin-top:32px}`;
  const resultRows = ok.map((r) => rowCells(r, pareto));
  const checkList = checks.map((c) => `<li class="${c.pass === undefined ? 'na' : c.pass ? 'pass' : 'fail'}"><b>${c.pass === undefined ? 'n/a' : c.pass ? 'pass' : 'FAIL'}</b> — <b>${esc(c.name)}</b>: ${esc(c.detail)}</li>`).join('');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>groupdnn scales: quantization recipes on a grouped MoE GEMM</title><style>${css}</style></head>
<body>
<h1>Quantization recipes on a grouped MoE GEMM</h1>
<p>Generated ${esc(info.date)} by <code>${esc(info.command)}</code> — node ${esc(info.node)}, ${info.cores} cores, engine threads ${info.threads}, commit ${esc(info.commit)}, ${info.totalSeconds.toFixed(0)} s.</p>
<p><b>Workload</b>: ${esc(info.workload)}. Rows per expert (Zipf routing): ${info.sizes.join(' + ')}. ${esc(info.outliers)}</p>
<p>Every recipe runs through the library's grouped matmul (RFC Proposal #1 grouped src/dst, plain [E,K,N] weights, RFC 0002 scale / zero-point attributes). Error: library output vs the float64 product of the original f32 operands. <i>check</i>: library output vs the float64 product of the dequantized operands (should be ~1e-7). Bytes: weights + weight scales (+ zero points, NVFP4 globals).</p>
<h2>Error vs size</h2><p>Each point is a recipe; the dashed line is the Pareto frontier. The x axis counts weight storage only: activation quantization adds error but no stored bytes.${good.length < ok.length ? ` Left out of the charts because the library's result does not match the recipe (check column): ${esc(ok.filter((r) => !implOk(r)).map((r) => r.recipe.id).join(', '))}.` : ''}</p>${legend()}${scatterSvg}
${zoomSvg ? `<h3>4 to 9 bits per weight</h3>${zoomSvg}` : ''}
<h2>Accuracy by recipe</h2>${legend()}${errBars}
<h2>Speed</h2>${legend()}${speedBars}
<h2>Results</h2><p><code>*</code> marks the error-vs-size Pareto frontier (no other recipe has both fewer bits per weight and a lower error).</p>${htmlTable(HEAD, resultRows)}
<h2>Checks</h2><ul>${checkList}</ul>
${results.some((r) => r.status === 'ok' && r.message) ? `<h2>Library failures worked around</h2><p>These recipes failed with the requested thread count and were rerun on a single-thread engine; their figures come from that run (speed not comparable).</p>${htmlTable(['recipe', 'failure'], results.filter((r) => r.status === 'ok' && r.message).map((r) => [r.recipe.id, r.message ?? '']), 'left')}` : ''}
${notRun.length ? `<h2>Not run by the library</h2><p>Rejected at primitive-descriptor creation or failed at execution, with the library's message. "Emulated" is the tool's own float64 emulation on the sampled rows (orientation only).</p>${htmlTable(['recipe', 'src', 'weights', 'bits/w', 'stage', 'library message', 'emulated rel.Frob'], notRun.map((r) => [r.recipe.id, r.srcDesc, r.weiDesc, fix(r.bytes.bitsPerWeight, 2), r.stage ?? r.status, r.message ?? '', sci(r.emulated?.relFro, 3)]), 'left')}` : ''}
<h2>Recipes as attribute calls</h2>${htmlTable(['recipe', 'family', 'attribute calls', 'quantized by', 'operand error src / weights', 'note'], results.map((r) => [r.recipe.id, r.recipe.family, r.calls.join('  ') || '(none)', `${r.quantBy.src} / ${r.quantBy.wei}${r.libAgree ? ` (${r.libAgree})` : ''}`, `${sci(r.opErr.src, 2)} / ${sci(r.opErr.wei, 2)}`, r.recipe.note ?? '']), 'left')}
<h2>Notes</h2><ul>${info.notes.map((n) => `<li>${esc(n)}</li>`).join('')}<li>Encoder self-test: ${esc(info.selfTest)}</li></ul>
</body></html>
`;
}
