/**
 * Charts per endpoint (URL origin), drawn as plain SVG from GET /api/v1/deliveries/stats: the
 * deliveries created per bucket stacked by their status now, and how long they took (ingest to
 * delivery, p50 and p95) beside the endpoint's own answer time (p50), over the last hour (minute
 * buckets) or day (15-minute buckets). Every bar and point has a tooltip, and the numbers are in a
 * table under each chart. Refreshed by the deliveries stream (at most every few seconds) and every
 * half minute, as the window moves.
 */
import type { ComponentChildren, VNode } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { api, errorText, type DeliveryStats, type EndpointStats, type Installation, type Percentiles } from './api.tsx';
import { originOf, useWebhookInstallations, webhookUrlOf } from './deliveries.tsx';
import { FilterBar, hrefOf, navigate, SelectFilter, withParams } from './filters.tsx';
import { LiveIndicator, useCoalesced, useLive } from './live.tsx';
import { Badge, ErrorBox, PageTitle, Scroll, Section } from './ui.tsx';
import { formatClock, formatTime } from './time.tsx';

const WINDOWS = {
  '1h': { label: 'Last hour', bucket: '1m', per: 'minute' },
  '24h': { label: 'Last 24 hours', bucket: '15m', per: '15 minutes' },
} as const;
type Window = keyof typeof WINDOWS;

/** Known statuses in the order they stack (good at the bottom); others follow, in a neutral colour. */
const STATUS_ORDER = ['delivered', 'pending', 'retrying', 'held', 'failed', 'cancelled'];
const STATUS_COLOUR: Record<string, string> = {
  delivered: '#1e7a3c',
  pending: '#6b8fd6',
  retrying: '#d39200',
  held: '#8a63c4',
  failed: '#b3261e',
  cancelled: '#9aa3b2',
};
const OTHER_COLOURS = ['#3f7f8c', '#a0522d', '#5b6475', '#7a8b2e'];
const colourOf = (status: string, others: string[]) => STATUS_COLOUR[status] ?? OTHER_COLOURS[Math.max(0, others.indexOf(status)) % OTHER_COLOURS.length];

const SERIES = [
  { key: 'p50', label: 'delivered after, p50', pick: (b: Bucket) => b.latency?.p50, colour: '#2457c5', dash: '' },
  { key: 'p95', label: 'delivered after, p95', pick: (b: Bucket) => b.latency?.p95, colour: '#2457c5', dash: '5 3' },
  { key: 'response', label: 'endpoint answer, p50', pick: (b: Bucket) => b.response?.p50, colour: '#d36b00', dash: '' },
] as const;

interface Bucket {
  at: number;
  counts: Record<string, number>;
  latency: Percentiles | null;
  response: Percentiles | null;
}

/** Every bucket of the window, the empty ones too (the API lists only those with data). */
function denseBuckets(stats: DeliveryStats, e: EndpointStats): Bucket[] {
  const start = Date.parse(stats.since);
  const n = Math.max(1, Math.ceil((Date.parse(stats.until) - start) / stats.bucketMs));
  const out: Bucket[] = Array.from({ length: n }, (_, i) => ({ at: start + i * stats.bucketMs, counts: {}, latency: null, response: null }));
  for (const b of e.buckets) {
    const i = Math.round((Date.parse(b.at) - start) / stats.bucketMs);
    if (out[i]) out[i] = { at: out[i].at, counts: b.counts, latency: b.latency, response: b.response };
  }
  return out;
}

/** The smallest of 1, 2, 4, 6, 8 x 10^k at or above `v` (its half is a round number too). */
function niceMax(v: number): number {
  if (v <= 0) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  return [1, 2, 4, 6, 8, 10].map((m) => m * p).find((x) => x >= v)!;
}

