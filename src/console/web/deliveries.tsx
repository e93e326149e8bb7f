/**
 * Deliveries: the list filtered by the server (status, event type, installation, endpoint, time,
 * event id), newest first one page at a time, updated live; one delivery in a side panel with its
 * own address (#/deliveries/<id>?<filters>); a retry of one delivery and a replay of the failed
 * ones in a window, each after a confirmation.
 */
import type { VNode } from 'preact';
import { useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks';
import {
  api,
  DELIVERY_STATUSES,
  errorText,
  sentEventId,
  signatureHeaderName,
  WEBHOOK_EVENT_TYPES,
  type Delivery,
  type DeliveryDetail,
  type Installation,
} from './api.tsx';
import { apiQuery, FilterBar, hrefOf, navigate, Pager, SelectFilter, TimeRange, withParams } from './filters.tsx';
import { LiveIndicator, useCoalesced, useLive } from './live.tsx';
import { announce, Badge, ErrorBox, PageTitle, Scroll, Section, Time } from './ui.tsx';
import { formatTime } from './time.tsx';

/** The filters the deliveries API takes, as the page's address names them. */
export const DELIVERY_FILTERS = ['status', 'type', 'installation', 'endpoint', 'event', 'since', 'until'] as const;
const PAGE = 50;

/** Webhook installations (uninstalled ones too: their deliveries stay), for the filters. */
export function useWebhookInstallations(): Installation[] {
  const [list, setList] = useState<Installation[]>([]);
  useEffect(() => {
    api<{ installations: Installation[] }>('GET', '/api/v1/installations?integration=webhook&all=true')
      .then((r) => setList(r.installations))
      .catch(() => setList([]));
  }, []);
  return list;
}

export const webhookUrlOf = (i: Installation): string | undefined =>
  typeof i.configuration.webhook_url === 'string' ? i.configuration.webhook_url : undefined;

export function originOf(url: string | undefined): string | undefined {
  try {
    return url ? new URL(url).origin : undefined;
  } catch {
    return undefined;
  }
}

export function DeliveryTable({
  deliveries,
  openId,
  linkQuery,
  highlight,
}: {
  deliveries: Delivery[];
  openId?: string;
  linkQuery: URLSearchParams;
  highlight?: string;
}): VNode {
  // Cards where the list's column is narrow (style.css): a phone, or beside an open delivery.
  return (
    <Scroll cards>
      <table class="table cards deliveries" aria-live="polite" aria-relevant="additions text">
        <caption class="sr-only">Deliveries, newest first</caption>
        <thead>
          <tr>
            <th scope="col">Delivery</th>
            <th scope="col">Source event</th>
            <th scope="col">Status</th>
            <th scope="col">Attempts</th>
            <th scope="col">Last answer</th>
            <th scope="col">Created</th>
          </tr>
        </thead>
        <tbody>
          {deliveries.map((d) => (
            <tr key={d.id} data-delivery={d.id} class={d.id === openId ? 'selected' : d.eventId === highlight ? 'highlight' : ''}>
              <td class="c-delivery card-head">
                <a href={hrefOf(`#/deliveries/${encodeURIComponent(d.id)}`, linkQuery)} aria-current={d.id === openId ? 'true' : undefined}>
                  <code>{d.id}</code>
                </a>
                <div class="muted small url">{d.url}</div>
              </td>
              <td class="c-event card-line card-inline">
                {/* The spaces keep the words apart where a card shows these divs inline. */}
                {d.eventType}{' '}
                <div class="muted small">
                  <code>{d.eventId}</code>
                </div>
              </td>
              <td class="c-status card-status">
                <Badge status={d.status} />
                {d.held ? <div class="muted small">installation paused: sent when it resumes</div> : null}
              </td>
              <td class="c-attempts card-inline" data-label="Attempts">
                {d.attemptCount}{' '}
                <div class="muted small">
                  {d.scheduledAttempts} of {d.maxAttempts} automatic
                </div>
              </td>
              <td class="c-answer" data-label="Last answer">
                {d.lastStatus ?? (d.lastError ? <span class="small">{d.lastError}</span> : '—')}
              </td>
              <td class="c-created" data-label="Created">
                <Time at={d.createdAt} />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </Scroll>
  );
}

export function DeliveriesPage({ openId, query }: { openId?: string; query: URLSearchParams }): VNode {
  const [list, setList] = useState<{ deliveries: Delivery[]; nextCursor: string | null } | undefined>();
  const [detail, setDetail] = useState<DeliveryDetail | undefined>();
  const [error, setError] = useState('');
  const [detailError, setDetailError] = useState('');
  const [replaying, setReplaying] = useState(false);
  const installations = useWebhookInstallations();
  const paged = !!query.get('cursor');
  const listQuery = apiQuery(query, [...DELIVERY_FILTERS, 'cursor'], { limit: String(PAGE) });
  const want = useRef({ listQuery, openId });
  want.current = { listQuery, openId };

  const loadList = useCoalesced(async () => {
    try {
      const q = want.current.listQuery;
      const r = await api<{ deliveries: Delivery[]; nextCursor: string | null }>('GET', `/api/v1/deliveries?${q}`);
      if (want.current.listQuery === q) setList(r), setError('');
    } catch (e) {
      setError(errorText(e));
    }
  });
  const loadDetail = useCoalesced(async () => {
    const id = want.current.openId;
    if (!id) return setDetail(undefined);
    try {
      const d = await api<DeliveryDetail>('GET', `/api/v1/deliveries/${encodeURIComponent(id)}`);
      if (want.current.openId === id) setDetail(d), setDetailError('');
    } catch (e) {
      setDetailError(errorText(e));
    }
  });

  useEffect(loadList, [listQuery]);
  useEffect(() => {
    setDetail(undefined);
    setDetailError('');
    loadDetail();
  }, [openId]);
  // The stream filters what it can (installation, type); each attempt refetches what is shown. An
  // older page stays still while it is read; the open delivery always follows.
  const mode = useLive(`/api/v1/deliveries/stream?${apiQuery(query, ['installation', 'type'])}`, ['attempt'], () => {
    if (!paged) loadList();
    if (want.current.openId) loadDetail();
  });
  // New deliveries that have no attempt yet (held by a pause, waiting for a slot) make no stream
  // event: look again now and then.
  useEffect(() => {
    if (paged) return;
    const t = setInterval(loadList, 10_000);
    return () => clearInterval(t);
  }, [paged]);

  const set = (changes: Record<string, string | undefined>) =>
    navigate(openId ? `#/deliveries/${encodeURIComponent(openId)}` : '#/deliveries', withParams(query, changes));
  const closeHref = hrefOf('#/deliveries', query);
  // Attached in the commit that shows the panel (useEffect waits for a paint, and a key pressed as
  // soon as the panel shows would be missed).
  useLayoutEffect(() => {
    if (!openId) return;
    const onKey = (e: KeyboardEvent) => {
      if (e.key === 'Escape' && !(e.target as HTMLElement).closest('input, select, textarea')) location.hash = closeHref;
    };
    window.addEventListener('keydown', onKey);
    return () => window.removeEventListener('keydown', onKey);
  }, [openId, closeHref]);

  const endpoints = [...new Set(installations.map((i) => originOf(webhookUrlOf(i))).filter((o): o is string => !!o))].sort();
  const active = DELIVERY_FILTERS.filter((f) => query.get(f));

  return (
    <>
      <PageTitle>Deliveries</PageTitle>
      <div class={`split${openId ? ' open' : ''}`}>
        <div class="split-main">
          <Section title="Filters" id="delivery-filters">
            <FilterBar label="Filter deliveries">
              <SelectFilter
                id="f-status"
                label="Status"
                value={query.get('status') ?? ''}
                options={[{ value: '', label: 'Any status' }, ...DELIVERY_STATUSES.map((s) => ({ value: s, label: s }))]}
                onChange={(v) => set({ status: v })}
              />
              <SelectFilter
                id="f-type"
                label="Event type"
                value={query.get('type') ?? ''}
                options={[{ value: '', label: 'Any type' }, ...WEBHOOK_EVENT_TYPES.map((t) => ({ value: t, label: t }))]}
                onChange={(v) => set({ type: v })}
              />
              <SelectFilter
                id="f-installation"
                label="Installation"
                value={query.get('installation') ?? ''}
                options={[
                  { value: '', label: 'Any installation' },
                  ...installations.map((i) => ({
                    value: i.id,
                    label: `${i.id}${i.status === 'uninstalled' ? ' (uninstalled)' : ''} → ${webhookUrlOf(i) ?? 'no URL'}`,
                  })),
                ]}
                onChange={(v) => set({ installation: v })}
              />
              <SelectFilter
                id="f-endpoint"
                label="Endpoint"
                value={query.get('endpoint') ?? ''}
                options={[{ value: '', label: 'Any endpoint' }, ...endpoints.map((o) => ({ value: o, label: o }))]}
                onChange={(v) => set({ endpoint: v })}
              />
              <TimeRange since={query.get('since') ?? ''} until={query.get('until') ?? ''} onChange={(since, until) => set({ since, until })} />
            </FilterBar>
            <Search query={query} set={set} />
            <div class="row">
              <LiveIndicator mode={mode} />
              {paged ? <span class="muted small">An older page: live updates show on the newest one.</span> : null}
              {active.length ? (
                <a class="small" href={hrefOf('#/deliveries', {})}>
                  Clear {active.length} filter{active.length === 1 ? '' : 's'}
                </a>
              ) : null}
              <button type="button" class="secondary small push" onClick={() => setReplaying(true)} aria-expanded={replaying}>
                Replay failed…
              </button>
            </div>
            {replaying ? <ReplayDialog query={query} onClose={() => setReplaying(false)} onReplayed={() => loadList()} /> : null}
          </Section>
          <Section title="Deliveries" id="delivery-list">
            <ErrorBox message={error} />
            {list ? (
              list.deliveries.length ? (
                <DeliveryTable deliveries={list.deliveries} openId={openId} linkQuery={query} />
              ) : (
                <p class="muted">
                  {active.length || paged
                    ? 'No delivery matches these filters.'
                    : 'No deliveries yet. Install the webhook integration with a URL, then send an event.'}
                </p>
              )
            ) : error ? null : (
              <p class="muted">Loading…</p>
            )}
            <Pager query={query} path="#/deliveries" nextCursor={list?.nextCursor} />
          </Section>
        </div>
        {openId ? <DeliveryPanel id={openId} detail={detail} error={detailError} closeHref={closeHref} onChanged={() => (loadDetail(), loadList())} /> : null}
      </div>
    </>
  );
}

/** Event id -> the event filter; a delivery id (dlv_...) that exists -> that delivery. */
function Search({ query, set }: { query: URLSearchParams; set(changes: Record<string, string | undefined>): void }): VNode {
  const [text, setText] = useState(query.get('event') ?? '');
  useEffect(() => setText(query.get('event') ?? ''), [query.get('event')]);
  async function submit(e: Event): Promise<void> {
    e.preventDefault();
    const v = text.trim();
    if (/^dlv_/.test(v)) {
      try {
        await api('GET', `/api/v1/deliveries/${encodeURIComponent(v)}`);
        location.hash = hrefOf(`#/deliveries/${encodeURIComponent(v)}`, query);
        return;
      } catch {
        /* not a delivery: an event id that looks like one */
      }
    }
    set({ event: v || undefined });
  }
  return (
    <form class="row search" role="search" onSubmit={submit}>
      <label for="f-search">Event or delivery id</label>
      <input id="f-search" type="search" value={text} placeholder="evt_… or dlv_…" onInput={(e) => setText((e.currentTarget as HTMLInputElement).value)} />
      <button type="submit" class="secondary small">
        Search
      </button>
    </form>
  );
}

/** Replay the failed deliveries of a window: a dry run says how many first; nothing is sent until confirmed. */
function ReplayDialog({ query, onClose, onReplayed }: { query: URLSearchParams; onClose(): void; onReplayed(): void }): VNode {
  const [since, setSince] = useState(query.get('since') || '24h');
  const until = query.get('until') || undefined;
  const [matched, setMatched] = useState<number | undefined>();
  const [error, setError] = useState('');
  const [busy, setBusy] = useState(false);
  const heading = useRef<HTMLHeadingElement>(null);
  const scope = {
    failed: true,
    since,
    until,
    installation: query.get('installation') || undefined,
    type: query.get('type') || undefined,
    endpoint: query.get('endpoint') || undefined,
  };
  useEffect(() => heading.current?.focus(), []);
  useEffect(() => {
    setMatched(undefined);
    api<{ matched: number }>('POST', '/api/v1/deliveries/replay', { ...scope, dryRun: true })
      .then((r) => (setMatched(r.matched), setError('')))
      .catch((e) => setError(errorText(e)));
  }, [since]);
  async function replay(): Promise<void> {
    setBusy(true);
    try {
      const r = await api<{ replayed: number }>('POST', '/api/v1/deliveries/replay', scope);
      announce(`Replayed ${r.replayed} deliver${r.replayed === 1 ? 'y' : 'ies'}: they are being sent again.`);
      onReplayed();
      onClose();
    } catch (e) {
      setError(errorText(e));
    } finally {
      setBusy(false);
    }
  }
  const preset = ['1h', '24h', '7d', '30d'].includes(since);
  // `2h` reads "in the last 2h"; a date-time reads "since <local time>".
  const span = /^\d+(\.\d+)?(ms|s|m|h|d)$/.test(since) ? `in the last ${since}` : `since ${formatTime(since)}`;
  return (
    <div class="confirm" role="group" aria-labelledby="replay-h">
      <h3 id="replay-h" tabIndex={-1} ref={heading}>
        Replay failed deliveries
      </h3>
      <div class="row">
        <label for="replay-since">Created</label>
        <select id="replay-since" value={since} onChange={(e) => setSince((e.currentTarget as HTMLSelectElement).value)}>
          {preset ? null : <option value={since}>as filtered ({span})</option>}
          <option value="1h">in the last hour</option>
          <option value="24h">in the last 24 hours</option>
          <option value="7d">in the last 7 days</option>
          <option value="30d">in the last 30 days</option>
        </select>
      </div>
      <p>
        Every <strong>failed</strong> delivery created {span}
        {until ? ` until ${formatTime(until)}` : ''}
        {scope.installation ? (
          <>
            {' '}
            for installation <code>{scope.installation}</code>
          </>
        ) : null}
        {scope.type ? (
          <>
            {' '}
            of type <code>{scope.type}</code>
          </>
        ) : null}
        {scope.endpoint ? (
          <>
            {' '}
            to <code>{scope.endpoint}</code>
          </>
        ) : null}{' '}
        goes back to pending with a fresh retry schedule and is sent again to its installation's current URL.
      </p>
      <ErrorBox message={error} />
      <p data-testid="replay-matched" aria-live="polite">
        {matched === undefined
          ? error
            ? ''
            : 'Counting…'
          : matched === 0
            ? 'No failed delivery matches: nothing to replay.'
            : `${matched} failed deliver${matched === 1 ? 'y matches' : 'ies match'}.`}
      </p>
      <div class="row">
        <button type="button" class="danger" disabled={busy || !matched} onClick={() => void replay()}>
          {busy ? 'Replaying…' : `Replay ${matched ?? ''} deliver${matched === 1 ? 'y' : 'ies'}`}
        </button>
        <button type="button" class="secondary" onClick={onClose}>
          Cancel
        </button>
      </div>
    </div>
  );
}

/** One delivery beside the list: status, body, signature, every attempt, and a retry after a confirmation. */
export function DeliveryPanel({
  id,
  detail,
  error,
  closeHref,
  onChanged,
}: {
  id: string;
  detail?: DeliveryDetail;
  error: string;
  closeHref: string;
  onChanged(): void;
}): VNode {
  const heading = useRef<HTMLHeadingElement>(null);
  const [confirming, setConfirming] = useState(false);
  const [busy, setBusy] = useState(false);
  const [retryError, setRetryError] = useState('');
  useEffect(() => {
    heading.current?.focus();
    setConfirming(false);
    setRetryError('');
  }, [id]);

  async function retry(): Promise<void> {
    setBusy(true);
    try {
      const r = await api<{ attempt: { number: number; status: number | null; outcome: string } }>(
        'POST',
        `/api/v1/deliveries/${encodeURIComponent(id)}/retry`,
      );
      announce(`Retry of ${id}: attempt ${r.attempt.number}, ${r.attempt.status ?? r.attempt.outcome}`);
      setRetryError('');
      onChanged();
    } catch (e) {
      setRetryError(errorText(e));
    } finally {
      setBusy(false);
      setConfirming(false);
    }
  }

  return (
    <aside class="panel side delivery" aria-labelledby="delivery-h">
      <div class="row">
        <h2 id="delivery-h" tabIndex={-1} ref={heading}>
          Delivery <code>{id}</code>
        </h2>
        <a href={closeHref} class="small push">
          Close
        </a>
      </div>
      <ErrorBox message={error} />
      {!detail ? (
        error ? null : (
          <p class="muted">Loading…</p>
        )
      ) : (
        <>
          <dl class="facts">
            <dt>Status</dt>
            <dd data-testid="delivery-status">
              <Badge status={detail.status} />
              {detail.held ? <span class="muted small"> the installation is paused: sent when it resumes</span> : null}
            </dd>
            <dt>eventId</dt>
            <dd>
              <code data-testid="delivery-event-id">{sentEventId(detail)}</code> <span class="muted small">this delivery's own, as the receiver gets it</span>
            </dd>
            <dt>Source event</dt>
            <dd>
              {detail.eventType}{' '}
              <a href={`#/events/${encodeURIComponent(detail.eventId)}`}>
                <code data-testid="delivery-source-event">{detail.eventId}</code>
              </a>{' '}
              <span class="muted small">(sourceEventId in the body)</span>
            </dd>
            <dt>Installation</dt>
            <dd>
              <a href={`#/installations/${encodeURIComponent(detail.installationId)}`}>
                <code>{detail.installationId}</code>
              </a>
            </dd>
            <dt>URL</dt>
            <dd>
              <code>{detail.url}</code>
            </dd>
            <dt>Attempts</dt>
            <dd>
              {detail.attemptCount} in all; {detail.scheduledAttempts} of {detail.maxAttempts} automatic in this schedule
            </dd>
            <dt>Created</dt>
            <dd>
              <Time at={detail.createdAt} />
            </dd>
            <dt>Next attempt</dt>
            <dd>{detail.held ? 'when the installation resumes' : <Time at={detail.nextAttemptAt} />}</dd>
            <dt>Signature</dt>
            <dd>
              {detail.signatureHeader ? (
                <code class="small" data-testid="delivery-signature">
                  {signatureHeaderName(detail.signatureHeader)}: {detail.signatureHeader}
                </code>
              ) : (
                '—'
              )}
            </dd>
          </dl>
          {confirming ? (
            <div class="confirm" role="group" aria-labelledby="retry-q">
              <p id="retry-q">
                Send this delivery to <code>{detail.url}</code> once more, now? The attempt is recorded as manual; if it succeeds the delivery is marked
                delivered.
              </p>
              <div class="row">
                <button type="button" disabled={busy} onClick={() => void retry()}>
                  {busy ? 'Sending…' : 'Send now'}
                </button>
                <button type="button" class="secondary" onClick={() => setConfirming(false)}>
                  Cancel
                </button>
              </div>
            </div>
          ) : (
            <button type="button" onClick={() => setConfirming(true)} disabled={busy || detail.status === 'cancelled'}>
              Retry now…
            </button>
          )}
          <ErrorBox message={retryError} />
          <h3>Attempts</h3>
          {detail.attempts.length ? (
            <Scroll cards>
              <table class="table cards attempts" aria-live="polite">
                <thead>
                  <tr>
                    <th scope="col">#</th>
                    <th scope="col">Started</th>
                    <th scope="col">Duration</th>
                    <th scope="col">Answer</th>
                    <th scope="col">Outcome</th>
                    <th scope="col">Response</th>
                  </tr>
                </thead>
                <tbody>
                  {detail.attempts.map((a) => (
                    <tr key={`${a.number}-${a.startedAt}`} data-attempt={a.number}>
                      <td class="c-number">
                        {a.number}
                        {a.manual ? <span class="muted small"> manual</span> : null}
                      </td>
                      <td data-label="Started">
                        <Time at={a.startedAt} />
                      </td>
                      <td data-label="Duration">{a.durationMs === null ? '—' : `${Math.round(a.durationMs)} ms`}</td>
                      <td data-label="Answer">{a.status ?? a.errorCode ?? '—'}</td>
                      <td class="c-outcome card-end">
                        <Badge status={a.outcome} />
                        {a.error ? <div class="small">{a.error}</div> : null}
                      </td>
                      <td class="c-response card-end">
                        {a.responseExcerpt ? (
                          <pre class="excerpt">
                            {a.responseExcerpt}
                            {a.responseTruncated ? '…' : ''}
                          </pre>
                        ) : (
                          '—'
                        )}
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </Scroll>
          ) : (
            <p class="muted">No attempt yet.</p>
          )}
          <h3>Body</h3>
          <pre class="body">
            {(() => {
              try {
                return JSON.stringify(JSON.parse(detail.body), null, 2);
              } catch {
                return detail.body;
              }
            })()}
          </pre>
        </>
      )}
    </aside>
  );
}
