import { DnnlError, check, checkImpl } from '../../common/status.js';
import { now, verboseLine } from '../../common/verbose.js';
import { countObject, countPdTime } from '../../common/census.js';
import { MemoryDesc } from '../../memory/desc.js';
import { tagToStrides } from '../../memory/format_tag.js';
import { PrimitiveAttr } from '../../attr/primitive_attr.js';
import type { Engine } from '../../runtime/engine.js';
import type { MatmulImpl } from './impl.js';
import { matmulImplList } from './impl_list.js';
import { problemString, type MatmulKind, type MatmulProblem } from './problem.js';

function describe(md: MemoryDesc): string {
  return md.isGrouped ? `grouped(var dim${md.grouped?.variableDim})` : md.format === 'any' ? 'any' : 'plain';
}

/** `any` src/dst resolve to row-major: nothing to gain from another activation layout here. */
function resolveActivation(md: MemoryDesc): MemoryDesc {
  if (md.format !== 'any') return md;
  const t = 'abcdefghijkl'.slice(0, md.ndims);
  return new MemoryDesc({ dims: md.dims, dataType: md.dataType, format: 'blocked', strides: tagToStrides(t, md.dims, 'matmul') });
}

function classify(src: MemoryDesc, wei: MemoryDesc, dst: MemoryDesc): MatmulKind {
  const vs = src.grouped?.variableDim, vw = wei.grouped?.variableDim;
  if (!src.isGrouped && !wei.isGrouped && !dst.isGrouped) return 'dense';
  if (vs === 0 && !wei.isGrouped && dst.grouped?.variableDim === 0) return 'grouped_m';
  if (vs === 1 && vw === 0 && !dst.isGrouped) return 'grouped_k';
  throw new DnnlError('invalid_arguments', `matmul: layout combination src:${describe(src)} weights:${describe(wei)} dst:${describe(dst)} is not a matmul; use grouped(var dim0) x plain [G,K,N] -> grouped(var dim0), or grouped(var dim1) x grouped(var dim0) -> plain [G,M,N]`);
}

/**
 * Matmul primitive descriptor: `new matmul.PrimitiveDesc(eng, src, weights, dst, attr?)` or, with
 * bias, `new matmul.PrimitiveDesc(eng, src, weights, bias, dst, attr?)` (oneDNN argument order).
 * The constructor validates the descriptors (a flat list of rules, one per line) and picks the first
 * implementation of the ordered list that accepts the problem.
 */
export class PrimitiveDesc {
  readonly engine: Engine;
  readonly problem: MatmulProblem;
  readonly impl: MatmulImpl;
  readonly creationMs: number;
  private offsetsMd: MemoryDesc | undefined;

  constructor(engine: Engine, src: MemoryDesc, weights: MemoryDesc, biasOrDst: MemoryDesc, dstOrAttr?: MemoryDesc | PrimitiveAttr, attrArg?: PrimitiveAttr) {
    const t0 = now();
    countObject('primitive_desc');
    const hasBias = dstOrAttr instanceof MemoryDesc;
    const bias = hasBias ? biasOrDst : undefined;
    const dst = hasBias ? dstOrAttr : biasOrDst;
    const attr = (hasBias ? attrArg : (dstOrAttr as PrimitiveAttr | undefined)) ?? new PrimitiveAttr();
    this.engine = engine;
    const p = PrimitiveDesc.init(engine, src, weights, bias, dst, attr);
    const reasons: string[] = [];
    let chosen: MatmulImpl | undefined;
    for (const impl of matmulImplList) {
      const why = impl.reject(p, engine);
      if (why === undefined) {
        chosen = impl;
        break;
      }
      reasons.push(`${impl.name}: ${why}`);
    }
    if (!chosen) throw new DnnlError('unimplemented', `matmul: no implementation for ${problemString(p)} (${reasons.join('; ')})`);
    this.impl = chosen;
    const wei = p.weights.format === 'any' ? chosen.weightsLayout(p, engine) : p.weights;
    this.problem = Object.freeze({ ...p, weights: wei });
    this.creationMs = now() - t0;
    countPdTime(this.creationMs);
    verboseLine('create', ['matmul', this.implInfo, 'undef', this.mdsString(), attr.toString(), '', problemString(this.problem), this.creationMs.toFixed(4)]);
  }

