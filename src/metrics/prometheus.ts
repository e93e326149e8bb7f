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

interface Metric {
  name: string;
  help: string;
  type: 'counter' | 'gauge' | 'histogram';
  samples(): Array<[suffix: string, labels: Labels, value: number]>;
}

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
  /** A gauge computed at each scrape; `read` returns one value per label set. */
  gauge(name: string, help: string, read: () => Array<[Labels, number]>): void;
  /** The whole exposition text. A gauge whose read throws is left out (and the others still answer). */
  render(): string;
}

const keyOf = (labels: Labels) => JSON.stringify(Object.entries(labels).sort(([a], [b]) => (a < b ? -1 : 1)));

export function createRegistry(): Registry {
  const metrics: Metric[] = [];

  return {
    counter(name, help) {
      const values = new Map<string, { labels: Labels; value: number }>();
      metrics.push({ name, help, type: 'counter', samples: () => [...values.values()].map((v) => ['_total', v.labels, v.value]) });
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

    gauge(name, help, read) {
      metrics.push({ name, help, type: 'gauge', samples: () => read().map(([labels, v]) => ['', labels, v]) });
    },

    render() {
      const lines: string[] = [];
      for (const m of metrics) {
        let samples: Array<[string, Labels, number]>;
        try {
          samples = m.samples();
        } catch {
          continue; // fail soft: one unreadable gauge must not hide the rest
        }
        lines.push(`# HELP ${m.name}${m.type === 'counter' ? '_total' : ''} ${escapeHelp(m.help)}`);
        lines.push(`# TYPE ${m.name}${m.type === 'counter' ? '_total' : ''} ${m.type}`);
        for (const [suffix, labels, value] of samples) lines.push(`${m.name}${suffix}${labelText(labels)} ${formatValue(value)}`);
      }
      return `${lines.join('\n')}\n`;
    },
  };
}
