/** Aligned tables for people; colour only on a terminal and never with NO_COLOR. */
export function useColour(stream: NodeJS.WriteStream = process.stdout): boolean {
  return Boolean(stream.isTTY) && !process.env.NO_COLOR && process.env.TERM !== 'dumb';
}

const ESC = /\x1b\[[0-9;]*m/g;
const visible = (s: string) => s.replace(ESC, '').length;

export function table(headers: string[], rows: Array<Array<string | number | null | undefined>>): string {
  const cells = rows.map((r) => r.map((c) => (c === null || c === undefined ? '' : String(c))));
  const widths = headers.map((h, i) => Math.max(h.length, ...cells.map((r) => visible(r[i] ?? ''))));
  const line = (r: string[]) =>
    r
      .map((c, i) => (i === r.length - 1 ? c : c + ' '.repeat(widths[i] - visible(c))))
      .join('  ')
      .trimEnd();
  return [line(headers.map((h) => h.toUpperCase())), ...cells.map(line)].join('\n');
}

export function paint(code: number, s: string, on = useColour()): string {
  return on ? `\x1b[${code}m${s}\x1b[0m` : s;
}

export const green = (s: string) => paint(32, s);
export const red = (s: string) => paint(31, s);
export const yellow = (s: string) => paint(33, s);
export const dim = (s: string) => paint(90, s);

// C0 controls but tab and newline, DEL, and the C1 controls (U+009B is a one-byte CSI).
const CONTROL = /[\x00-\x08\x0b-\x1f\x7f-\x9f]/g;

/**
 * A stranger's text (what integration code printed or threw, a receiver's answer) made safe for a
 * terminal: control characters are shown as \xNN, so an escape sequence in it cannot recolour,
 * retitle, hide or rewrite what the person reads, or reach the terminal's own commands.
 */
export function printable(s: string): string {
  return s.replace(CONTROL, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`);
}

export function printJson(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}