  /** Validation rules, one per line, in the order oneDNN's `init()` would check them. */
  private static init(engine: Engine, src: MemoryDesc, wei: MemoryDesc, bias: MemoryDesc | undefined, dst: MemoryDesc, attr: PrimitiveAttr): MatmulProblem {
    check(engine !== undefined && engine !== null, 'matmul: engine is required');
    check(src instanceof MemoryDesc, 'matmul: src must be a memory descriptor');
    check(wei instanceof MemoryDesc, 'matmul: weights must be a memory descriptor');
    check(dst instanceof MemoryDesc, 'matmul: dst must be a memory descriptor');
    check(bias === undefined || bias instanceof MemoryDesc, 'matmul: bias must be a memory descriptor');
    check(attr instanceof PrimitiveAttr, 'matmul: attr must be a PrimitiveAttr');
    check(src.format !== 'packed' && dst.format !== 'packed', 'matmul: src and dst cannot use a packed weights layout');
    checkImpl(!src.hasRuntimeDims && !wei.hasRuntimeDims && !dst.hasRuntimeDims, 'matmul: RUNTIME_DIM_VAL dims are not supported; use grouped descriptors for runtime group sizes');
    check(bias === undefined || (bias.format !== 'any' && !bias.isGrouped), 'matmul: bias must be a plain descriptor with a layout');
    const kind = classify(src, wei, dst);
    const s = resolveActivation(src), d = resolveActivation(dst);
    if (attr.groupedOffsets) return PrimitiveDesc.initOffsetsAttr(kind, s, wei, bias, d, attr);
    if (kind === 'dense') return PrimitiveDesc.initDense(s, wei, bias, d, attr);
    if (kind === 'grouped_m') return PrimitiveDesc.initGroupedM(s, wei, bias, d, attr);
    return PrimitiveDesc.initGroupedK(s, wei, bias, d, attr);
  }

  private static initDense(src: MemoryDesc, wei: MemoryDesc, bias: MemoryDesc | undefined, dst: MemoryDesc, attr: PrimitiveAttr): MatmulProblem {
    const nd = dst.ndims;
    check(nd >= 2, `matmul: dst must have at least 2 dims, got ${nd}`);
    check(src.ndims === nd, `matmul: src has ${src.ndims} dims but dst has ${nd}`);
    check(wei.ndims === nd, `matmul: weights have ${wei.ndims} dims but dst has ${nd}`);
    const [M, K, N] = [src.dims[nd - 2], src.dims[nd - 1], wei.dims[nd - 1]];
    check(wei.dims[nd - 2] === K, `matmul: weights dims[${nd - 2}] = ${wei.dims[nd - 2]} must equal src K = ${K}`);
    check(dst.dims[nd - 2] === M, `matmul: dst dims[${nd - 2}] = ${dst.dims[nd - 2]} must equal src M = ${M}`);
    check(dst.dims[nd - 1] === N, `matmul: dst dims[${nd - 1}] = ${dst.dims[nd - 1]} must equal weights N = ${N}`);
    for (let b = 0; b < nd - 2; b++) {
      check(src.dims[b] === dst.dims[b] || src.dims[b] === 1, `matmul: src batch dims[${b}] = ${src.dims[b]} must equal dst's ${dst.dims[b]} or be 1 (broadcast)`);
      check(wei.dims[b] === dst.dims[b] || wei.dims[b] === 1, `matmul: weights batch dims[${b}] = ${wei.dims[b]} must equal dst's ${dst.dims[b]} or be 1 (broadcast)`);
      check(dst.dims[b] === (src.dims[b] === 1 ? wei.dims[b] : src.dims[b]), `matmul: dst batch dims[${b}] = ${dst.dims[b]} must be the broadcast of src's ${src.dims[b]} and weights' ${wei.dims[b]}`);
    }
    PrimitiveDesc.checkBias(bias, dst.dims);
    return { kind: 'dense', M, K, N, G: 1, batch: dst.dims.slice(0, nd - 2), src, weights: wei, bias, dst, attr, offsetsFrom: undefined };
  }

