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
   * The fast f32 path's largest K block on packed weights (job.kc_packed): a 64 x 2048 f32 A block is
   * 512 KiB, half an L2 of current x86 cores. Packed panels are [K][8] per 8 columns, so one long K block
   * reads each panel in one contiguous stream instead of 8 KiB pieces 64 KiB apart (20% faster on MoE
   * shapes, where the weights come from DRAM; wasm/src/gemm-driver.c k_block()).
   */
  KC_PACKED: 2048,
} as const;
