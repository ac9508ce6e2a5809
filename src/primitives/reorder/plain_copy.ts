import { fromStored, isSubByteType, makeView, toStored } from '../../common/data_type.js';
import type { MemoryDesc } from '../../memory/desc.js';

/**
 * The plain -> plain reorder on the host: walks the logical indices, copies stored codes for one type
 * (4-bit: nibble e of byte e / 2) and converts between the floats. Only logical elements are written:
 * the padding of a strided dst keeps its bytes. The cpu reorder runs it on heap views; the gpu engine's
 * download runs it on the bytes read back, so both engines convert with the same code.
 */
export function copyPlainElements(src: MemoryDesc, from: ArrayBufferLike, fromByte: number, dst: MemoryDesc, to: ArrayBufferLike, toByte: number): void {
  if (src.nelems === 0) return;
  // f32 moves as its bits (a JS number would quiet a signaling NaN); bf16 -> f32 is the shift of
  // oneDNN and PyTorch, which keeps a NaN's bits too, as the gpu kernel does.
  const f32Bits = src.dataType === 'f32' && dst.dataType === 'f32', widenBf16 = src.dataType === 'bf16' && dst.dataType === 'f32';
  const fv = makeView(f32Bits ? 's32' : src.dataType, from, fromByte, src.spanElems);
  const tv = makeView(f32Bits || widenBf16 ? 's32' : dst.dataType, to, toByte, dst.spanElems);
  const nd = src.ndims;
  const idx = new Array<number>(nd).fill(0);
  const same = src.dataType === dst.dataType, nibbles = isSubByteType(src.dataType);
  for (let e = 0; e < src.nelems; e++) {
    let so = 0, d = 0;
    for (let i = 0; i < nd; i++) {
      so += idx[i] * src.strides[i];
      d += idx[i] * dst.strides[i];
    }
    if (nibbles) {
      const code = (fv[so >>> 1] >>> ((so & 1) << 2)) & 0xf, sh = (d & 1) << 2;
      tv[d >>> 1] = (tv[d >>> 1] & ~(0xf << sh)) | (code << sh);
    } else tv[d] = same ? fv[so] : widenBf16 ? fv[so] << 16 : toStored(dst.dataType, fromStored(src.dataType, fv[so]));
    for (let i = nd - 1; i >= 0 && ++idx[i] === src.dims[i]; i--) idx[i] = 0;
  }
}
