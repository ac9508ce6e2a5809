/**
 * The quantization recipes the tool compares. Each recipe fixes how src (activations, quantized
 * dynamically per call) and weights (quantized offline) are stored and scaled; the runner turns it
 * into RFC 0002 attributes (`attr.setScales(arg, mask, groups, dt)`, `setZeroPoints`).
 */
import type { ElemType } from './codecs.js';
import type { QuantSpec, SrcGran, WeiGran } from './quantize.js';

export type Operand<G> =
  | { readonly plain: 'f32' | 'bf16' | 'f16' }
  | { readonly q: QuantSpec; readonly gran: G };

export interface Recipe {
  /** Short unique name (the `--recipes` filter matches it). */
  readonly id: string;
  readonly family: Family;
  readonly src: Operand<SrcGran>;
  readonly wei: Operand<WeiGran>;
  /** NVFP4: where the per-expert f32 factors go (dst scale per expert, the RFC's choice). */
  readonly global?: 'dst-scale';
  readonly note?: string;
  /** Weights given as `tag.any` and reordered into the layout the pd picks (issue 12: x8 / x4 / f32 panels). */
  readonly packed?: boolean;
}

export type Family = 'baseline' | 'weight-only' | 'int8 W8A8' | 'W4A8' | 'fp8' | 'MX' | 'NVFP4';

export const FAMILIES: readonly Family[] = ['baseline', 'weight-only', 'int8 W8A8', 'W4A8', 'fp8', 'MX', 'NVFP4'];

const abs = (dt: ElemType, scaleDt: QuantSpec['scaleDt'] = 'f32'): QuantSpec => ({ dt, method: 'absmax', scaleDt });
const mx = (dt: ElemType, method: 'mx' | 'mx-ceil' = 'mx'): QuantSpec => ({ dt, method, scaleDt: 'e8m0' });
const nv: QuantSpec = { dt: 'f4_e2m1', method: 'nv', scaleDt: 'f8_e4m3' };

const S = {
  tensor: { kind: 'tensor' } as SrcGran,
  expert: { kind: 'expert' } as SrcGran,
  row: { kind: 'row' } as SrcGran,
  k: (gK: number): SrcGran => ({ kind: 'rowblock', gK }),
};
const W = {
  tensor: { kind: 'tensor' } as WeiGran,
  expert: { kind: 'expert' } as WeiGran,
  col: { kind: 'col' } as WeiGran,
  k: (gK: number): WeiGran => ({ kind: 'kblock', gK }),
  b2: (gK: number, gN: number): WeiGran => ({ kind: 'block2d', gK, gN }),
};

const f32: Operand<SrcGran> = { plain: 'f32' };

