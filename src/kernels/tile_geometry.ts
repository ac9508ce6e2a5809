/**
 * Tile geometry of the wasm kernels, shared by matmul and grouped_gemm: MB x NB output tiles, K
 * blocked by KC (an 8 KiB B micro-panel in L1, the MB x KC A block in L2).
 */
export const TILE = {
  MB: 64,
  NB: 128,
  KC: 256,
  /** The integer path's K block: int16 A and B blocks take the room of the f32 ones at KC. */
  KC_INT: 512,
  /**
   * The largest K block, in f32 units, on weights read straight from packed panels (job.kc_packed): a
   * 64 x 2048 f32 A block is 512 KiB, half an L2 of current x86 cores. Panels are [K][8] per 8 columns;
   * short K blocks read 8 KiB pieces K x 32 bytes apart, which at K = 2048 all fall in the same L2 sets
   * (MoE shapes 20% slower; wasm/src/driver.h k_block()).
   */
  KC_PACKED: 2048,
} as const;
