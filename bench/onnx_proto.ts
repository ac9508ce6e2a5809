/**
 * Minimal protobuf encoder: only what an ONNX ModelProto with one node needs (wire types 0 = varint,
 * 2 = length-delimited). No ORT import, so both the wasm-EP and the WebGPU-EP peers can share it.
 */

export type Field = Uint8Array;

function varint(value: number): number[] {
  if (!Number.isSafeInteger(value) || value < 0) throw new RangeError(`varint: unsupported value ${value}`);
  const out: number[] = [];
  let v = value;
  while (v >= 0x80) {
    out.push((v % 0x80) | 0x80);
    v = Math.floor(v / 0x80);
  }
  out.push(v);
  return out;
}

export function concat(parts: readonly Uint8Array[]): Uint8Array {
  let total = 0;
  for (const p of parts) total += p.length;
  const out = new Uint8Array(total);
  let off = 0;
  for (const p of parts) {
    out.set(p, off);
    off += p.length;
  }
  return out;
}

/** Varint field (int32 / int64 / enum). */
export function fInt(field: number, value: number): Field {
  return Uint8Array.from([...varint((field << 3) | 0), ...varint(value)]);
}

/** Length-delimited field (bytes / embedded message). */
export function fBytes(field: number, payload: Uint8Array): Field {
  return concat([Uint8Array.from([...varint((field << 3) | 2), ...varint(payload.length)]), payload]);
}

const utf8 = new TextEncoder();
export function fStr(field: number, s: string): Field {
  return fBytes(field, utf8.encode(s));
}

export function msg(...fields: Field[]): Uint8Array {
  return concat(fields);
}

/** Little-endian float32 bytes of `data` (a view when the platform is little-endian, which wasm hosts are). */
export function f32le(data: Float32Array): Uint8Array {
  const littleEndian = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;
  if (littleEndian) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  const out = new Uint8Array(data.byteLength);
  const dv = new DataView(out.buffer);
  for (let i = 0; i < data.length; i++) dv.setFloat32(i * 4, data[i], true);
  return out;
}