export const formatMs = (ms: number) => (ms >= 10_000 ? `${Math.round(ms / 1000)} s` : ms >= 1000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms)} ms`);

function useWidth(): [(el: HTMLDivElement | null) => void, number] {
  const [width, setWidth] = useState(600);
  const observer = useRef<ResizeObserver | undefined>(undefined);
  const ref = (el: HTMLDivElement | null) => {
    observer.current?.disconnect();
    if (!el) return;
    observer.current = new ResizeObserver(([entry]) => setWidth(Math.max(200, Math.floor(entry.contentRect.width))));
    observer.current.observe(el);
  };
  useEffect(() => () => observer.current?.disconnect(), []);
  return [ref, width];
}

const M = { top: 8, right: 8, bottom: 20, left: 44 };
const H = 150;

/** Axes shared by both charts: y ticks at 0, half and the top, x labels at a few bucket starts. */
function Axes({ width, buckets, max, format, whole }: { width: number; buckets: Bucket[]; max: number; format(v: number): string; whole?: boolean }): VNode {
  const plotH = H - M.top - M.bottom;
  const bw = (width - M.left - M.right) / buckets.length;
  const every = Math.max(1, Math.ceil(buckets.length / Math.max(2, Math.floor((width - M.left) / 70))));
  // Counts have no half-deliveries: a top of 1 gets no middle line.
  const ticks = whole && max < 2 ? [0, 1] : [0, 0.5, 1];
  return (
    <g class="axes">
      {ticks.map((f) => {
        const y = M.top + plotH * (1 - f);
        return (
          <g key={f}>
            <line x1={M.left} x2={width - M.right} y1={y} y2={y} class="grid" />
            <text x={M.left - 4} y={y + 4} text-anchor="end">
              {format(max * f)}
            </text>
          </g>
        );
      })}
      {buckets.map((b, i) =>
        i % every === 0 && M.left + i * bw < width - 36 ? (
          <text key={b.at} x={M.left + i * bw} y={H - 5}>
            {formatClock(new Date(b.at), false)}
          </text>
        ) : null,
      )}
    </g>
  );
}

function Legend({ items }: { items: Array<{ label: string; colour: string; dash?: string; count?: number }> }): VNode {
  return (
    <ul class="legend">
      {items.map((i) => (
        <li key={i.label}>
          <svg width="18" height="10" aria-hidden="true">
            {i.dash === undefined ? (
              <rect width="18" height="10" fill={i.colour} />
            ) : (
              <line x1="0" x2="18" y1="5" y2="5" stroke={i.colour} stroke-width="2" stroke-dasharray={i.dash} />
            )}
          </svg>
          {i.label}
          {i.count !== undefined ? ` (${i.count})` : ''}
        </li>
      ))}
    </ul>
  );
}

function Chart({
  label,
  children,
  width,
  sizer,
}: {
  label: string;
  children: ComponentChildren;
  width: number;
  sizer(el: HTMLDivElement | null): void;
}): VNode {
  return (
    <div class="chart" ref={sizer}>
      <svg width={width} height={H} viewBox={`0 0 ${width} ${H}`} role="img" aria-label={label}>
        {children}
      </svg>
    </div>
  );
}

function DeliveriesChart({
  buckets,
  statuses,
  others,
  per,
  endpoint,
}: {
  buckets: Bucket[];
  statuses: string[];
  others: string[];
  per: string;
  endpoint: string;
}): VNode {
  const [sizer, width] = useWidth();
  const max = niceMax(Math.max(0, ...buckets.map((b) => Object.values(b.counts).reduce((a, n) => a + n, 0))));
  const plotH = H - M.top - M.bottom;
  const bw = (width - M.left - M.right) / buckets.length;
  const total = buckets.reduce((a, b) => a + Object.values(b.counts).reduce((x, n) => x + n, 0), 0);
  return (
    <Chart sizer={sizer} width={width} label={`Deliveries per ${per} to ${endpoint}, by status: ${total} in all`}>
      <Axes width={width} buckets={buckets} max={max} format={(v) => String(Math.round(v))} whole />
      {buckets.map((b, i) => {
        let y = M.top + plotH;
        return (
          <g key={b.at}>
            {statuses.map((s) => {
              const n = b.counts[s] ?? 0;
              if (!n) return null;
              const h = (n / max) * plotH;
              y -= h;
              return (
                <rect key={s} data-status={s} x={M.left + i * bw + 0.5} y={y} width={Math.max(1, bw - 1)} height={Math.max(1, h)} fill={colourOf(s, others)}>
                  <title>{`${formatTime(new Date(b.at).toISOString())}: ${n} ${s}`}</title>
                </rect>
              );
            })}
          </g>
        );
      })}
    </Chart>
  );
}

function LatencyChart({ buckets, endpoint }: { buckets: Bucket[]; endpoint: string }): VNode {
  const [sizer, width] = useWidth();
  const values = buckets.flatMap((b) => SERIES.map((s) => s.pick(b)).filter((v): v is number => v !== undefined));
  const max = niceMax(Math.max(0, ...values));
  const plotH = H - M.top - M.bottom;
  const bw = (width - M.left - M.right) / buckets.length;
  const x = (i: number) => M.left + i * bw + bw / 2;
  const y = (v: number) => M.top + plotH * (1 - v / max);
  return (
    <Chart sizer={sizer} width={width} label={`Latency of deliveries to ${endpoint}: time to delivery p50 and p95, and the endpoint's answer time p50`}>
      <Axes width={width} buckets={buckets} max={max} format={formatMs} />
      {SERIES.map((s) => {
        // One path per run of buckets that have a value: a gap where there was nothing to measure.
        let d = '';
        let drawing = false;
        buckets.forEach((b, i) => {
          const v = s.pick(b);
          if (v === undefined) return void (drawing = false);
          d += `${drawing ? 'L' : 'M'}${x(i).toFixed(1)} ${y(v).toFixed(1)} `;
          drawing = true;
        });
        return (
          <g key={s.key} data-series={s.key}>
            <path d={d} fill="none" stroke={s.colour} stroke-width="2" stroke-dasharray={s.dash || undefined} />
            {buckets.map((b, i) => {
              const v = s.pick(b);
              return v === undefined ? null : (
                <circle key={b.at} cx={x(i)} cy={y(v)} r="2.5" fill={s.colour}>
                  <title>{`${formatTime(new Date(b.at).toISOString())}: ${s.label} ${formatMs(v)}`}</title>
                </circle>
              );
            })}
          </g>
        );
      })}
    </Chart>
  );
}

