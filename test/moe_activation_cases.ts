/**
 * Runtime offsets that a grouped moe.activation must refuse, shared by the cpu and gpu engine tests:
 * the grouped matmul's rules, order and messages (first offset 0, non-decreasing, the last within the
 * rows, dst's own offsets equal to src's), each naming the argument. G = 3 groups over 6 rows.
 */
export const ACT_ROWS = 6;
export const ACT_GROUPS = 3;

export interface BadActivationOffsets {
  readonly what: string;
  readonly src: readonly number[];
  /** dst's own offsets buffer (else dst shares src's). */
  readonly dst?: readonly number[];
  readonly message: string;
}

export const BAD_ACTIVATION_OFFSETS: readonly BadActivationOffsets[] = [
  { what: 'first offset not 0', src: [2, 3, 5, 6], message: 'moe.activation.execute: ARG.SRC offsets[0] must be 0, got 2' },
  { what: 'negative first offset', src: [-1, 3, 5, 6], message: 'moe.activation.execute: ARG.SRC offsets[0] must be 0, got -1' },
  { what: 'decreasing', src: [0, 4, 2, 5], message: 'moe.activation.execute: ARG.SRC offsets must be non-decreasing: offsets[2] = 2 < offsets[1] = 4' },
  { what: 'an interior offset past the rows', src: [0, 9, 9, 5], message: 'moe.activation.execute: ARG.SRC offsets must be non-decreasing: offsets[3] = 5 < offsets[2] = 9' },
  { what: 'the last offset past the rows', src: [0, 3, 7, 7], message: 'moe.activation.execute: ARG.SRC offsets[3] = 7 exceeds the total extent 6 of dims[0]' },
  { what: 'a negative last offset', src: [0, 3, 3, -1], message: 'moe.activation.execute: ARG.SRC offsets must be non-decreasing: offsets[3] = -1 < offsets[2] = 3' },
  {
    what: "dst's offsets differ from src's", src: [0, 3, 5, 6], dst: [0, 2, 5, 6],
    message: 'moe.activation.execute: ARG.DST offsets must equal ARG.SRC offsets: ARG.DST offsets[1] = 2, ARG.SRC offsets[1] = 3',
  },
];
