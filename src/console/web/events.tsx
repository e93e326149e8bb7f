/**
 * Events and deliveries: send a sample event, watch the deliveries it caused and their attempts
 * appear live, open one, retry it; open an event to see its handler runs and replay them.
 */
import type { VNode } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { api, errorText, WEBHOOK_EVENT_TYPES, type Delivery, type DeliveryDetail, type HandlerRun } from './api.tsx';
import { useLive } from './live.tsx';
import { announce, Badge, ErrorBox, PageTitle, Section, Time } from './ui.tsx';

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
  handlerRuns: HandlerRun[];
}

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
      announce(`Event ${r.eventId} sent: ${r.deliveries.length} deliver${r.deliveries.length === 1 ? 'y' : 'ies'}${r.duplicate ? ' (duplicate, ignored)' : ''}`);
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
            Sent <a href={`#/events/${encodeURIComponent(result.eventId)}`}><code>{result.eventId}</code></a>: {result.deliveries.length} deliver
            {result.deliveries.length === 1 ? 'y' : 'ies'}, {result.handlers?.length ?? 0} handler run{result.handlers?.length === 1 ? '' : 's'}
            {result.duplicate ? ' (duplicate: nothing new)' : ''}
          </span>
        ) : null}
      </div>
    </form>
  );
}

