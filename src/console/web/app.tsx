/** The console's shell: session check, login, navigation and the hash routes. */
import type { VNode } from 'preact';
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { api, ApiError, errorText, setCsrf, whenUnauthorized } from './api.tsx';
import { CataloguePage } from './catalogue.tsx';
import { ChartsPage } from './charts.tsx';
import { ConnectionBanner } from './connection.tsx';
import { DeliveriesPage } from './deliveries.tsx';
import { EventsPage } from './events.tsx';
import { LogsPage } from './logs.tsx';
import { InstallationPage, InstallationsPage } from './installations.tsx';
import { IntegrationPage, IntegrationsPage } from './integrations.tsx';
import { Announcer, ErrorBox, PageTitle } from './ui.tsx';

interface Route {
  parts: string[];
  query: URLSearchParams;
}

function parseHash(): Route {
  const raw = location.hash.replace(/^#\/?/, '');
  const [p, q] = raw.split('?');
  return { parts: (p ?? '').split('/').filter(Boolean).map(decodeURIComponent), query: new URLSearchParams(q ?? '') };
}

function useRoute(): Route {
  const [hash, setHash] = useState(() => location.hash);
  useEffect(() => {
    const on = () => setHash(location.hash);
    window.addEventListener('hashchange', on);
    // The address may have changed between the first render and this listener (a link followed
    // at once after logging in): catch up with it.
    on();
    return () => window.removeEventListener('hashchange', on);
  }, []);
  // parseHash reads location.hash, which `hash` mirrors.
  return useMemo(parseHash, [hash]);
}

type Auth = { state: 'checking' } | { state: 'out'; reason?: string } | { state: 'in'; expiresAt: string };

export function App(): VNode {
  const [auth, setAuth] = useState<Auth>({ state: 'checking' });

  useEffect(() => {
    whenUnauthorized(() => setAuth({ state: 'out', reason: 'Your session ended. Log in again.' }));
    api<{ authenticated: boolean; csrf: string; expiresAt: string }>('GET', '/console/session')
      .then((s) => {
        if (!s.authenticated) return setAuth({ state: 'out' });
        setCsrf(s.csrf);
        setAuth({ state: 'in', expiresAt: s.expiresAt });
      })
      .catch(() => setAuth({ state: 'out' }));
  }, []);

  if (auth.state === 'checking') return <p class="muted center">Loading…</p>;
  if (auth.state === 'out')
    return (
      <Login
        reason={auth.reason}
        onLoggedIn={(s) => {
          setCsrf(s.csrf);
          setAuth({ state: 'in', expiresAt: s.expiresAt });
        }}
      />
    );
  return (
    <Shell
      onLogout={async () => {
        try {
          await api('POST', '/console/logout');
        } finally {
          setCsrf('');
          setAuth({ state: 'out', reason: 'You are logged out.' });
        }
      }}
    />
  );
}

function Login({ reason, onLoggedIn }: { reason?: string; onLoggedIn(s: { csrf: string; expiresAt: string }): void }): VNode {
  const [token, setToken] = useState('');
  const [error, setError] = useState('');
  const [busy, setBusy] = useState(false);
  const input = useRef<HTMLInputElement>(null);
  useEffect(() => input.current?.focus(), []);
  async function submit(e: Event): Promise<void> {
    e.preventDefault();
    setBusy(true);
    try {
      const res = await fetch('/console/login', {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-switchyard-console': 'login' },
        body: JSON.stringify({ token }),
        credentials: 'same-origin',
      });
      const body = await res.json().catch(() => ({}));
      if (!res.ok) throw new ApiError(res.status, body.error);
      setToken('');
      onLoggedIn(body);
    } catch (err) {
      // fetch() rejects only when no answer came at all.
      setError(err instanceof TypeError ? 'The server cannot be reached. Is it running?' : errorText(err));
      input.current?.focus();
    } finally {
      setBusy(false);
    }
  }
  return (
    <main class="login" id="main">
      <form onSubmit={submit} class="panel" aria-labelledby="login-h">
        <h1 id="login-h">Switchyard console</h1>
        {reason ? <p role="status">{reason}</p> : null}
        <div class="field">
          <label for="admin-token">Admin token</label>
          <input
            ref={input}
            id="admin-token"
            type="password"
            autocomplete="current-password"
            value={token}
            aria-describedby="admin-token-desc"
            aria-invalid={error ? 'true' : undefined}
            onInput={(e) => setToken((e.currentTarget as HTMLInputElement).value)}
          />
          <p class="description" id="admin-token-desc">
            <code>admin_token</code> from config.yaml, or the contents of <code>&lt;data_dir&gt;/admin-token</code>. The browser keeps a session cookie, not the
            token.
          </p>
        </div>
        <div aria-live="assertive">
          <ErrorBox message={error} />
        </div>
        <button type="submit" disabled={busy || !token}>
          {busy ? 'Checking…' : 'Log in'}
        </button>
      </form>
    </main>
  );
}

const NAV = [
  { href: '#/integrations', label: 'Integrations', match: 'integrations' },
  { href: '#/catalogue', label: 'Catalogue', match: 'catalogue' },
  { href: '#/installations', label: 'Installations', match: 'installations' },
  { href: '#/events', label: 'Events', match: 'events' },
  { href: '#/deliveries', label: 'Deliveries', match: 'deliveries' },
  { href: '#/logs', label: 'Logs', match: 'logs' },
  { href: '#/charts', label: 'Charts', match: 'charts' },
];

function Shell({ onLogout }: { onLogout(): void }): VNode {
  const route = useRoute();
  const [section, id] = route.parts;
  const current = section ?? 'integrations';
  const first = useRef(true);

  // Keyboard and screen-reader users land on the new page's heading. Opening a delivery or an
  // event keeps the page: its panel takes focus instead.
  const pageKey = section === 'deliveries' || section === 'events' ? section : `${section}/${id}`;
  useEffect(() => {
    if (first.current) {
      first.current = false;
      return;
    }
    const t = setTimeout(() => document.querySelector<HTMLElement>('[data-page-title]')?.focus(), 60);
    return () => clearTimeout(t);
  }, [pageKey]);

  let page: VNode;
  // Keyed by id: another installation is a fresh page, with no state left from the last one.
  if (section === 'integrations' && id) page = <IntegrationPage key={id} name={id} />;
  else if (section === 'installations' && id) page = <InstallationPage key={id} id={id} />;
  else if (section === 'installations') page = <InstallationsPage query={route.query} />;
  else if (section === 'events') page = <EventsPage eventId={id} query={route.query} />;
  else if (section === 'deliveries') page = <DeliveriesPage openId={id} query={route.query} />;
  else if (section === 'logs') page = <LogsPage query={route.query} requestId={id} />;
  else if (section === 'charts') page = <ChartsPage query={route.query} />;
  else if (section === 'catalogue') page = <CataloguePage />;
  else if (!section || section === 'integrations') page = <IntegrationsPage />;
  else page = <PageTitle>Not found: {section}</PageTitle>;

  return (
    <>
      {/* biome-ignore lint/a11y/useValidAnchor: the console routes on the hash, so the skip link moves focus without following #main */}
      <a class="skip" href="#main" onClick={(e) => (e.preventDefault(), document.getElementById('main')?.focus())}>
        Skip to content
      </a>
      <header class="top">
        <span class="brand">Switchyard</span>
        <nav aria-label="Main">
          <ul>
            {NAV.map((n) => (
              <li key={n.href}>
                <a href={n.href} aria-current={current === n.match ? 'page' : undefined}>
                  {n.label}
                </a>
              </li>
            ))}
          </ul>
        </nav>
        <button type="button" class="secondary small" onClick={onLogout}>
          Log out
        </button>
      </header>
      <ConnectionBanner />
      <main id="main" tabIndex={-1} class={section === 'deliveries' && id ? 'wide' : undefined}>
        {page}
      </main>
      <Announcer />
    </>
  );
}

export { errorText };
