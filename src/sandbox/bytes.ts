/**
 * Bytes that own their whole ArrayBuffer. Structured clone (IPC, isolated-vm copies) copies a
 * view's entire underlying buffer, and Node's small Buffers are slices of a shared 8 kB pool: a
 * pooled slice handed to a guest would carry whatever else sits in that pool. Copy when needed.
 */
export function ownBytes(view: Uint8Array): Uint8Array {
  if (view.byteOffset === 0 && view.byteLength === view.buffer.byteLength && !(view.buffer instanceof SharedArrayBuffer)) {
    return view.constructor === Uint8Array ? view : new Uint8Array(view.buffer);
  }
  return new Uint8Array(view);
}
