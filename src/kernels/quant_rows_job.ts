/* The job of quant_rows_s8 (wasm/src/quant-rows-s8.c): per-row symmetric int8 quantization on the workers, run by
   the dynamic_quant primitive and by the `:dq` matmul / grouped_gemm before their integer GEMMs. */

/** The job struct's fields (byte offsets) and size. */
export const QUANT_ROWS = { src: 32, dst: 36, scales: 40, offs: 44, rows: 48, cols: 52, src_ld: 56, dst_ld: 60, src_dt: 64, G: 68, SIZE: 80 } as const;
/** The job kind the workers dispatch on. */
export const KIND_QUANT_ROWS_S8 = 24;
/** `src_dt`: the src types the kernel reads. */
export const SRC_DT: Readonly<Record<string, number>> = { f32: 0, bf16: 1, f16: 2 };
