/**
 * The Prometheus text exposition format (version 0.0.4), with just what we need: counters and
 * histograms kept in memory (they start at zero with the process, as Prometheus expects), and
 * gauges read at scrape time.
 */
export type Labels = Record<string, string>;

const escapeLabel = (v: string) => v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
const escapeHelp = (v: string) => v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n');

function labelText(labels: Labels): string {
  const keys = Object.keys(labels);
  return keys.length ? `{${keys.map((k) => `${k}="${escapeLabel(labels[k])}"`).join(',')}}` : '';
}

/** Numbers as Prometheus writes them: +Inf, -Inf, NaN, else the shortest decimal. */
export function formatValue(n: number): string {
  if (Number.isNaN(n)) return 'NaN';
  if (n === Infinity) return '+Inf';
  if (n === -Infinity) return '-Inf';
  return String(n);
}

type Sample = [suffix: string, labels: Labels, value: number];

interface Metric {
  name: string;
  help: string;
  type: 'counter' | 'gauge' | 'histogram';
  /** Counted in each process (summed over the serving processes), rather than read from the shared store. */
  perProcess: boolean;
  samples(): Sample[];
}

/** A process's per-process metrics, as another process sums them in (see Registry.snapshot). */
export type Snapshot = Record<string, Sample[]>;

export interface Counter {
  inc(labels?: Labels, by?: number): void;
  get(labels?: Labels): number;
}

export interface Histogram {
  observe(value: number, labels?: Labels): void;
}

export interface Registry {
  counter(name: string, help: string): Counter;
  histogram(name: string, help: string, buckets: number[]): Histogram;
  /**
   * A gauge computed at each scrape; `read` returns one value per label set. `perProcess` when it
   * counts this process's own work (summed over processes), not something read from the store.
   */
  gauge(name: string, help: string, read: () => Array<[Labels, number]>, opts?: { perProcess?: boolean }): void;
  /**
   * The whole exposition text, with the per-process metrics of `others` (other serving
   * processes' snapshots) added in. A gauge whose read throws is left out (the others still answer).
   */
  render(others?: Snapshot[]): string;
  /** This process's per-process metrics (counters, histograms, per-process gauges). */
  snapshot(): Snapshot;
}

/**
 * A series' key: its labels in name order, each name and value length-prefixed (no two label sets
 * share one). Every HTTP answer counts one, so no JSON and no entry arrays.
 */
function keyOf(labels: Labels): string {
  const names = Object.keys(labels);
  // Callers pass their labels in one order, most often already sorted: no sort (it allocates) then.
  for (let i = 1; i < names.length; i++)
    if (names[i - 1] > names[i]) {
      names.sort();
      break;
    }
  let key = '';
  for (const n of names) {
    const v = labels[n];
    key += `${n.length}:${n}${v.length}:${v}`;
  }
  return key;
}

export function createRegistry(): Registry {
  const metrics: Metric[] = [];

  return {
    counter(name, help) {
      const values = new Map<string, { labels: Labels; value: number }>();
      metrics.push({ name, help, type: 'counter', perProcess: true, samples: () => [...values.values()].map((v) => ['_total', v.labels, v.value]) });
      return {
        inc(labels = {}, by = 1) {
          const k = keyOf(labels);
          const v = values.get(k);
          if (v) v.value += by;
          else values.set(k, { labels, value: by });
        },
        get: (labels = {}) => values.get(keyOf(labels))?.value ?? 0,
      };
    },

    histogram(name, help, buckets) {
      const bounds = [...buckets].sort((a, b) => a - b);
      const series = new Map<string, { labels: Labels; counts: number[]; sum: number; count: number }>();
      metrics.push({
        name,
        help,
        type: 'histogram',
        perProcess: true,
        samples() {
          const out: Array<[string, Labels, number]> = [];
          for (const s of series.values()) {
            // Buckets are cumulative: each counts every observation <= its bound.
            let running = 0;
            bounds.forEach((b, i) => {
              running += s.counts[i];
              out.push(['_bucket', { ...s.labels, le: formatValue(b) }, running]);
            });
            out.push(['_bucket', { ...s.labels, le: '+Inf' }, s.count]);
            out.push(['_sum', s.labels, s.sum], ['_count', s.labels, s.count]);
          }
          return out;
        },
      });
      return {
        observe(value, labels = {}) {
          const k = keyOf(labels);
          let s = series.get(k);
          if (!s) series.set(k, (s = { labels, counts: bounds.map(() => 0), sum: 0, count: 0 }));
          const i = bounds.findIndex((b) => value <= b);
          if (i >= 0) s.counts[i]++;
          s.sum += value;
          s.count++;
        },
      };
    },

    gauge(name, help, read, opts = {}) {
      metrics.push({ name, help, type: 'gauge', perProcess: opts.perProcess ?? false, samples: () => read().map(([labels, v]) => ['', labels, v]) });
    },

    snapshot() {
      const out: Snapshot = {};
      for (const m of metrics) {
        if (!m.perProcess) continue;
        try {
          out[m.name] = m.samples();
        } catch {
          /* left out, as in render */
        }
      }
      return out;
    },

    render(others = []) {
      const lines: string[] = [];
      for (const m of metrics) {
        let samples: Sample[];
        try {
          samples = m.samples();
        } catch {
          continue; // fail soft: one unreadable gauge must not hide the rest
        }
        if (m.perProcess && others.length)
          samples = summed(
            samples,
            others.map((o) => o[m.name] ?? []),
          );
        lines.push(`# HELP ${m.name}${m.type === 'counter' ? '_total' : ''} ${escapeHelp(m.help)}`);
        lines.push(`# TYPE ${m.name}${m.type === 'counter' ? '_total' : ''} ${m.type}`);
        for (const [suffix, labels, value] of samples) lines.push(`${m.name}${suffix}${labelText(labels)} ${formatValue(value)}`);
      }
      return `${lines.join('\n')}\n`;
    },
  };
}

/** Samples with the same suffix and labels added up (bucket order kept: ours first, then new series). */
function summed(own: Sample[], others: Sample[][]): Sample[] {
  const byKey = new Map<string, Sample>();
  for (const list of [own, ...others]) {
    if (!Array.isArray(list)) continue;
    for (const [suffix, labels, value] of list) {
      if (typeof value !== 'number' || typeof suffix !== 'string' || !labels || typeof labels !== 'object') continue;
      const k = suffix + keyOf(labels);
      const cur = byKey.get(k);
      if (cur) cur[2] += value;
      else byKey.set(k, [suffix, labels, value]);
    }
  }
  return [...byKey.values()];
}
