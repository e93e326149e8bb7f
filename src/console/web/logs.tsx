/**
 * Logs: what integration code printed, one block per invocation (time, request id, integration,
 * installation, event, status, outcome, duration, CPU, then each line and its fault), with the
 * filters of `switchyard logs` (integration, installation, event, errors, since, until), newest
 * first one page at a time, and live from GET /api/v1/logs/stream like `logs --follow`.
 */
import type { VNode } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { api, errorText, type Installation, type Integration, type InvocationView } from './api.tsx';
import { apiQuery, FilterBar, hrefOf, navigate, Pager, SelectFilter, TimeRange, withParams } from './filters.tsx';
import { LiveIndicator, useCoalesced, useLive } from './live.tsx';
import { Badge, ErrorBox, PageTitle, Section, Time } from './ui.tsx';
import { formatClock } from './time.tsx';

export const LOG_FILTERS = ['integration', 'installation', 'event', 'errors', 'since', 'until'] as const;
/**
 * The renders of components (`ui_render`: each page of the console that shows one makes them) are
 * left out unless the address says `renders=true`, so a person's own visits do not drown what the
 * integration did: the API's `renders=false`.
 */
const RENDER = 'ui_render';
const rendersParam = (query: URLSearchParams) => ({ renders: query.get('renders') === 'true' ? undefined : 'false' });
const PAGE = 20;

/** One invocation by its request id (`#/logs/<requestId>`), e.g. the render a component's error links to. */
function LogEntry({ requestId }: { requestId: string }): VNode {
  const [entry, setEntry] = useState<InvocationView | undefined>();
  const [error, setError] = useState('');
  useEffect(() => {
    api<InvocationView>('GET', `/api/v1/logs/${encodeURIComponent(requestId)}`)
      .then((r) => (setEntry(r), setError('')))
      .catch((e) => setError(errorText(e)));
  }, [requestId]);
  return (
    <>
      <p>
        <a href="#/logs">← Logs</a>
      </p>
      <PageTitle>
        Log entry <code>{requestId}</code>
      </PageTitle>
      <ErrorBox message={error} />
      {entry ? (
        <>
          <ol class="invocations">
            <Invocation i={entry} />
          </ol>
          {entry.installationId ? (
            <p>
              <a href={hrefOf('#/logs', { installation: entry.installationId, renders: entry.eventType === RENDER ? 'true' : undefined })}>
                Every log of this installation
              </a>
            </p>
          ) : null}
        </>
      ) : error ? null : (
        <p class="muted">Loading…</p>
      )}
    </>
  );
}

export function LogsPage({ query, requestId }: { query: URLSearchParams; requestId?: string }): VNode {
  return requestId ? <LogEntry requestId={requestId} /> : <LogList query={query} />;
}

