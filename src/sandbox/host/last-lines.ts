/**
 * The console lines of a guest's current inline call, which the guest also writes to memory shared
 * with the host (guest/bridge.ts ringWrite): when the watchdog stops a runaway call by disposing
 * the isolate, the call's outbox is lost with it, and this is what is left of the lines the call
 * printed before it ran away. The guest writes it, so every length is checked against the buffer.
 */

/** Bytes of each instance's line memory: 8,190 UTF-16 code units of levels and lines. */
export const LINE_RING_BYTES = 16 * 1024;

/** The lines written since the call began, as outbox entries; a line cut short is kept as far as it went. */
export function lastLines(shared: SharedArrayBuffer): Array<['log', string, string]> {
  const used = new Int32Array(shared, 0, 1)[0];
  const ring = new Uint16Array(shared, 4);
  const end = Math.min(Math.max(0, used | 0), ring.length);
  const lines: Array<['log', string, string]> = [];
  const text = (from: number, n: number) => Buffer.from(ring.slice(from, from + n).buffer).toString('utf16le');
  let at = 0;
  while (at < end) {
    const levelLength = ring[at++];
    if (at + levelLength + 2 > end) break;
    const level = text(at, levelLength);
    at += levelLength;
    const n = ring[at] + ring[at + 1] * 0x10000;
    at += 2;
    const message = text(at, Math.min(n, end - at));
    at += n;
    lines.push(['log', level, message]);
  }
  return lines;
}
