/**
 * Events: the recent events, filtered by the server (type, installation, time) and paged by its
 * cursor; send a sample event and watch the deliveries it caused and their attempts appear live;
 * open an event to see its deliveries and handler runs, and replay a run.
 */
import type { VNode } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { api, errorText, EVENT_TYPES, WEBHOOK_EVENT_TYPES, type Delivery, type HandlerRun, type Installation } from './api.tsx';
import { DeliveryTable } from './deliveries.tsx';
import { apiQuery, FilterBar, hrefOf, navigate, Pager, SelectFilter, TimeRange, withParams } from './filters.tsx';
import { LiveIndicator, useCoalesced, useLive } from './live.tsx';
import { announce, Badge, ErrorBox, PageTitle, Scroll, Section, Time } from './ui.tsx';

interface IngestResult {
  eventId: string;
  type: string;
  duplicate: boolean;
  deliveries: Array<{ id: string; installationId: string }>;
  handlers?: Array<{ id: string; installationId: string }>;
}

interface EventDetail {
  eventId: string;
  type: string;
  receivedAt: string;
  payload: unknown;
  deliveries: Delivery[];
  handlerRuns: HandlerRun[];
}

/** An event as GET /api/v1/events lists it. */
interface StoredEvent {
  eventId: string;
  type: string;
  installationId: string | null;
  receivedAt: string;
  deliveryCount: number;
}

/** The filters the events API takes, as the page's address names them (those of `switchyard events list`). */
export const EVENT_FILTERS = ['type', 'installation', 'since', 'until'] as const;
const PAGE = 50;

function SendEvent({ onSent }: { onSent(r: IngestResult): void }): VNode {
  const [type, setType] = useState<string>(WEBHOOK_EVENT_TYPES[0]);
  const [text, setText] = useState('');
  const [error, setError] = useState('');
  const [problems, setProblems] = useState<Array<{ where: string; message: string; hint?: string }>>([]);
  const [result, setResult] = useState<IngestResult | undefined>();
  const [busy, setBusy] = useState(false);

  const sample = (t: string) =>
    api<{ payload: unknown }>('GET', `/console/api/samples/${encodeURIComponent(t)}`)
      .then((r) => setText(JSON.stringify(r.payload, null, 2)))
      .catch((e) => setError(errorText(e)));

  useEffect(() => {
    void sample(type);
  }, [type]);

  async function submit(e: Event): Promise<void> {
    e.preventDefault();
    let payload: unknown;
    try {
      payload = JSON.parse(text);
    } catch (err) {
      setError(`The payload is not valid JSON: ${(err as Error).message}`);
      setProblems([]);
      return;
    }
    setBusy(true);
    try {
      const r = await api<IngestResult>('POST', '/api/v1/events', payload);
      setResult(r);
      setError('');
      setProblems([]);
      announce(
        `Event ${r.eventId} sent: ${r.deliveries.length} deliver${r.deliveries.length === 1 ? 'y' : 'ies'}${r.duplicate ? ' (duplicate, ignored)' : ''}`,
      );
      onSent(r);
      // A fresh eventId for the next send.
      void sample(type);
    } catch (err) {
      setError(errorText(err));
      setProblems((err as { problems?: typeof problems }).problems ?? []);
    } finally {
      setBusy(false);
    }
  }

  return (
    <form class="send-event" onSubmit={submit}>
      <div class="row">
        <div class="field">
          <label for="event-type">Event type</label>
          <select id="event-type" value={type} onChange={(e) => setType((e.currentTarget as HTMLSelectElement).value)}>
            {WEBHOOK_EVENT_TYPES.map((t) => (
              <option key={t} value={t}>
                {t}
              </option>
            ))}
          </select>
        </div>
        <button type="button" class="secondary" onClick={() => void sample(type)}>
          New sample
        </button>
      </div>
      <div class="field">
        <label for="event-payload">Payload (JSON)</label>
        <textarea id="event-payload" rows={10} spellcheck={false} value={text} onInput={(e) => setText((e.currentTarget as HTMLTextAreaElement).value)} />
      </div>
      <ErrorBox message={error} problems={problems} />
      <div class="row">
        <button type="submit" disabled={busy}>
          {busy ? 'Sending…' : 'Send event'}
        </button>
        {result ? (
          <span data-testid="sent-event">
            Sent{' '}
            <a href={`#/events/${encodeURIComponent(result.eventId)}`}>
              <code>{result.eventId}</code>
            </a>
            : {result.deliveries.length} deliver
            {result.deliveries.length === 1 ? 'y' : 'ies'}, {result.handlers?.length ?? 0} handler run{result.handlers?.length === 1 ? '' : 's'}
            {result.duplicate ? ' (duplicate: nothing new)' : ''}
          </span>
        ) : null}
      </div>
    </form>
  );
}