function LogList({ query }: { query: URLSearchParams }): VNode {
  const [list, setList] = useState<{ invocations: InvocationView[]; nextCursor: string | null } | undefined>();
  const [error, setError] = useState('');
  const [integrations, setIntegrations] = useState<Integration[]>([]);
  const [installations, setInstallations] = useState<Installation[]>([]);
  const paged = !!query.get('cursor');
  const listQuery = apiQuery(query, [...LOG_FILTERS, 'cursor'], { limit: String(PAGE), ...rendersParam(query) });
  const want = useRef(listQuery);
  want.current = listQuery;

  useEffect(() => {
    api<{ integrations: Integration[] }>('GET', '/api/v1/integrations')
      .then((r) => setIntegrations(r.integrations))
      .catch(() => setIntegrations([]));
    api<{ installations: Installation[] }>('GET', '/api/v1/installations?all=true')
      .then((r) => setInstallations(r.installations))
      .catch(() => setInstallations([]));
  }, []);

  const load = useCoalesced(async () => {
    try {
      const q = want.current;
      const r = await api<{ invocations: InvocationView[]; nextCursor: string | null }>('GET', `/api/v1/logs?${q}`);
      if (want.current === q) setList(r), setError('');
    } catch (e) {
      setError(errorText(e));
    }
  });
  useEffect(load, [listQuery]);
  // The stream takes the same filters as the list; every invocation (and every line printed after
  // an answer) refetches the newest page. An older page stays still while it is read.
  const mode = useLive(`/api/v1/logs/stream?${apiQuery(query, LOG_FILTERS, rendersParam(query))}`, ['invocation', 'log'], () => {
    if (!paged) load();
  });

  const set = (changes: Record<string, string | undefined>) => navigate('#/logs', withParams(query, changes));
  const [event, setEvent] = useState(query.get('event') ?? '');
  useEffect(() => setEvent(query.get('event') ?? ''), [query.get('event')]);
  const active = [...LOG_FILTERS, 'renders'].filter((f) => query.get(f));
  const renders = query.get('renders') === 'true';

  return (
    <>
      <PageTitle>Logs</PageTitle>
      <Section title="Filters" id="log-filters">
        <FilterBar label="Filter invocations">
          <SelectFilter
            id="f-integration"
            label="Integration"
            value={query.get('integration') ?? ''}
            options={[{ value: '', label: 'Any integration' }, ...integrations.map((i) => ({ value: i.name, label: i.name }))]}
            onChange={(v) => set({ integration: v })}
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
          <div class="field field-check">
            <label class="row">
              <input
                type="checkbox"
                checked={query.get('errors') === 'true'}
                onChange={(e) => set({ errors: (e.currentTarget as HTMLInputElement).checked ? 'true' : undefined })}
              />
              Only errors
            </label>
          </div>
          <div class="field field-check">
            <label class="row">
              <input type="checkbox" checked={renders} onChange={(e) => set({ renders: (e.currentTarget as HTMLInputElement).checked ? 'true' : undefined })} />
              Show component renders
            </label>
          </div>
        </FilterBar>
        <form
          class="row search"
          role="search"
          onSubmit={(e) => {
            e.preventDefault();
            set({ event: event.trim() || undefined });
          }}
        >
          <label for="f-event">Event id</label>
          <input
            id="f-event"
            type="search"
            value={event}
            placeholder="the handlers of this event"
            onInput={(e) => setEvent((e.currentTarget as HTMLInputElement).value)}
          />
          <button type="submit" class="secondary small">
            Search
          </button>
        </form>
        {renders ? null : (
          <p class="muted small" data-testid="renders-hidden">
            Component renders (<code>{RENDER}</code>: every view of a component, in this console too, and the handler it calls) are left out.
          </p>
        )}
        <div class="row">
          <LiveIndicator mode={mode} />
          {paged ? <span class="muted small">An older page: live updates show on the newest one.</span> : null}
          {active.length ? (
            <a class="small" href={hrefOf('#/logs', {})}>
              Clear {active.length} filter{active.length === 1 ? '' : 's'}
            </a>
          ) : null}
        </div>
      </Section>
      <Section title="Invocations" id="invocations">
        <ErrorBox message={error} />
        {list ? (
          list.invocations.length ? (
            <ol class="invocations" aria-live="polite" aria-relevant="additions">
              {list.invocations.map((i) => (
                <Invocation key={i.requestId} i={i} />
              ))}
            </ol>
          ) : (
            <p class="muted">
              {active.length || paged
                ? 'No invocation matches these filters.'
                : renders
                  ? 'No invocations yet: integration code has not run.'
                  : 'No invocations yet, other than any component renders.'}
            </p>
          )
        ) : error ? null : (
          <p class="muted">Loading…</p>
        )}
        <Pager query={query} path="#/logs" nextCursor={list?.nextCursor} />
      </Section>
    </>
  );
}

const faultOf = (i: InvocationView) => (i.error ? (i.error.kind === 'limit' ? `limit breached (${i.error.limit ?? 'unknown'})` : i.error.kind) : '');

function Invocation({ i }: { i: InvocationView }): VNode {
  return (
    <li class="invocation" data-request-id={i.requestId} data-outcome={i.outcome}>
      <div class="invocation-head">
        <Time at={i.createdAt} />
        <code>{i.requestId}</code>
        <span>{i.integration}</span>
        {i.installationId ? (
          <a href={`#/installations/${encodeURIComponent(i.installationId)}`}>
            <code>{i.installationId}</code>
          </a>
        ) : null}
        <span>
          {i.eventType}
          {i.eventId ? (
            <>
              {' '}
              <a href={`#/events/${encodeURIComponent(i.eventId)}`}>
                <code>{i.eventId}</code>
              </a>
            </>
          ) : null}
        </span>
        <span>{i.status}</span>
        <Badge status={i.outcome} />
        <span class="muted">
          {Math.round(i.durationMs)} ms, CPU {Math.round(i.cpuMs)} ms
        </span>
      </div>
      {i.logs.length || i.error ? (
        <pre class="log-lines">
          {i.logs.map((l, n) => (
            <div key={n} class={`log-line level-${l.level.replace(/[^a-z]/g, '')}`}>
              <span class="muted">{formatClock(new Date(l.time))}</span> <span class="level">{l.level.padEnd(5)}</span> {l.message}
            </div>
          ))}
          {i.error ? (
            <div class="log-line level-error">
              {faultOf(i)}: {i.error.message}
            </div>
          ) : null}
        </pre>
      ) : (
        <p class="muted small">Printed nothing.</p>
      )}
    </li>
  );
}
