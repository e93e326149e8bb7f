/** A one-line progress bar on stderr, drawn only on a terminal (pipes and files get the summary alone). */
export interface Progress {
  update(done: number, note?: string): void;
  /** Erase the bar (the caller prints the summary). */
  end(): void;
}

export function renderBar(done: number, total: number, width = 24): string {
  const ratio = total > 0 ? Math.min(1, done / total) : 1;
  const full = Math.round(ratio * width);
  return `[${'#'.repeat(full)}${'-'.repeat(width - full)}] ${done}/${total}`;
}

export function createProgress(total: number, label: string, stream: NodeJS.WriteStream = process.stderr): Progress {
  if (!stream.isTTY) return { update() {}, end() {} };
  let drawn = false;
  return {
    update(done, note) {
      stream.write(`\r\x1b[2K${label} ${renderBar(done, total)}${note ? `  ${note}` : ''}`);
      drawn = true;
    },
    end() {
      if (drawn) stream.write('\r\x1b[2K');
    },
  };
}