export function allRecipes(): Recipe[] {
  const r: Recipe[] = [];
  const add = (x: Recipe): void => void r.push(x);
  // Baselines.
  add({ id: 'f32', family: 'baseline', src: f32, wei: { plain: 'f32' }, note: 'no quantization' });
  add({ id: 'bf16w', family: 'baseline', src: f32, wei: { plain: 'bf16' }, note: 'bf16 weights, f32 activations' });
  add({ id: 'bf16', family: 'baseline', src: { plain: 'bf16' }, wei: { plain: 'bf16' } });
  // Weight-only integer (activations stay f32).
  add({ id: 'w8-col', family: 'weight-only', src: f32, wei: { q: abs('s8'), gran: W.col } });
  add({ id: 'w8-k128', family: 'weight-only', src: f32, wei: { q: abs('s8'), gran: W.k(128) } });
  add({ id: 'w4-tensor', family: 'weight-only', src: f32, wei: { q: abs('s4'), gran: W.tensor } });
  add({ id: 'w4-col', family: 'weight-only', src: f32, wei: { q: abs('s4'), gran: W.col } });
  for (const gK of [32, 64, 128]) add({ id: `w4-k${gK}`, family: 'weight-only', src: f32, wei: { q: abs('s4'), gran: W.k(gK) } });
  add({ id: 'w4-b128', family: 'weight-only', src: f32, wei: { q: abs('s4'), gran: W.b2(128, 128) }, note: '128x128 blocks' });
  add({ id: 'w4-k128-f16s', family: 'weight-only', src: f32, wei: { q: abs('s4', 'f16'), gran: W.k(128) }, note: 'f16 scales' });
  add({ id: 'w4-k128-bf16s', family: 'weight-only', src: f32, wei: { q: abs('s4', 'bf16'), gran: W.k(128) }, note: 'bf16 scales' });
  add({ id: 'u4zp-k128', family: 'weight-only', src: f32, wei: { q: { dt: 'u4', method: 'asym', scaleDt: 'f16', zpDt: 'u4' }, gran: W.k(128) }, note: 'AWQ-style: u4 + u4 zero point + f16 scale per 128' });
  add({ id: 'wf8-col', family: 'weight-only', src: f32, wei: { q: abs('f8_e4m3'), gran: W.col }, note: 'fp8 weight-only' });
  // Weight-only fp4 (issue 12: f32 activations x packed f4_e2m1 weights decoded in the kernel).
  add({ id: 'wmxfp4', family: 'weight-only', src: f32, wei: { q: mx('f4_e2m1'), gran: W.k(32) }, note: 'MXFP4 weights (e8m0 per 32), f32 activations' });
  // int8 W8A8.
  const s8 = abs('s8');
  add({ id: 'a8t-w8t', family: 'int8 W8A8', src: { q: s8, gran: S.tensor }, wei: { q: s8, gran: W.tensor } });
  add({ id: 'a8t-w8col', family: 'int8 W8A8', src: { q: s8, gran: S.tensor }, wei: { q: s8, gran: W.col } });
  add({ id: 'a8e-w8e', family: 'int8 W8A8', src: { q: s8, gran: S.expert }, wei: { q: s8, gran: W.expert }, note: 'one scale per expert for src (mask 0 on the grouped src) and weights (mask 1)' });
  add({ id: 'a8row-w8t', family: 'int8 W8A8', src: { q: s8, gran: S.row }, wei: { q: s8, gran: W.tensor } });
  add({ id: 'a8row-w8col', family: 'int8 W8A8', src: { q: s8, gran: S.row }, wei: { q: s8, gran: W.col }, note: 'dynamic per-token x per-channel' });
  add({ id: 'a8row-asym-w8col', family: 'int8 W8A8', src: { q: { dt: 's8', method: 'asym', scaleDt: 'f32', zpDt: 's32' }, gran: S.row }, wei: { q: s8, gran: W.col }, note: 'asymmetric per-token src (s32 zero point)' });
  for (const gK of [32, 64, 128]) add({ id: `a8k${gK}-w8k${gK}`, family: 'int8 W8A8', src: { q: s8, gran: S.k(gK) }, wei: { q: s8, gran: W.k(gK) } });
  add({ id: 'a8k128-w8b128', family: 'int8 W8A8', src: { q: s8, gran: S.k(128) }, wei: { q: s8, gran: W.b2(128, 128) } });
  // W4A8.
  add({ id: 'a8row-w4col', family: 'W4A8', src: { q: s8, gran: S.row }, wei: { q: abs('s4'), gran: W.col } });
  add({ id: 'a8row-w4k128', family: 'W4A8', src: { q: s8, gran: S.row }, wei: { q: abs('s4'), gran: W.k(128) } });
  add({ id: 'a8k128-w4k128', family: 'W4A8', src: { q: s8, gran: S.k(128) }, wei: { q: abs('s4'), gran: W.k(128) } });
  // FP8 with f32 scales.
  for (const [dt, tag] of [['f8_e4m3', 'e4m3'], ['f8_e5m2', 'e5m2']] as const) {
    const q = abs(dt);
    add({ id: `${tag}-t`, family: 'fp8', src: { q, gran: S.tensor }, wei: { q, gran: W.tensor }, note: 'per-tensor' });
    add({ id: `${tag}-row-col`, family: 'fp8', src: { q, gran: S.row }, wei: { q, gran: W.col } });
  }
  add({ id: 'e4m3-e', family: 'fp8', src: { q: abs('f8_e4m3'), gran: S.expert }, wei: { q: abs('f8_e4m3'), gran: W.expert }, note: 'per expert (vLLM-style fp8 MoE scales)' });
  const e4 = abs('f8_e4m3');
  add({ id: 'e4m3-k32', family: 'fp8', src: { q: e4, gran: S.k(32) }, wei: { q: e4, gran: W.k(32) }, note: 'f32 scales per 32 (compare MXFP8)' });
  add({ id: 'e4m3-k128-b128', family: 'fp8', src: { q: e4, gran: S.k(128) }, wei: { q: e4, gran: W.b2(128, 128) }, note: 'DeepSeek-V3: 1x128 src, 128x128 weights' });
  // OCP MX.
  add({ id: 'mxfp8-e4m3', family: 'MX', src: { q: mx('f8_e4m3'), gran: S.k(32) }, wei: { q: mx('f8_e4m3'), gran: W.k(32) } });
  add({ id: 'mxfp8-e4m3-ceil', family: 'MX', src: { q: mx('f8_e4m3', 'mx-ceil'), gran: S.k(32) }, wei: { q: mx('f8_e4m3', 'mx-ceil'), gran: W.k(32) }, note: 'e8m0 scale rounded up (2^ceil(log2(amax/448))): no saturation of block maxima' });
  add({ id: 'mxfp8-e5m2', family: 'MX', src: { q: mx('f8_e5m2'), gran: S.k(32) }, wei: { q: mx('f8_e5m2'), gran: W.k(32) } });
  add({ id: 'mxfp4', family: 'MX', src: { q: mx('f4_e2m1'), gran: S.k(32) }, wei: { q: mx('f4_e2m1'), gran: W.k(32) } });
  add({ id: 'mxfp4w-mxfp8a', family: 'MX', src: { q: mx('f8_e4m3'), gran: S.k(32) }, wei: { q: mx('f4_e2m1'), gran: W.k(32) }, note: 'MXFP4 weights, MXFP8 activations' });
  // NVFP4: f4_e2m1, f8_e4m3 scale per 16, per-expert f32 factor (folded into a per-expert dst scale).
  add({ id: 'nvfp4', family: 'NVFP4', src: { q: nv, gran: S.k(16) }, wei: { q: nv, gran: W.k(16) }, global: 'dst-scale', note: 'f32 globals -> dst scale [G]' });
  return r;
}

