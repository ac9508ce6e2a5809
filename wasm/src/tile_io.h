#pragma once
/* Shared by the 4x8 microkernels: loads with the offset inside the instruction, and C rows of eight
   32-bit lanes (f32 or i32) with a partial-width path for the last panel. */
#include "common.h"

/* v128.load / v128.load32_splat at p + off bytes with the offset in the instruction: clang-16 does
   not fold constant offsets into wasm loads, and every extra i32.add costs an x64 instruction. */
#define LDV(p, off) ({ v128_t r_; __asm__ volatile("local.get %1\n\tv128.load %2\n\tlocal.set %0" : "=r"(r_) : "r"(p), "i"(off)); r_; })
#define LDS(p, off) ({ v128_t r_; __asm__ volatile("local.get %1\n\tv128.load32_splat %2\n\tlocal.set %0" : "=r"(r_) : "r"(p), "i"(off)); r_; })

/* Reads (and drops) one i32 at p + off: pulls that cache line in. */
#define TOUCH(p, off) __asm__ volatile("local.get %0\n\ti32.load %1\n\tdrop" ::"r"(p), "i"(off))

/* Pulls [p, p + bytes) into the cache with one read per 64-byte line, before a panel's first pass.
   Wasm has no prefetch, and a streaming microkernel's own reads sit among ~50 instructions per line,
   so the reorder window holds few misses. This loop has nothing else to do and keeps dozens in
   flight; the passes then hit L2. Measured on Zen 5 (in-process A/B, weights from DRAM): MoE-B 1T
   199 ms with it, 219 without; decode 13.8 / 15.5 ms; MoE-A unchanged. */
/* Tiles of at most this many rows skip the read-ahead pass: with one or two rows the microkernel streams
   the panel about as fast as the pass would, so the pass only doubled the reads (decode, T = 4 on MoE-B
   shapes: layer 76 -> 46-55 ms at 1 thread, bench --mode=moe). The decode kernels of low-precision
   weights (gemm-lowp.c) and of dynamic int8 activations (gemm-fused.c) take none either: their pass over
   the next panel stalled on its misses (issue 19, in-process A/B by CPU time, AMD EPYC, 1 thread: decode
   w4 / w8 / w4:dq / w8:dq 1.15 / 1.3 / 1.35 / 1.35x faster without). */
#define TOUCH_MIN_ROWS 2

INLINE void touch_range(const void* p, size_t bytes) {
  const char* q = (const char*)p;
  const char* end = q + bytes;
  for (; q + 256 <= end; q += 256) {
    TOUCH(q, 0);
    TOUCH(q, 64);
    TOUCH(q, 128);
    TOUCH(q, 192);
  }
  for (; q < end; q += 64) TOUCH(q, 0);
}

/* Loads nc <= 8 lanes of a C row (missing lanes read as 0, nothing past nc is touched). */
INLINE void load_row8(const void* c, size_t nc, v128_t* lo, v128_t* hi) {
  if (nc == 8) {
    *lo = wasm_v128_load(c);
    *hi = wasm_v128_load((const uint32_t*)c + 4);
    return;
  }
  uint32_t t[8] = {0};
  for (size_t j = 0; j < nc; j++) t[j] = ((const uint32_t*)c)[j];
  *lo = wasm_v128_load(t);
  *hi = wasm_v128_load(t + 4);
}

/* Stores nc <= 8 lanes of a C row. */
INLINE void store_row8(void* c, size_t nc, v128_t lo, v128_t hi) {
  if (nc == 8) {
    wasm_v128_store(c, lo);
    wasm_v128_store((uint32_t*)c + 4, hi);
    return;
  }
  uint32_t t[8];
  wasm_v128_store(t, lo);
  wasm_v128_store(t + 4, hi);
  for (size_t j = 0; j < nc; j++) ((uint32_t*)c)[j] = t[j];
}
