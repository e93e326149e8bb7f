/** What the benchmarks share: their settings from the environment, and the median they report. */

/**
 * A numeric setting from the environment (`BENCH_ROUNDS=5`), or `fallback` when unset. Anything
 * but a positive number (a whole one where `whole`) stops the benchmark with the setting's name and
 * exit code 2 (bad input), before it runs for minutes to print NaN.
 */
export function setting(name: string, fallback: number, whole = true): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isFinite(n) || n <= 0 || (whole && !Number.isInteger(n))) {
    process.stderr.write(`${name}=${raw}: must be a positive ${whole ? 'whole ' : ''}number (default ${fallback})\n`);
    process.exit(2);
  }
  return n;
}

/** The value below which `p` % of `sorted` (ascending) lie; NaN when there is none. */
export function percentile(sorted: number[], p: number): number {
  if (!sorted.length) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

/** The middle value (the mean of the two middle ones for an even count). */
export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}