/** Human-readable operand description: `s8 row`, `s4 K128 f16s`, `f32`. */
export function describeOperand(o: Operand<SrcGran> | Operand<WeiGran>, side: 'src' | 'wei'): string {
  if ('plain' in o) return o.plain;
  const g = o.gran;
  const gran =
    g.kind === 'none' ? '' :
    g.kind === 'tensor' ? 'tensor' :
    g.kind === 'expert' ? 'expert' :
    g.kind === 'row' ? 'row' :
    g.kind === 'col' ? 'col' :
    g.kind === 'rowblock' ? `1x${g.gK}` :
    g.kind === 'kblock' ? (side === 'wei' ? `${g.gK}x1` : `K${g.gK}`) :
    `${g.gK}x${g.gN}`;
  const method = o.q.method === 'mx' ? 'e8m0' : o.q.method === 'mx-ceil' ? 'e8m0 ceil' : o.q.method === 'nv' ? 'e4m3s+f32' : o.q.method === 'asym' ? `${o.q.scaleDt}s+zp${o.q.zpDt ?? 's32'}` : o.q.scaleDt === 'f32' ? '' : `${o.q.scaleDt}s`;
  return [o.q.dt, gran, method].filter(Boolean).join(' ');
}

/** Applies a `--recipes` filter: comma-separated ids, id prefixes ending in `*`, or family names. */
export function filterRecipes(all: Recipe[], filter: string | undefined): Recipe[] {
  if (!filter) return all;
  const terms = filter.split(',').map((s) => s.trim()).filter(Boolean);
  const keep = all.filter((r) => terms.some((t) => t === r.id || t === r.family || (t.endsWith('*') && r.id.startsWith(t.slice(0, -1)))));
  const unknown = terms.filter((t) => !all.some((r) => t === r.id || t === r.family || (t.endsWith('*') && r.id.startsWith(t.slice(0, -1)))));
  if (unknown.length) throw new Error(`--recipes: no recipe matches ${unknown.join(', ')}; ids: ${all.map((r) => r.id).join(' ')}`);
  return keep;
}
