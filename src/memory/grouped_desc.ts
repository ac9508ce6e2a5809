import { check, checkImpl } from '../common/status.js';
import { type DataType } from '../common/data_type.js';
import { countObject } from '../common/census.js';
import { isRuntime, denseStrides, type Dims } from '../common/dims.js';
import { MemoryDesc, validateDataType, validateDims, validateStrides } from './desc.js';

/**
 * `memory.desc.grouped(dims, dt, groupCount, groupedDims, offsetsDt = s32, strides?)` (RFC Proposal #1).
 *
 * `dims` is the whole tensor (`[total_M, K]`; `[total_M]` for per-row scales). `groupedDims` is either
 * shared, with RUNTIME_DIM_VAL on the dimension that varies (`[RUNTIME_DIM_VAL, K]`: rows per group
 * vary; `[M, RUNTIME_DIM_VAL]`: columns per group vary), or per group `[M0, K, M1, K, ...]` when the
 * sizes are known on the host. Groups are consecutive ranges of the variable dimension; the offsets
 * buffer (buffer 1) holds `groupCount + 1` entries `[0, M0, M0+M1, ...]`.
 */
export function groupedDesc(
  dims: Dims,
  dataType: DataType,
  groupCount: number,
  groupedDims: Dims,
  offsetsDt: DataType = 's32',
  strides?: Dims,
): MemoryDesc {
  const arg = 'memory.desc.grouped';
  countObject('memory_desc');
  validateDims(dims, arg, false);
  validateDataType(dataType, arg);
  validateDataType(offsetsDt, `${arg}: offsetsDt`);
  const nd = dims.length;
  check(nd === 1 || nd === 2, `${arg}: dims must have 1 or 2 entries, got ${nd}`);
  check(Number.isSafeInteger(groupCount) && groupCount >= 1, `${arg}: groupCount must be a positive integer, got ${groupCount}`);
  check(groupCount <= 0x7fffffff, `${arg}: groupCount must fit in int32`);
  check(Array.isArray(groupedDims) || ArrayBuffer.isView(groupedDims), `${arg}: groupedDims must be an array`);
  check(
    groupedDims.length === nd || groupedDims.length === nd * groupCount,
    `${arg}: groupedDims must have ${nd} (shared) or ${nd * groupCount} (per group) entries, got ${groupedDims.length}`,
  );
  checkImpl(offsetsDt === 's32', `${arg}: offsetsDt must be s32, got ${offsetsDt}`);
  check(dims[0] <= 0x7fffffff && (nd < 2 || dims[1] <= 0x7fffffff), `${arg}: dims must fit in int32 offsets`);
  const st = strides ?? denseStrides(dims);
  validateStrides(st, dims, arg);

  const shared = groupedDims.length === nd && !(groupCount === 1 && !groupedDims.some(isRuntime));
  const { variableDim, groupSizes } = shared
    ? sharedGrouping(dims, groupCount, groupedDims, arg)
    : perGroupGrouping(dims, groupCount, groupedDims, arg);
  return new MemoryDesc({ dims, dataType, format: 'grouped', strides: st, grouped: { groupCount, variableDim, groupSizes, offsetsDt } });
}

function sharedGrouping(dims: Dims, g: number, gd: Dims, arg: string): { variableDim: number; groupSizes: number[] | undefined } {
  const runtimeAt = gd.flatMap((d, i) => (isRuntime(d) ? [i] : []));
  check(runtimeAt.length <= 1, `${arg}: at most one shared groupedDims entry may be RUNTIME_DIM_VAL`);
  gd.forEach((d, i) => check(isRuntime(d) || (Number.isSafeInteger(d) && d >= 0), `${arg}: groupedDims[${i}] must be a non-negative integer or RUNTIME_DIM_VAL, got ${d}`));
  if (runtimeAt.length === 1) {
    const v = runtimeAt[0];
    gd.forEach((d, i) => check(i === v || d === dims[i], `${arg}: groupedDims[${i}] = ${d} must equal dims[${i}] = ${dims[i]} (only dim ${v} varies)`));
    return { variableDim: v, groupSizes: undefined };
  }
  // Uniform, host-known groups: the partitioned dim is the one whose total is G times the group extent.
  for (let v = 0; v < dims.length; v++) {
    const others = gd.every((d, i) => i === v || d === dims[i]);
    if (others && gd[v] * g === dims[v]) return { variableDim: v, groupSizes: new Array<number>(g).fill(gd[v]) };
  }
  check(false, `${arg}: shared groupedDims [${gd.join(',')}] x ${g} groups do not partition dims [${dims.join(',')}]`);
}

function perGroupGrouping(dims: Dims, g: number, gd: Dims, arg: string): { variableDim: number; groupSizes: number[] } {
  const nd = dims.length;
  gd.forEach((d, i) => check(Number.isSafeInteger(d) && d >= 0, `${arg}: per-group groupedDims[${i}] must be a non-negative integer, got ${d}`));
  const extent = (grp: number, d: number): number => gd[grp * nd + d];
  const fixedOk = (v: number): boolean => {
    for (let grp = 0; grp < g; grp++) for (let d = 0; d < nd; d++) if (d !== v && extent(grp, d) !== dims[d]) return false;
    return true;
  };
  const sumOk = (v: number): boolean => {
    let s = 0;
    for (let grp = 0; grp < g; grp++) s += extent(grp, v);
    return s === dims[v];
  };
  for (let v = 0; v < nd; v++) {
    if (fixedOk(v) && sumOk(v)) {
      return { variableDim: v, groupSizes: Array.from({ length: g }, (_, grp) => extent(grp, v)) };
    }
  }
  check(false, `${arg}: per-group groupedDims must keep all dims but one equal to dims [${dims.join(',')}] and sum the other to its extent`);
}
