import { DnnlError, check } from '../common/status.js';
import { dtBytes, isDataType, type DataType } from '../common/data_type.js';
import { RUNTIME_DIM_VAL, isRuntime, dimsEqual, dimsToString, type Dims } from '../common/dims.js';
import { tagToStrides, stridesToTag } from './format_tag.js';
import { countObject } from '../common/census.js';
import { panelQuantKey, type PanelQuant } from './packed_weights.js';

/** Byte size that depends on runtime dims (oneDNN `DNNL_RUNTIME_SIZE_VAL`). */
export const RUNTIME_SIZE_VAL = -1;

/** How a grouped descriptor partitions its tensor (RFC Proposal #1). */
export interface GroupedInfo {
  readonly groupCount: number;
  /** The dimension whose extent differs per group: 0 (variable M / rows) or 1 (variable K / columns). */
  readonly variableDim: number;
  /** Per-group extents when known on the host (per-group `groupedDims` form); undefined when runtime. */
  readonly groupSizes: readonly number[] | undefined;
  /** Data type of the offsets buffer (buffer 1). */
  readonly offsetsDt: DataType;
}

/** An opaque, implementation-chosen weights layout (from `tag.any`), produced by the pd / reorder. */
export interface PackedLayout {
  /** Name of the layout, e.g. `f32:panel8:kc256`. */
  readonly name: string;
  /** Bytes of the packed buffer. */
  readonly byteSize: number;
  /** x8 / x4 layouts: the weights' scales / zero points stored beside the panels (`+q`, packed_weights.ts). */
  readonly quant?: PanelQuant;
}

export type MemoryFormat = 'blocked' | 'any' | 'grouped' | 'packed';

/**
 * A memory descriptor: logical dims, data type and layout. Immutable; compare with `equals`.
 * Grouped descriptors carry two buffers (values, offsets); all others one.
 */
export class MemoryDesc {
  readonly dims: readonly number[];
  readonly dataType: DataType;
  readonly format: MemoryFormat;
  /** Element strides (blocked and grouped formats); empty for `any` and `packed`. */
  readonly strides: readonly number[];
  readonly grouped: GroupedInfo | undefined;
  readonly packed: PackedLayout | undefined;

  /** @internal use `memory.desc(...)` / `memory.desc.grouped(...)`. */
  constructor(init: {
    dims: Dims;
    dataType: DataType;
    format: MemoryFormat;
    strides?: Dims;
    grouped?: GroupedInfo;
    packed?: PackedLayout;
  }) {
    this.dims = Object.freeze([...init.dims]);
    this.dataType = init.dataType;
    this.format = init.format;
    this.strides = Object.freeze([...(init.strides ?? [])]);
    this.grouped = init.grouped && Object.freeze({ ...init.grouped, groupSizes: init.grouped.groupSizes && Object.freeze([...init.grouped.groupSizes]) });
    this.packed = init.packed && Object.freeze({ ...init.packed });
    // computed once: execute checks every argument's size (a Proposal #3 call has 3 per expert)
    this.runtimeDims = this.dims.some(isRuntime);
    this.span = this.computeSpanElems();
    this.size0 = this.computeSize0();
    Object.freeze(this);
  }

  private readonly runtimeDims: boolean;
  private readonly span: number;
  private readonly size0: number;

  get ndims(): number {
    return this.dims.length;
  }

  get isGrouped(): boolean {
    return this.format === 'grouped';
  }

  get hasRuntimeDims(): boolean {
    return this.runtimeDims;
  }

  /** Number of buffers a memory object of this descriptor holds: 2 for grouped (values, offsets). */
  get bufferCount(): number {
    return this.isGrouped ? 2 : 1;
  }

  /** Number of logical elements (product of dims). */
  get nelems(): number {
    let p = 1;
    for (const d of this.dims) p *= d;
    return p;
  }

  /** Number of elements spanned in buffer 0, padding between strided rows included. */
  get spanElems(): number {
    return this.span;
  }

  private computeSpanElems(): number {
    if (this.format === 'packed') return this.packed ? this.packed.byteSize : 0;
    if (this.dims.some((d) => d === 0)) return 0;
    let last = 0;
    for (let i = 0; i < this.ndims; i++) last += (this.dims[i] - 1) * this.strides[i];
    return last + 1;
  }

  /**
   * Bytes of buffer `index`: 0 = values, 1 = offsets (grouped only, `groupCount + 1` entries).
   * `RUNTIME_SIZE_VAL` when the size depends on runtime dims; 0 for `any`.
   */
  getSize(index = 0): number {
    if (index === 1) {
      check(this.isGrouped, `getSize: buffer 1 (offsets) exists only for grouped descriptors`);
      const g = this.grouped as GroupedInfo;
      return dtBytes(g.offsetsDt, g.groupCount + 1);
    }
    if (index !== 0) check(false, `getSize: buffer index must be 0 or 1, got ${index}`);
    return this.size0;
  }

  private computeSize0(): number {
    if (this.format === 'any') return 0;
    if (this.format === 'packed') return this.packed ? this.packed.byteSize : 0; // no layout: the pds refuse it
    if (this.runtimeDims || this.strides.some(isRuntime)) return RUNTIME_SIZE_VAL;
    return dtBytes(this.dataType, this.span);
  }