  private static initGroupedM(src: MemoryDesc, wei: MemoryDesc, bias: MemoryDesc | undefined, dst: MemoryDesc, attr: PrimitiveAttr): MatmulProblem {
    const gs = src.grouped!, gd = dst.grouped!;
    check(src.ndims === 2, `matmul: grouped src must be 2D [total_M, K], got ${src.ndims} dims`);
    check(dst.ndims === 2, `matmul: grouped dst must be 2D [total_M, N], got ${dst.ndims} dims`);
    check(wei.ndims === 3, `matmul: weights must be 3D [G, K, N] for a grouped src, got ${wei.ndims} dims`);
    const [M, K] = src.dims;
    const [G, , N] = wei.dims;
    check(gs.groupCount === G, `matmul: src group count ${gs.groupCount} must equal weights dims[0] = ${G}`);
    check(gd.groupCount === G, `matmul: dst group count ${gd.groupCount} must equal weights dims[0] = ${G}`);
    check(wei.dims[1] === K, `matmul: weights dims[1] = ${wei.dims[1]} must equal src K = ${K}`);
    check(dst.dims[0] === M, `matmul: dst dims[0] = ${dst.dims[0]} must equal src total rows ${M}`);
    check(dst.dims[1] === N, `matmul: dst dims[1] = ${dst.dims[1]} must equal weights N = ${N}`);
    check(gs.offsetsDt === gd.offsetsDt, `matmul: src and dst offsets data types differ (${gs.offsetsDt} vs ${gd.offsetsDt})`);
    check(!gs.groupSizes || !gd.groupSizes || gs.groupSizes.every((v, i) => v === gd.groupSizes![i]), 'matmul: src and dst per-group dims differ');
    PrimitiveDesc.checkBias(bias, [G, N]);
    return { kind: 'grouped_m', M, K, N, G, batch: [], src, weights: wei, bias, dst, attr, offsetsFrom: 'desc' };
  }

  private static initGroupedK(src: MemoryDesc, wei: MemoryDesc, bias: MemoryDesc | undefined, dst: MemoryDesc, attr: PrimitiveAttr): MatmulProblem {
    const gs = src.grouped!, gw = wei.grouped!;
    check(src.ndims === 2, `matmul: grouped src must be 2D [M, total_K], got ${src.ndims} dims`);
    check(wei.ndims === 2, `matmul: grouped weights must be 2D [total_K, N], got ${wei.ndims} dims`);
    check(dst.ndims === 3, `matmul: dst must be 3D [G, M, N] for variable-K groups, got ${dst.ndims} dims`);
    const [M, K] = src.dims;
    const N = wei.dims[1];
    const G = dst.dims[0];
    check(gs.groupCount === G, `matmul: src group count ${gs.groupCount} must equal dst dims[0] = ${G}`);
    check(gw.groupCount === G, `matmul: weights group count ${gw.groupCount} must equal dst dims[0] = ${G}`);
    check(wei.dims[0] === K, `matmul: weights dims[0] = ${wei.dims[0]} must equal src total K = ${K}`);
    check(dst.dims[1] === M, `matmul: dst dims[1] = ${dst.dims[1]} must equal src M = ${M}`);
    check(dst.dims[2] === N, `matmul: dst dims[2] = ${dst.dims[2]} must equal weights N = ${N}`);
    check(gs.offsetsDt === gw.offsetsDt, `matmul: src and weights offsets data types differ (${gs.offsetsDt} vs ${gw.offsetsDt})`);
    check(!gs.groupSizes || !gw.groupSizes || gs.groupSizes.every((v, i) => v === gw.groupSizes![i]), 'matmul: src and weights per-group dims differ');
    PrimitiveDesc.checkBias(bias, [G, M, N]);
    return { kind: 'grouped_k', M, K, N, G, batch: [], src, weights: wei, bias, dst, attr, offsetsFrom: 'desc' };
  }