export function EventsPage({ eventId, query }: { eventId?: string; query: URLSearchParams }): VNode {
  const [deliveries, setDeliveries] = useState<Delivery[] | undefined>();
  const [event, setEvent] = useState<EventDetail | undefined>();
  const [replaying, setReplaying] = useState<string | undefined>();
  const [error, setError] = useState('');
  const [lastEvent, setLastEvent] = useState<string | undefined>(lastSent);
  const want = useRef({ lastEvent, eventId });
  want.current = { lastEvent, eventId };

  const refresh = useCoalesced(async () => {
    try {
      const { lastEvent: ev, eventId: evId } = want.current;
      const [list, shown] = await Promise.all([
        ev ? api<{ deliveries: Delivery[] }>('GET', `/api/v1/deliveries?limit=50&event=${encodeURIComponent(ev)}`) : Promise.resolve(undefined),
        evId ? api<EventDetail>('GET', `/api/v1/events/${encodeURIComponent(evId)}`) : Promise.resolve(undefined),
      ]);
      setDeliveries(list?.deliveries);
      setEvent(shown);
      setError('');
    } catch (e) {
      setError(errorText(e));
    }
  });

  const mode = useLive('/api/v1/deliveries/stream', ['attempt'], refresh);
  useEffect(refresh, [lastEvent, eventId]);

  // Handler runs have no live stream of their own: while one is still scheduled, look again shortly.
  const unsettled = event?.handlerRuns.some((r) => r.status === 'pending' || r.status === 'retrying') ?? false;
  useEffect(() => {
    if (!unsettled) return;
    const timer = setTimeout(refresh, 500);
    return () => clearTimeout(timer);
  }, [event, unsettled]);

  async function replay(runId: string): Promise<void> {
    setReplaying(runId);
    try {
      const r = await api<HandlerRun>('POST', `/api/v1/handler-runs/${encodeURIComponent(runId)}/replay`);
      announce(`Handler run ${r.id} replayed: ${r.status}`);
      refresh();
    } catch (e) {
      setError(errorText(e));
    } finally {
      setReplaying(undefined);
    }
  }

  const linkQuery = new URLSearchParams(lastEvent ? { event: lastEvent } : {});
  const [sentCount, setSentCount] = useState(0);
  return (
    <>
      <PageTitle>Events</PageTitle>
      {eventId ? (
        <EventPanel id={eventId} detail={event} closeHref={hrefOf('#/events', query)} replaying={replaying} onReplay={(run) => void replay(run)} />
      ) : null}
      <RecentEvents query={query} openId={eventId} sent={sentCount} />
      <Section title="Send a sample event">
        <SendEvent
          onSent={(r) => {
            lastSent = r.eventId;
            setLastEvent(r.eventId);
            setSentCount((n) => n + 1);
          }}
        />
        <h3 id="sent-deliveries">
          {lastEvent ? (
            <>
              Deliveries of the event sent, <code>{lastEvent}</code>
            </>
          ) : (
            'Deliveries of the event sent'
          )}
        </h3>
        <div class="row">
          <LiveIndicator mode={mode} />
          {lastEvent ? (
            <a class="small" href={hrefOf('#/deliveries', linkQuery)}>
              On the Deliveries page
            </a>
          ) : null}
        </div>
        <ErrorBox message={error} />
        {!lastEvent ? (
          <p class="muted">
            Send an event to watch its deliveries here. Every delivery, with filters, is on the <a href="#/deliveries">Deliveries</a> page.
          </p>
        ) : deliveries ? (
          deliveries.length ? (
            <DeliveryTable deliveries={deliveries} linkQuery={linkQuery} highlight={lastEvent} />
          ) : (
            <p class="muted">No deliveries for this event: no webhook installation subscribes to its type. Install the webhook integration with a URL.</p>
          )
        ) : (
          <p class="muted">Loading…</p>
        )}
      </Section>
    </>
  );
}

