/**
 * V8's allocation-site pretenuring, off in a process that serves.
 *
 * Why: V8 watches what survives its young-generation collections by allocation site, and a site
 * whose objects it sees alive at one (a collection that falls in the middle of a turn's batch of
 * requests sees the whole batch alive) is "pretenured": from then on its objects are allocated in
 * the old generation. A request's own objects (its URL, its header list, its envelope) then went
 * there, died at once, and stayed as garbage until the next full collection; meanwhile every young
 * object they pointed to was kept by them through each young collection and copied into the old
 * generation too. Measured on one pinned core at 7,000 req/s (hello public endpoint, open loop,
 * `--trace-gc-nvp`): 2.4 MB promoted per young collection and pauses of ~6 ms at the median with
 * pretenuring, 0.25 MB and ~1.1 ms without; p99 11.1 ms against 4.4 (medians of nine 5 s runs,
 * alternated), the peak under wrk unchanged (docs/benchmarks.md). A serving process's long-lived
 * state is built once at start; nothing it keeps gains from being allocated old.
 *
 * Set with `v8.setFlagsFromString` as the process starts to serve, so every way of serving has it:
 * forked serving processes, `serve --processes 1`, the single executable. V8 reads the flag each
 * time it would gather the feedback (at every collection), so setting it at run time takes effect
 * from the next collection. A pretenuring option the user gives on the command line is kept (Node
 * refuses it in NODE_OPTIONS).
 */
import { setFlagsFromString } from 'node:v8';

export const NO_PRETENURING = '--no-allocation-site-pretenuring';

/** Turn pretenuring off unless the user chose; whether it was turned off here. */
export function tuneServingHeap(execArgv = process.execArgv): boolean {
  // V8 takes one dash or two, and `--no-x` or `--nox`.
  const given = execArgv.some((a) => /^--?(no-?)?allocation[-_]site[-_]pretenuring\b/.test(a));
  if (given) return false;
  setFlagsFromString(NO_PRETENURING);
  return true;
}