  /** Proposal #2: plain 2D src/dst whose rows are grouped by offsets given at execution. */
  private static initOffsetsAttr(kind: MatmulKind, src: MemoryDesc, wei: MemoryDesc, bias: MemoryDesc | undefined, dst: MemoryDesc, attr: PrimitiveAttr): MatmulProblem {
    const ga = attr.groupedOffsets!;
    check(kind === 'dense', 'matmul: grouped-offsets attribute needs plain src and dst, not grouped descriptors (use one or the other)');
    check(src.ndims === 2, `matmul: with grouped offsets, src must be 2D [total_M, K], got ${src.ndims} dims`);
    check(dst.ndims === 2, `matmul: with grouped offsets, dst must be 2D [total_M, N], got ${dst.ndims} dims`);
    check(wei.ndims === 3, `matmul: with grouped offsets, weights must be 3D [G, K, N], got ${wei.ndims} dims`);
    const [M, K] = src.dims;
    const [G, , N] = wei.dims;
    check(ga.groupCount === G, `matmul: grouped-offsets group count ${ga.groupCount} must equal weights dims[0] = ${G}`);
    check(wei.dims[1] === K, `matmul: weights dims[1] = ${wei.dims[1]} must equal src K = ${K}`);
    check(dst.dims[0] === M, `matmul: dst dims[0] = ${dst.dims[0]} must equal src total rows ${M}`);
    check(dst.dims[1] === N, `matmul: dst dims[1] = ${dst.dims[1]} must equal weights N = ${N}`);
    PrimitiveDesc.checkBias(bias, [G, N]);
    return { kind: 'grouped_m', M, K, N, G, batch: [], src, weights: wei, bias, dst, attr, offsetsFrom: 'attr' };
  }

  private static checkBias(bias: MemoryDesc | undefined, want: readonly number[]): void {
    if (!bias) return;
    check(bias.ndims === want.length, `matmul: bias must have ${want.length} dims [${want.join(',')}] (each may be 1), got [${bias.dims.join(',')}]`);
    bias.dims.forEach((b, i) => check(b === want[i] || b === 1, `matmul: bias dims[${i}] = ${b} must equal ${want[i]} or be 1`));
  }

  /** The descriptor the primitive expects for an argument (`weights` resolved from `tag.any`). */
  queryMd(what: 'src' | 'weights' | 'bias' | 'dst' | 'grouped_offsets'): MemoryDesc | undefined {
    if (what === 'grouped_offsets') {
      if (this.problem.offsetsFrom !== 'attr') return undefined;
      this.offsetsMd ??= new MemoryDesc({ dims: [this.problem.G + 1], dataType: 's32', format: 'blocked', strides: [1] });
      return this.offsetsMd;
    }
    return what === 'src' ? this.problem.src : what === 'weights' ? this.problem.weights : what === 'bias' ? this.problem.bias : this.problem.dst;
  }

  /** Name of the chosen implementation (oneDNN `impl_info_str`). */
  get implInfo(): string {
    return this.impl.describe?.(this.engine) ?? this.impl.name;
  }

  /** @internal verbose rendering of all descriptors. */
  mdsString(): string {
    const p = this.problem ?? undefined;
    if (!p) return '';
    const parts = [`src:${p.src}`, `wei:${p.weights}`];
    if (p.bias) parts.push(`bia:${p.bias}`);
    parts.push(`dst:${p.dst}`);
    return parts.join(' ');
  }
}