function EndpointCard({ stats, e, per }: { stats: DeliveryStats; e: EndpointStats; per: string }): VNode {
  const buckets = denseBuckets(stats, e);
  const seen = Object.keys(e.byStatus);
  const others = seen.filter((s) => !STATUS_ORDER.includes(s)).sort();
  const statuses = [...STATUS_ORDER.filter((s) => seen.includes(s)), ...others];
  const filled = buckets.filter((b) => Object.keys(b.counts).length || b.latency || b.response);
  return (
    <section class="panel endpoint" data-endpoint={e.endpoint} aria-labelledby={`ep-${e.endpoint}`}>
      <div class="row">
        <h2 id={`ep-${e.endpoint}`}>
          <code>{e.endpoint}</code>
        </h2>
        <a class="small push" href={hrefOf('#/deliveries', { endpoint: e.endpoint, since: stats.bucketMs >= 900_000 ? '24h' : '1h' })}>
          Its deliveries
        </a>
      </div>
      <p class="row totals">
        {e.total} deliver{e.total === 1 ? 'y' : 'ies'}:{' '}
        {statuses.map((s) => (
          <span key={s} class="row nowrap">
            <Badge status={s} /> {e.byStatus[s]}
          </span>
        ))}
      </p>
      <h3>Deliveries per {per}, by status now</h3>
      <DeliveriesChart buckets={buckets} statuses={statuses} others={others} per={per} endpoint={e.endpoint} />
      <Legend items={statuses.map((s) => ({ label: s, colour: colourOf(s, others), count: e.byStatus[s] }))} />
      <h3>Latency</h3>
      <LatencyChart buckets={buckets} endpoint={e.endpoint} />
      <Legend items={SERIES.map((s) => ({ label: s.label, colour: s.colour, dash: s.dash }))} />
      <details>
        <summary>The numbers</summary>
        <Scroll cards>
          <table class="table cards numbers">
            <thead>
              <tr>
                <th scope="col">From</th>
                {statuses.map((s) => (
                  <th key={s} scope="col">
                    {s}
                  </th>
                ))}
                <th scope="col">Delivered after p50 / p95</th>
                <th scope="col">Answer p50 / p95</th>
              </tr>
            </thead>
            <tbody>
              {filled.map((b) => (
                <tr key={b.at}>
                  <td class="card-head">{formatTime(new Date(b.at).toISOString())}</td>
                  {statuses.map((s) => (
                    <td key={s} data-status={s} data-label={s}>
                      {b.counts[s] ?? 0}
                    </td>
                  ))}
                  <td data-label="Delivered after p50 / p95">{b.latency ? `${formatMs(b.latency.p50)} / ${formatMs(b.latency.p95)}` : '—'}</td>
                  <td data-label="Answer p50 / p95">{b.response ? `${formatMs(b.response.p50)} / ${formatMs(b.response.p95)}` : '—'}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </Scroll>
      </details>
    </section>
  );
}

export function ChartsPage({ query }: { query: URLSearchParams }): VNode {
  const win: Window = query.get('window') === '24h' ? '24h' : '1h';
  const { bucket, per } = WINDOWS[win];
  const endpoint = query.get('endpoint') ?? '';
  const installation = query.get('installation') ?? '';
  const [stats, setStats] = useState<DeliveryStats | undefined>();
  const [error, setError] = useState('');
  const installations = useWebhookInstallations();
  const statsQuery = new URLSearchParams({ since: win, bucket, ...(endpoint ? { endpoint } : {}), ...(installation ? { installation } : {}) }).toString();
  const want = useRef(statsQuery);
  want.current = statsQuery;
  const last = useRef(0);

  const took = useRef(0);
  const load = useCoalesced(async () => {
    try {
      const q = want.current;
      last.current = Date.now();
      const r = await api<DeliveryStats>('GET', `/api/v1/deliveries/stats?${q}`);
      took.current = Date.now() - last.current;
      if (want.current === q) setStats(r), setError('');
    } catch (e) {
      setError(errorText(e));
    }
  });
  useEffect(load, [statsQuery]);
  // Attempts move the numbers: refetch, but not more than every 3 s, and never more than 1/20 of
  // the time: the server computes the numbers on its event loop, which also sends deliveries (a
  // busy hour of 100,000 deliveries takes it ~0.4 s). The window itself moves too.
  const gap = (least: number) => Math.max(least, 20 * took.current) - (Date.now() - last.current);
  const pending = useRef<ReturnType<typeof setTimeout> | undefined>(undefined);
  const mode = useLive('/api/v1/deliveries/stream', ['attempt'], () => {
    if (pending.current) return;
    pending.current = setTimeout(
      () => {
        pending.current = undefined;
        load();
      },
      Math.max(0, gap(3000)),
    );
  });
  useEffect(() => {
    const t = setInterval(() => gap(30_000) <= 0 && load(), 5_000);
    return () => (clearInterval(t), clearTimeout(pending.current));
  }, []);

  const set = (changes: Record<string, string | undefined>) => navigate('#/charts', withParams(query, changes));
  const endpoints = [...new Set(installations.map((i: Installation) => originOf(webhookUrlOf(i))).filter((o): o is string => !!o))].sort();
  return (
    <>
      <PageTitle>Charts</PageTitle>
      <Section title="Which deliveries" id="chart-filters">
        <FilterBar label="Chart filters">
          <SelectFilter
            id="c-window"
            label="Window"
            value={win}
            options={Object.entries(WINDOWS).map(([value, w]) => ({ value, label: `${w.label} (per ${w.per})` }))}
            onChange={(v) => set({ window: v === '1h' ? undefined : v })}
          />
          <SelectFilter
            id="c-endpoint"
            label="Endpoint"
            value={endpoint}
            options={[{ value: '', label: 'Every endpoint' }, ...endpoints.map((o) => ({ value: o, label: o }))]}
            onChange={(v) => set({ endpoint: v })}
          />
          <SelectFilter
            id="c-installation"
            label="Installation"
            value={installation}
            options={[
              { value: '', label: 'Any installation' },
              ...installations.map((i) => ({ value: i.id, label: `${i.id} → ${webhookUrlOf(i) ?? 'no URL'}` })),
            ]}
            onChange={(v) => set({ installation: v })}
          />
        </FilterBar>
        <p class="row">
          <LiveIndicator mode={mode} />
          <span class="muted small">Deliveries created in the window, by their status now; latency is ingest to delivery. An endpoint is a URL origin.</span>
        </p>
      </Section>
      <ErrorBox message={error} />
      {stats ? (
        stats.endpoints.length ? (
          stats.endpoints.map((e) => <EndpointCard key={e.endpoint} stats={stats} e={e} per={per} />)
        ) : (
          <p class="muted">No deliveries in this window.</p>
        )
      ) : error ? null : (
        <p class="muted">Loading…</p>
      )}
    </>
  );
}
