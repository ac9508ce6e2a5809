/** Execution argument ids. Values match oneDNN's `DNNL_ARG_*` where oneDNN has them. */
export const ARG = {
  SRC: 1,
  SRC_0: 1,
  SRC_1: 2,
  DST: 17,
  DST_0: 17,
  FROM: 1,
  TO: 17,
  WEIGHTS: 33,
  WEIGHTS_0: 33,
  BIAS: 41,
  ATTR_SCALES: 4096,
  ATTR_ZERO_POINTS: 8192,
  /** `ARG.ATTR_MULTIPLE_POST_OP(i) | ARG.SRC_1`: the second input of binary post-op i. */
  ATTR_MULTIPLE_POST_OP: (idx: number): number => 32768 * (idx + 1),
} as const;

export function argName(id: number): string {
  switch (id) {
    case ARG.SRC: return 'ARG.SRC';
    case ARG.SRC_1: return 'ARG.SRC_1';
    case ARG.DST: return 'ARG.DST';
    case ARG.WEIGHTS: return 'ARG.WEIGHTS';
    case ARG.BIAS: return 'ARG.BIAS';
    default: return `arg ${id}`;
  }
}