/**
 * The events received, newest first, 50 to a page by the API's cursor, with its filters kept in
 * the address (`#/events?type=&installation=&since=&until=&cursor=`). The newest page looks again
 * after an event is sent from this page and every 10 s (events have no live stream).
 */
function RecentEvents({ query, openId, sent }: { query: URLSearchParams; openId?: string; sent: number }): VNode {
  const [list, setList] = useState<{ events: StoredEvent[]; nextCursor: string | null } | undefined>();
  const [error, setError] = useState('');
  const [installations, setInstallations] = useState<Installation[]>([]);
  const paged = !!query.get('cursor');
  const listQuery = apiQuery(query, [...EVENT_FILTERS, 'cursor'], { limit: String(PAGE) });
  const want = useRef(listQuery);
  want.current = listQuery;

  useEffect(() => {
    api<{ installations: Installation[] }>('GET', '/api/v1/installations?all=true')
      .then((r) => setInstallations(r.installations))
      .catch(() => setInstallations([]));
  }, []);
  const load = useCoalesced(async () => {
    try {
      const q = want.current;
      const r = await api<{ events: StoredEvent[]; nextCursor: string | null }>('GET', `/api/v1/events?${q}`);
      if (want.current === q) setList(r), setError('');
    } catch (e) {
      setError(errorText(e));
    }
  });
  useEffect(load, [listQuery, sent]);
  useEffect(() => {
    if (paged) return;
    const t = setInterval(load, 10_000);
    return () => clearInterval(t);
  }, [paged]);

  const path = openId ? `#/events/${encodeURIComponent(openId)}` : '#/events';
  const set = (changes: Record<string, string | undefined>) => navigate(path, withParams(query, changes));
  const active = EVENT_FILTERS.filter((f) => query.get(f));
  const filters = new URLSearchParams(EVENT_FILTERS.filter((f) => query.get(f)).map((f) => [f, query.get(f)!]));
  return (
    <Section title="Recent events" id="recent-events">
      <FilterBar label="Filter events">
        <SelectFilter
          id="f-type"
          label="Type"
          value={query.get('type') ?? ''}
          options={[{ value: '', label: 'Any type' }, ...EVENT_TYPES.map((t) => ({ value: t, label: t }))]}
          onChange={(v) => set({ type: v })}
        />
        <SelectFilter
          id="f-installation"
          label="Installation"
          value={query.get('installation') ?? ''}
          options={[
            { value: '', label: 'Any installation' },
            ...installations.map((i) => ({ value: i.id, label: `${i.id} (${i.integration}${i.status === 'uninstalled' ? ', uninstalled' : ''})` })),
          ]}
          onChange={(v) => set({ installation: v })}
        />
        <TimeRange since={query.get('since') ?? ''} until={query.get('until') ?? ''} onChange={(since, until) => set({ since, until })} />
      </FilterBar>
      <p class="muted small">
        Installation: the events sent to that installation alone (an event naming its <code>installationId</code>). Newest first; the newest page looks again
        every 10 s.
        {active.length ? (
          <>
            {' '}
            <a href={hrefOf(openId ? path : '#/events', {})}>
              Clear {active.length} filter{active.length === 1 ? '' : 's'}
            </a>
          </>
        ) : null}
      </p>
      <ErrorBox message={error} />
      {list ? (
        list.events.length ? (
          <Scroll cards>
            <table class="table cards events">
              <caption class="sr-only">Events, newest first</caption>
              <thead>
                <tr>
                  <th scope="col">Event</th>
                  <th scope="col">Type</th>
                  <th scope="col">Installation</th>
                  <th scope="col">Deliveries</th>
                  <th scope="col">Received</th>
                </tr>
              </thead>
              <tbody>
                {list.events.map((e) => (
                  <tr key={e.eventId} data-event={e.eventId} class={e.eventId === openId ? 'selected' : ''}>
                    <td class="card-head">
                      <a href={hrefOf(`#/events/${encodeURIComponent(e.eventId)}`, filters)} aria-current={e.eventId === openId ? 'true' : undefined}>
                        <code>{e.eventId}</code>
                      </a>
                    </td>
                    <td class="card-line" data-label="Type">
                      {e.type}
                    </td>
                    <td data-label="Installation">
                      {e.installationId ? (
                        <a href={`#/installations/${encodeURIComponent(e.installationId)}`}>
                          <code>{e.installationId}</code>
                        </a>
                      ) : (
                        <span class="muted">every subscriber</span>
                      )}
                    </td>
                    <td data-label="Deliveries">{e.deliveryCount ? <a href={hrefOf('#/deliveries', { event: e.eventId })}>{e.deliveryCount}</a> : '0'}</td>
                    <td data-label="Received">
                      <Time at={e.receivedAt} />
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </Scroll>
        ) : (
          <p class="muted">{active.length || paged ? 'No event matches these filters.' : 'No events yet: send one below, or POST /api/v1/events.'}</p>
        )
      ) : error ? null : (
        <p class="muted">Loading…</p>
      )}
      <Pager query={query} path={path} nextCursor={list?.nextCursor} />
    </Section>
  );
}

/** The last event sent from this page, kept while the console is open (it survives a visit elsewhere). */
let lastSent: string | undefined;

/** One event: its handler runs (one per installation whose integration handles it), each replayable once finished. */
function EventPanel({
  id,
  detail,
  closeHref,
  replaying,
  onReplay,
}: {
  id: string;
  detail?: EventDetail;
  closeHref: string;
  replaying?: string;
  onReplay(runId: string): void;
}): VNode {
  const heading = useRef<HTMLHeadingElement>(null);
  useEffect(() => heading.current?.focus(), [id]);
  return (
    <section class="panel event" aria-labelledby="event-h">
      <div class="row">
        <h2 id="event-h" tabIndex={-1} ref={heading}>
          Event <code>{id}</code>
        </h2>
        <a href={closeHref} class="small push">
          Close
        </a>
      </div>
      {!detail ? (
        <p class="muted">Loading…</p>
      ) : (
        <>
          <dl class="facts">
            <dt>Type</dt>
            <dd>{detail.type}</dd>
            <dt>Received</dt>
            <dd>
              <Time at={detail.receivedAt} />
            </dd>
          </dl>
          <div class="row">
            <h3>Its deliveries</h3>
            {detail.deliveries.length ? (
              <a href={hrefOf('#/deliveries', { event: id })} class="small">
                On the Deliveries page
              </a>
            ) : null}
          </div>
          {detail.deliveries.length ? (
            <DeliveryTable deliveries={detail.deliveries} linkQuery={new URLSearchParams({ event: id })} />
          ) : (
            <p class="muted">None: no webhook installation subscribed to its type{detail.type ? ` (${detail.type})` : ''}.</p>
          )}
          <h3>Handler runs</h3>
          {detail.handlerRuns.length ? (
            <Scroll cards>
              <table class="table cards handler-runs" aria-live="polite">
                <thead>
                  <tr>
                    <th scope="col">Run</th>
                    <th scope="col">Installation</th>
                    <th scope="col">Status</th>
                    <th scope="col">Attempts</th>
                    <th scope="col">Last error</th>
                    <th scope="col">Next attempt</th>
                    <th scope="col">
                      <span class="sr-only">Actions</span>
                    </th>
                  </tr>
                </thead>
                <tbody>
                  {detail.handlerRuns.map((r) => (
                    <tr key={r.id} data-handler-run={r.id}>
                      <td class="card-head">
                        <code>{r.id}</code>
                        <div class="muted small">{r.integration}</div>
                      </td>
                      <td data-label="Installation">
                        <a href={`#/installations/${encodeURIComponent(r.installationId)}`}>
                          <code>{r.installationId}</code>
                        </a>
                      </td>
                      <td class="card-status" data-testid="handler-run-status">
                        <Badge status={r.status} />
                      </td>
                      <td data-label="Attempts">
                        {r.attemptCount} / {r.maxAttempts}
                      </td>
                      <td data-label="Last error">{r.lastError ? <span class="small">{r.lastError}</span> : '—'}</td>
                      <td data-label="Next attempt">
                        <Time at={r.nextAttemptAt} />
                      </td>
                      <td class="card-end">
                        <button
                          type="button"
                          onClick={() => onReplay(r.id)}
                          disabled={replaying !== undefined || (r.status !== 'failed' && r.status !== 'delivered')}
                          aria-label={`Replay handler run ${r.id}`}
                        >
                          {replaying === r.id ? 'Replaying…' : 'Replay'}
                        </button>
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </Scroll>
          ) : (
            <p class="muted">No integration handles this event.</p>
          )}
          <h3>Payload</h3>
          <pre class="body">{JSON.stringify(detail.payload, null, 2)}</pre>
        </>
      )}
    </section>
  );
}
