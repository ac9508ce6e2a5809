/**
 * The driver's state machine (benchdnn_general_info.md): matmul knobs hold comma lists whose
 * cartesian product is run for every problem descriptor met; `--reset` restores the defaults. Common
 * options (mode, engine, timing) are global and survive `--reset`.
 */
import type { DataType } from '../../src/index.js';
import type { GroupedSpec } from './grouped_spec.js';
import type { FpmathSpec, PostOpsSpec, QuantSpec } from './attr_spec.js';
import { parseFpmath, parsePostOps, parseQuant } from './attr_spec.js';

/** src, weights, dst data types (a oneDNN-only name such as u3 is kept here and rejected per problem in setup.ts). */
export type DtTriple = readonly [DataType, DataType, DataType];

export interface MatmulSettings {
  dt: DtTriple[];
  stag: string[];
  wtag: string[];
  dtag: string[];
  biaDt: (DataType | 'undef')[];
  biaMask: number[];
  /** src and weights runtime-dims masks. */
  rtDimsMasks: (readonly [number, number])[];
  grouped: (GroupedSpec | undefined)[];
  scales: QuantSpec[];
  zeroPoints: QuantSpec[];
  postOps: PostOpsSpec[];
  fpmath: FpmathSpec[];
  match: RegExp | undefined;
}

export type Mode = 'C' | 'P' | 'R' | 'L';

export interface GlobalSettings {
  mode: Mode;
  engine: 'cpu' | 'gpu';
  /** `--ctx-exe=N`: engine threads (undefined: groupdnn's default, one per core). */
  threads: number | undefined;
  maxMsPerPrb: number;
  fixTimesPerPrb: number;
}

/** benchdnn's matmul defaults (tests/benchdnn/matmul/matmul.hpp): f32, tags `any`, no bias, bia_mask 2. */
export function defaultMatmulSettings(): MatmulSettings {
  return {
    dt: [['f32', 'f32', 'f32']],
    stag: ['any'],
    wtag: ['any'],
    dtag: ['any'],
    biaDt: ['undef'],
    biaMask: [2],
    rtDimsMasks: [[0, 0]],
    grouped: [undefined],
    scales: [parseQuant('', '--attr-scales')],
    zeroPoints: [parseQuant('', '--attr-zero-points')],
    postOps: [parsePostOps('')],
    fpmath: [parseFpmath('')],
    match: undefined,
  };
}

export function defaultGlobalSettings(): GlobalSettings {
  return { mode: 'C', engine: 'cpu', threads: undefined, maxMsPerPrb: 3000, fixTimesPerPrb: 0 };
}
