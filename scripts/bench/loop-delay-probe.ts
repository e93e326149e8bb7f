/**
 * Event-loop delay of a process under load, read inside it with `perf_hooks.monitorEventLoopDelay`
 * (its default 10 ms resolution), for processes that expose none: a benchmark preloads this module
 * into the processes it starts (`NODE_OPTIONS=--import <this file>`, inherited by a supervisor's
 * serving processes) with BENCH_LOOP_DELAY_DIR set. Nothing of the product is changed.
 *
 * The benchmark opens a window by writing its name to `<dir>/window` and closes it by writing an
 * empty file (or another name). Each process looks at that file every 50 ms: when a window opens it
 * starts from an empty histogram; when it closes it writes `<dir>/<pid>.<window>.json` (p50, p99
 * and max in ms, the number of samples, and whether it is a serving process of a supervisor).
 * Windows are therefore known to ~50 ms; a process whose loop is held longer notices later.
 *
 * The histogram records the time between its timer's firings, so the resolution itself is in every
 * value (an idle process shows ~10 ms): the figures written are the delay beyond it (value - 10 ms,
 * at least 0), the time the loop kept the timer waiting.
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const dir = process.env.BENCH_LOOP_DELAY_DIR;
if (dir) {
  const RESOLUTION_MS = 10;
  const histogram = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
  const serving = Boolean(process.env.SWITCHYARD_SERVING);
  let open = '';
  const ms = (ns: number) => (histogram.count ? Math.max(0, ns / 1e6 - RESOLUTION_MS) : NaN);
  const look = () => {
    let now = '';
    try {
      now = readFileSync(join(dir, 'window'), 'utf8').trim();
    } catch {
      /* no window yet */
    }
    if (now === open) return;
    if (open) {
      histogram.disable();
      const report = {
        pid: process.pid,
        serving,
        p50: ms(histogram.percentile(50)),
        p99: ms(histogram.percentile(99)),
        max: ms(histogram.max),
        samples: histogram.count,
      };
      writeFileSync(join(dir, `${process.pid}.${open}.json`), JSON.stringify(report));
    }
    open = now;
    if (open) {
      histogram.reset();
      histogram.enable();
    }
  };
  // unref: the probe never keeps a process alive that would otherwise exit.
  setInterval(look, 50).unref();
}