export function EventsPage({ openId, eventId }: { openId?: string; eventId?: string }): VNode {
  const [deliveries, setDeliveries] = useState<Delivery[] | undefined>();
  const [detail, setDetail] = useState<DeliveryDetail | undefined>();
  const [event, setEvent] = useState<EventDetail | undefined>();
  const [replaying, setReplaying] = useState<string | undefined>();
  const [error, setError] = useState('');
  const [lastEvent, setLastEvent] = useState<string | undefined>();
  const [onlyLast, setOnlyLast] = useState(false);
  const [retrying, setRetrying] = useState(false);
  const inFlight = useRef(false);
  const want = useRef({ openId, onlyLast, lastEvent, eventId });
  want.current = { openId, onlyLast, lastEvent, eventId };

  async function refresh(): Promise<void> {
    if (inFlight.current) return;
    inFlight.current = true;
    try {
      const { openId: id, onlyLast: only, lastEvent: ev, eventId: evId } = want.current;
      const q = only && ev ? `?limit=50&event=${encodeURIComponent(ev)}` : '?limit=50';
      const [list, one, shown] = await Promise.all([
        api<{ deliveries: Delivery[] }>('GET', `/api/v1/deliveries${q}`),
        id ? api<DeliveryDetail>('GET', `/api/v1/deliveries/${encodeURIComponent(id)}`) : Promise.resolve(undefined),
        evId ? api<EventDetail>('GET', `/api/v1/events/${encodeURIComponent(evId)}`) : Promise.resolve(undefined),
      ]);
      setDeliveries(list.deliveries);
      setDetail(one);
      setEvent(shown);
      setError('');
    } catch (e) {
      setError(errorText(e));
    } finally {
      inFlight.current = false;
    }
  }

  const mode = useLive(() => void refresh());
  useEffect(() => {
    void refresh();
  }, [openId, onlyLast, lastEvent, eventId]);

  // Handler runs have no live stream of their own: while one is still scheduled, look again shortly.
  const unsettled = event?.handlerRuns.some((r) => r.status === 'pending' || r.status === 'retrying') ?? false;
  useEffect(() => {
    if (!unsettled) return;
    const timer = setTimeout(() => void refresh(), 500);
    return () => clearTimeout(timer);
  }, [event, unsettled]);

  async function replay(runId: string): Promise<void> {
    setReplaying(runId);
    try {
      const r = await api<HandlerRun>('POST', `/api/v1/handler-runs/${encodeURIComponent(runId)}/replay`);
      announce(`Handler run ${r.id} replayed: ${r.status}`);
      await refresh();
    } catch (e) {
      setError(errorText(e));
    } finally {
      setReplaying(undefined);
    }
  }

  async function retry(id: string): Promise<void> {
    setRetrying(true);
    try {
      const r = await api<{ attempt: { number: number; status: number | null; outcome: string } }>('POST', `/api/v1/deliveries/${encodeURIComponent(id)}/retry`);
      announce(`Retry of ${id}: attempt ${r.attempt.number}, ${r.attempt.status ?? r.attempt.outcome}`);
      await refresh();
    } catch (e) {
      setError(errorText(e));
    } finally {
      setRetrying(false);
    }
  }

  return (
    <>
      <PageTitle>Events and deliveries</PageTitle>
      <Section title="Send a sample event">
        <SendEvent
          onSent={(r) => {
            setLastEvent(r.eventId);
            void refresh();
          }}
        />
      </Section>
      <Section title="Deliveries">
        <div class="row">
          <span class="live" data-live={mode}>
            {mode === 'stream' ? 'Live (stream)' : mode === 'polling' ? `Live (polling every ${1} s)` : 'Connecting…'}
          </span>
          {lastEvent ? (
            <label class="row">
              <input type="checkbox" checked={onlyLast} onChange={(e) => setOnlyLast((e.currentTarget as HTMLInputElement).checked)} />
              Only the last event sent
            </label>
          ) : null}
        </div>
        <ErrorBox message={error} />
        {deliveries ? (
          deliveries.length ? (
            <table class="table" aria-live="polite" aria-relevant="additions text">
              <caption class="sr-only">Latest deliveries, newest first, updated live</caption>
              <thead>
                <tr>
                  <th scope="col">Delivery</th>
                  <th scope="col">Event</th>
                  <th scope="col">Status</th>
                  <th scope="col">Attempts</th>
                  <th scope="col">Last answer</th>
                  <th scope="col">Updated</th>
                </tr>
              </thead>
              <tbody>
                {deliveries.map((d) => (
                  <tr key={d.id} data-delivery={d.id} class={d.id === openId ? 'selected' : d.eventId === lastEvent ? 'highlight' : ''}>
                    <td>
                      <a href={`#/deliveries/${encodeURIComponent(d.id)}`} aria-current={d.id === openId ? 'true' : undefined}>
                        <code>{d.id}</code>
                      </a>
                      <div class="muted small">{d.url}</div>
                    </td>
                    <td>
                      {d.eventType}
                      <div class="muted small">
                        <code>{d.eventId}</code>
                      </div>
                    </td>
                    <td>
                      <Badge status={d.status} />
                      {d.held ? <div class="muted small">installation paused: sent when it resumes</div> : null}
                    </td>
                    <td>
                      {d.attemptCount}
                      <div class="muted small">
                        {d.scheduledAttempts} of {d.maxAttempts} automatic
                      </div>
                    </td>
                    <td>{d.lastStatus ?? (d.lastError ? <span class="small">{d.lastError}</span> : '—')}</td>
                    <td>
                      <Time at={d.updatedAt} />
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          ) : (
            <p class="muted">No deliveries yet. Install the webhook integration with a URL, then send an event.</p>
          )
        ) : (
          <p class="muted">Loading…</p>
        )}
      </Section>
      {openId ? <DeliveryPanel id={openId} detail={detail} retrying={retrying} onRetry={() => void retry(openId)} /> : null}
      {eventId ? <EventPanel id={eventId} detail={event} replaying={replaying} onReplay={(run) => void replay(run)} /> : null}
    </>
  );
}

/** One event: its handler runs (one per installation whose integration handles it), each replayable once finished. */
function EventPanel({ id, detail, replaying, onReplay }: { id: string; detail?: EventDetail; replaying?: string; onReplay(runId: string): void }): VNode {
  const heading = useRef<HTMLHeadingElement>(null);
  useEffect(() => heading.current?.focus(), [id]);
  return (
    <section class="panel event" aria-labelledby="event-h">
      <div class="row">
        <h2 id="event-h" tabIndex={-1} ref={heading}>
          Event <code>{id}</code>
        </h2>
        <a href="#/events" class="small">
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
          <h3>Handler runs</h3>
          {detail.handlerRuns.length ? (
            <table class="table" aria-live="polite">
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
                    <td>
                      <code>{r.id}</code>
                      <div class="muted small">{r.integration}</div>
                    </td>
                    <td>
                      <a href={`#/installations/${encodeURIComponent(r.installationId)}`}>
                        <code>{r.installationId}</code>
                      </a>
                    </td>
                    <td data-testid="handler-run-status">
                      <Badge status={r.status} />
                    </td>
                    <td>
                      {r.attemptCount} / {r.maxAttempts}
                    </td>
                    <td>{r.lastError ? <span class="small">{r.lastError}</span> : '—'}</td>
                    <td>
                      <Time at={r.nextAttemptAt} />
                    </td>
                    <td>
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

function DeliveryPanel({ id, detail, retrying, onRetry }: { id: string; detail?: DeliveryDetail; retrying: boolean; onRetry(): void }): VNode {
  const heading = useRef<HTMLHeadingElement>(null);
  useEffect(() => heading.current?.focus(), [id]);
  return (
    <section class="panel delivery" aria-labelledby="delivery-h">
      <div class="row">
        <h2 id="delivery-h" tabIndex={-1} ref={heading}>
          Delivery <code>{id}</code>
        </h2>
        <a href="#/events" class="small">
          Close
        </a>
      </div>
      {!detail ? (
        <p class="muted">Loading…</p>
      ) : (
        <>
          <dl class="facts">
            <dt>Status</dt>
            <dd data-testid="delivery-status">
              <Badge status={detail.status} />
            </dd>
            <dt>Event</dt>
            <dd>
              {detail.eventType}{' '}
              <a href={`#/events/${encodeURIComponent(detail.eventId)}`}>
                <code>{detail.eventId}</code>
              </a>
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
            <dt>Next attempt</dt>
            <dd>{detail.held ? 'when the installation resumes' : <Time at={detail.nextAttemptAt} />}</dd>
            <dt>Signature</dt>
            <dd>
              <code class="small">{detail.signatureHeader ?? '—'}</code>
            </dd>
          </dl>
          <button type="button" onClick={onRetry} disabled={retrying || detail.status === 'cancelled'}>
            {retrying ? 'Retrying…' : 'Retry now'}
          </button>
          <h3>Attempts</h3>
          {detail.attempts.length ? (
            <table class="table attempts" aria-live="polite">
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
                    <td>
                      {a.number}
                      {a.manual ? <span class="muted small"> manual</span> : null}
                    </td>
                    <td>
                      <Time at={a.startedAt} />
                    </td>
                    <td>{a.durationMs === null ? '—' : `${Math.round(a.durationMs)} ms`}</td>
                    <td>{a.status ?? '—'}</td>
                    <td>
                      <Badge status={a.outcome} />
                      {a.error ? <div class="small">{a.error}</div> : null}
                    </td>
                    <td>
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
          ) : (
            <p class="muted">No attempt yet.</p>
          )}
          <h3>Body</h3>
          <pre class="body">{(() => {
            try {
              return JSON.stringify(JSON.parse(detail.body), null, 2);
            } catch {
              return detail.body;
            }
          })()}</pre>
        </>
      )}
    </section>
  );
}