  /** Structural equality (dims, type, layout, grouping). */
  equals(other: MemoryDesc): boolean {
    if (this === other) return true;
    const ga = this.grouped;
    const gb = other.grouped;
    const groupedEqual =
      ga === gb ||
      (ga !== undefined && gb !== undefined &&
        ga.groupCount === gb.groupCount && ga.variableDim === gb.variableDim && ga.offsetsDt === gb.offsetsDt &&
        (ga.groupSizes === gb.groupSizes || (!!ga.groupSizes && !!gb.groupSizes && dimsEqual(ga.groupSizes, gb.groupSizes))));
    return (
      this.format === other.format &&
      this.dataType === other.dataType &&
      dimsEqual(this.dims, other.dims) &&
      dimsEqual(this.strides, other.strides) &&
      groupedEqual &&
      (this.packed?.name ?? '') === (other.packed?.name ?? '') &&
      panelQuantKey(this.packed?.quant) === panelQuantKey(other.packed?.quant)
    );
  }

  /** Plain tag equivalent of the strides ('ab', 'acb', ...) or undefined for padded strides. */
  get formatTag(): string | undefined {
    if (this.format === 'any') return 'any';
    if (this.format === 'packed') return undefined;
    return stridesToTag(this.dims, this.strides);
  }

  /** oneDNN verbose-like rendering: `f32::blocked:ab::f0 4x8` / `f32::grouped:ab:g8:var_m:offs_s32 ...`. */
  toString(): string {
    const layout =
      this.format === 'any' ? 'any:any' :
      this.format === 'packed' ? `packed:${this.packed?.name}${this.packed?.quant ? `+q(${panelQuantKey(this.packed.quant)})` : ''}` :
      `${this.format}:${this.formatTag ?? `strides_${this.strides.join('_')}`}`;
    let extra = '';
    if (this.grouped) {
      const g = this.grouped;
      extra = `:g${g.groupCount}:var_${g.variableDim === 0 ? 'dim0' : 'dim1'}:offs_${g.offsetsDt}`;
    }
    return `${this.dataType}::${layout}${extra}::f0 ${dimsToString(this.dims)}`;
  }
}

export function validateDims(dims: Dims, argName: string, allowRuntime: boolean): void {
  check(Array.isArray(dims) || ArrayBuffer.isView(dims), `${argName}: dims must be an array`);
  check(dims.length >= 1 && dims.length <= 12, `${argName}: number of dims must be in [1, 12], got ${dims.length}`);
  dims.forEach((d, i) => {
    if (isRuntime(d)) {
      check(allowRuntime, `${argName}: dims[${i}] must not be RUNTIME_DIM_VAL here`);
      return;
    }
    check(Number.isSafeInteger(d) && d >= 0, `${argName}: dims[${i}] must be a non-negative integer, got ${d}`);
  });
}

export function validateDataType(t: unknown, argName: string): asserts t is DataType {
  if (!isDataType(t)) throw new DnnlError('invalid_arguments', `${argName}: unknown data type '${String(t)}'`);
}

export function validateStrides(strides: Dims, dims: Dims, argName: string): void {
  check(strides.length === dims.length, `${argName}: strides must have ${dims.length} entries, got ${strides.length}`);
  strides.forEach((s, i) => {
    check(Number.isSafeInteger(s) && s >= 0, `${argName}: strides[${i}] must be a non-negative integer, got ${s}`);
  });
  // Two dims sharing the same memory would alias elements: require non-overlapping strides.
  const order = [...dims.keys()].filter((i) => dims[i] > 1).sort((a, b) => strides[a] - strides[b]);
  let span = 1;
  for (const i of order) {
    check(strides[i] >= span, `${argName}: strides [${strides.join(',')}] make elements of dims [${dims.join(',')}] overlap`);
    span = strides[i] * dims[i];
  }
}

/** `memory.desc(dims, dt, tagOrStrides)`: a plain (dense or strided) descriptor, or `tag.any`. */
export function plainDesc(dims: Dims, dataType: DataType, tagOrStrides: string | Dims): MemoryDesc {
  countObject('memory_desc');
  validateDims(dims, 'memory.desc', true);
  validateDataType(dataType, 'memory.desc');
  // JavaScript callers can leave it out: a layout is required (oneDNN has no default tag either).
  check(typeof tagOrStrides === 'string' || Array.isArray(tagOrStrides), `memory.desc: a format tag (e.g. tag.ab, tag.any) or an array of strides is required, got ${String(tagOrStrides)}`);
  if (typeof tagOrStrides === 'string') {
    if (tagOrStrides === 'any') return new MemoryDesc({ dims, dataType, format: 'any' });
    return new MemoryDesc({ dims, dataType, format: 'blocked', strides: tagToStrides(tagOrStrides, dims, 'memory.desc') });
  }
  check(!dims.some(isRuntime), 'memory.desc: explicit strides need fully known dims');
  validateStrides(tagOrStrides, dims, 'memory.desc');
  return new MemoryDesc({ dims, dataType, format: 'blocked', strides: tagOrStrides });
}

export { RUNTIME_DIM_VAL };
