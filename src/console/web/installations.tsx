/** Installations: install, pause, resume, uninstall; one installation's configuration and components. */
import type { VNode } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { api, errorText, sectionFor, type ConfigurationsDef, type Installation, type Integration } from './api.tsx';
import type { InstallAnswer } from '../../installations/api.ts';
import { ConfigurationForm } from './config-form.tsx';
import { useIntegrations } from './integrations.tsx';
import { LiveComponent } from './live-component.tsx';
import { announce, Badge, ErrorBox, Icon, PageTitle, Scroll, Section, Time } from './ui.tsx';
import { hrefOf } from './filters.tsx';

const path = (id: string) => `/api/v1/installations/${encodeURIComponent(id)}`;

/** Pause / resume / uninstall, with an explicit second step before uninstalling. */
function Actions({ installation, onChange }: { installation: Installation; onChange(i: Installation | undefined): void }): VNode {
  const [confirming, setConfirming] = useState(false);
  const [error, setError] = useState('');
  const [busy, setBusy] = useState(false);
  async function run(method: string, url: string, done: string): Promise<void> {
    setBusy(true);
    try {
      const r = await api<{ installation: Installation }>(method, url);
      setError('');
      announce(`${installation.integration} ${installation.id}: ${done}`);
      onChange(r.installation);
    } catch (e) {
      setError(errorText(e));
    } finally {
      setBusy(false);
      setConfirming(false);
    }
  }
  if (installation.status === 'uninstalled') return <span class="muted">uninstalled</span>;
  return (
    <div class="row actions">
      {installation.status === 'paused' ? (
        <button type="button" class="secondary small" disabled={busy} onClick={() => run('POST', `${path(installation.id)}/resume`, 'resumed')}>
          Resume
        </button>
      ) : (
        <button type="button" class="secondary small" disabled={busy} onClick={() => run('POST', `${path(installation.id)}/pause`, 'paused')}>
          Pause
        </button>
      )}
      {confirming ? (
        <>
          <button type="button" class="danger small" disabled={busy} onClick={() => run('DELETE', path(installation.id), 'uninstalled')}>
            Confirm uninstall
          </button>
          <button type="button" class="secondary small" onClick={() => setConfirming(false)}>
            Cancel
          </button>
        </>
      ) : (
        <button type="button" class="danger small" disabled={busy} onClick={() => setConfirming(true)}>
          Uninstall…
        </button>
      )}
      {error ? (
        <span class="field-error" role="alert">
          {error}
        </span>
      ) : null}
    </div>
  );
}

/**
 * Where an installation's traffic goes: for a webhook installation the URL it delivers to (with
 * links to its deliveries and charts, and the server's warning when that URL will be refused);
 * for others the public endpoint that reaches the integration.
 */
function Endpoint({ installation }: { installation: Installation }): VNode {
  const url = installation.configuration.webhook_url;
  const warnings = (installation.warnings as string[] | undefined) ?? [];
  if (installation.integration !== 'webhook') return <code class="muted small url">{installation.urls.publicEndpoint}</code>;
  const q = { installation: installation.id };
  return (
    <>
      {typeof url === 'string' && url ? <code class="url">{url}</code> : <span class="muted">not set</span>}
      <div class="row small">
        <a href={hrefOf('#/deliveries', q)}>Deliveries</a>
        <a href={hrefOf('#/charts', q)}>Charts</a>
      </div>
      {warnings.map((w) => (
        <p key={w} class="field-error small">
          {w}
        </p>
      ))}
    </>
  );
}

/**
 * Why the integration an Install link names cannot be installed now (it is not loaded), with its
 * problems: the form then chooses nothing, so one more click cannot install another one instead.
 */
function InstallRefused({ name, integration }: { name: string; integration: Integration | undefined }): VNode {
  return (
    <div class="error-box" role="alert" data-testid="install-refused">
      <p>
        <strong>{name}</strong> cannot be installed now:{' '}
        {integration ? (
          <>
            it is not loaded (status <Badge status={integration.status} />
            ). Fix what its <a href={`#/integrations/${encodeURIComponent(name)}`}>page</a> lists, then come back.
          </>
        ) : (
          'no folder of the integrations directory has that name.'
        )}
      </p>
      {integration?.errors.length ? (
        <ul>
          {integration.errors.map((p, i) => (
            <li key={i}>
              {p.message}
              {p.hint ? <span class="hint"> — {p.hint}</span> : null}
            </li>
          ))}
        </ul>
      ) : null}
    </div>
  );
}

function InstallForm({ integrations, preselect, onInstalled }: { integrations: Integration[]; preselect?: string; onInstalled(r: Installed): void }): VNode {
  const installable = integrations.filter((i) => i.serving);
  const refused = preselect && !installable.some((i) => i.name === preselect) ? preselect : undefined;
  const [integration, setIntegration] = useState(preselect ? (refused ? '' : preselect) : (installable[0]?.name ?? ''));
  const [target, setTarget] = useState<'organization' | 'space' | 'site'>('organization');
  const [targetId, setTargetId] = useState('');
  // A site installation may name the space it is in (spec 2.4's `space` of a site installation).
  const [siteSpace, setSiteSpace] = useState('');
  const [error, setError] = useState('');
  const [problems, setProblems] = useState<Array<{ where: string; message: string; hint?: string }>>([]);
  const [busy, setBusy] = useState(false);
  async function submit(e: Event): Promise<void> {
    e.preventDefault();
    setBusy(true);
    try {
      const r = await api<Installed>('POST', '/api/v1/installations', {
        integration,
        target,
        ...(target === 'space' ? { space: targetId } : target === 'site' ? { site: targetId, ...(siteSpace.trim() ? { space: siteSpace.trim() } : {}) } : {}),
      });
      setError('');
      setProblems([]);
      announce(`Installed ${integration}: ${r.installation.id}, status ${r.installation.status}`);
      onInstalled(r);
    } catch (err) {
      setError(errorText(err));
      setProblems((err as { problems?: typeof problems }).problems ?? []);
    } finally {
      setBusy(false);
    }
  }
  const why = refused ? <InstallRefused name={refused} integration={integrations.find((i) => i.name === refused)} /> : null;
  if (!installable.length)
    return (
      <>
        {why}
        <p class="muted">No integration is loaded, so there is nothing to install.</p>
      </>
    );
  return (
    <form class="inline-form" onSubmit={submit}>
      {why}
      <ErrorBox message={error} problems={problems} />
      <div class="field">
        <label for="install-integration">Integration</label>
        <select id="install-integration" value={integration} onChange={(e) => setIntegration((e.currentTarget as HTMLSelectElement).value)}>
          {integration ? null : <option value="">— choose one —</option>}
          {installable.map((i) => (
            <option key={i.name} value={i.name}>
              {i.title ?? i.name} ({i.name})
            </option>
          ))}
        </select>
      </div>
      <div class="field">
        <label for="install-target">Target</label>
        <select id="install-target" value={target} onChange={(e) => setTarget((e.currentTarget as HTMLSelectElement).value as typeof target)}>
          <option value="organization">organization</option>
          <option value="space">space</option>
          <option value="site">site</option>
        </select>
      </div>
      {target !== 'organization' ? (
        <div class="field">
          <label for="install-target-id">{target === 'space' ? 'Space id' : 'Site id'}</label>
          <input id="install-target-id" type="text" value={targetId} required onInput={(e) => setTargetId((e.currentTarget as HTMLInputElement).value)} />
        </div>
      ) : null}
      {target === 'site' ? (
        <div class="field">
          <label for="install-site-space">Space id (optional)</label>
          <input id="install-site-space" type="text" value={siteSpace} onInput={(e) => setSiteSpace((e.currentTarget as HTMLInputElement).value)} />
        </div>
      ) : null}
      <div class="field">
        <button type="submit" disabled={busy || !integration}>
          {busy ? 'Installing…' : 'Install'}
        </button>
      </div>
    </form>
  );
}

type Installed = InstallAnswer;

/** Shown once after an install: the server never shows the token or signing secret again. */
function Secrets({ installed, onDismiss }: { installed: Installed; onDismiss(): void }): VNode {
  return (
    <div class="notice" role="status">
      <p>
        Installed <code>{installed.installation.id}</code>. Copy these now; they are not shown again.
      </p>
      <dl class="facts">
        <dt>Installation token</dt>
        <dd>
          <code class="secret">{installed.token}</code>
        </dd>
        {installed.webhookSecret ? (
          <>
            <dt>Webhook signing secret</dt>
            <dd>
              <code class="secret">{installed.webhookSecret}</code>
            </dd>
          </>
        ) : null}
      </dl>
      <div class="row">
        <a class="button" href={`#/installations/${encodeURIComponent(installed.installation.id)}`}>
          Configure it
        </a>
        <button type="button" class="secondary" onClick={onDismiss}>
          Dismiss
        </button>
      </div>
    </div>
  );
}

let lastInstalled: Installed | undefined;

export function InstallationsPage({ query }: { query: URLSearchParams }): VNode {
  const { list: integrations } = useIntegrations();
  const [list, setList] = useState<Installation[] | undefined>();
  const [error, setError] = useState('');
  const [installed, setInstalled] = useState<Installed | undefined>(lastInstalled);
  const reload = () =>
    api<{ installations: Installation[] }>('GET', '/api/v1/installations')
      .then((r) => (setList(r.installations), setError('')))
      .catch((e) => setError(errorText(e)));
  useEffect(() => {
    reload();
  }, []);
  const byName = new Map((integrations ?? []).map((i) => [i.name, i]));
  return (
    <>
      <PageTitle>Installations</PageTitle>
      <Section title="Install an integration">
        {installed ? (
          <Secrets
            installed={installed}
            onDismiss={() => {
              lastInstalled = undefined;
              setInstalled(undefined);
            }}
          />
        ) : null}
        {integrations ? (
          <InstallForm
            // Another Install link (another ?install=) starts the form again with its integration.
            key={query.get('install') ?? ''}
            integrations={integrations}
            preselect={query.get('install') ?? undefined}
            onInstalled={(r) => {
              lastInstalled = r;
              setInstalled(r);
              reload();
            }}
          />
        ) : (
          <p class="muted">Loading…</p>
        )}
      </Section>
      <Section title="Installed">
        <ErrorBox message={error} />
        {list ? (
          list.length ? (
            <Scroll cards>
              <table class="table cards installations">
                <thead>
                  <tr>
                    <th scope="col">Installation</th>
                    <th scope="col">Target</th>
                    <th scope="col">Endpoint</th>
                    <th scope="col">Status</th>
                    <th scope="col">Created</th>
                    <th scope="col">Actions</th>
                  </tr>
                </thead>
                <tbody>
                  {list.map((i) => {
                    const integration = byName.get(i.integration);
                    return (
                      <tr key={i.id} data-installation={i.id}>
                        <td class="card-head">
                          <div class="row nowrap">
                            {integration ? <Icon integration={integration} size={24} /> : null}
                            <div>
                              <a href={`#/installations/${encodeURIComponent(i.id)}`}>{integration?.title ?? i.integration}</a>
                              <div class="muted small">
                                <code>{i.id}</code>
                              </div>
                            </div>
                          </div>
                        </td>
                        <td data-label="Target">
                          {i.target}
                          {i.space ? ` ${i.space}` : ''}
                          {i.site ? ` ${i.site}` : ''}
                        </td>
                        <td class="endpoint-cell card-line">
                          <Endpoint installation={i} />
                        </td>
                        <td class="card-status">
                          <Badge status={i.status} />
                        </td>
                        <td data-label="Created">
                          <Time at={i.createdAt} />
                        </td>
                        <td class="card-end">
                          <Actions installation={i} onChange={() => reload()} />
                        </td>
                      </tr>
                    );
                  })}
                </tbody>
              </table>
            </Scroll>
          ) : (
            <p class="muted">Nothing installed yet.</p>
          )
        ) : error ? null : (
          <p class="muted">Loading…</p>
        )}
      </Section>
    </>
  );
}

export function InstallationPage({ id }: { id: string }): VNode {
  const [installation, setInstallation] = useState<Installation | undefined>();
  const [integration, setIntegration] = useState<Integration | undefined>();
  const [components, setComponents] = useState<Array<{ id: string; title: string; context: Record<string, unknown> }> | undefined>();
  const [otherContext, setOtherContext] = useState<Record<string, unknown>>({ type: 'console' });
  const [error, setError] = useState('');
  const [extra, setExtra] = useState('');
  const [tried, setTried] = useState<string[]>([]);

  const reload = () =>
    api<{ installation: Installation }>('GET', path(id))
      .then((r) => (setInstallation(r.installation), setError('')))
      .catch((e) => setError(errorText(e)));

  useEffect(() => {
    reload();
    // Back from an OAuth window: the callback may have stored credentials.
    const onFocus = () => reload();
    window.addEventListener('focus', onFocus);
    return () => window.removeEventListener('focus', onFocus);
  }, [id]);

  const name = installation?.integration;
  useEffect(() => {
    if (!name) return;
    api<{ integration: Integration }>('GET', `/api/v1/integrations/${encodeURIComponent(name)}`)
      .then((r) => setIntegration(r.integration))
      .catch((e) => setError(errorText(e)));
    // Each block with the context its render gets (GitBook's for a GitBook block); the other components the console's.
    type Components = {
      blocks: Array<{ id: string; title: string; context: Record<string, unknown> }>;
      exported: string[] | null;
      context: Record<string, unknown>;
    };
    api<Components>('GET', `/console/api/integrations/${encodeURIComponent(name)}/components`)
      .then((r) => {
        const list = [...r.blocks];
        for (const c of r.exported ?? []) if (!list.some((b) => b.id === c)) list.push({ id: c, title: c, context: r.context });
        setOtherContext(r.context);
        setComponents(list);
      })
      .catch(() => setComponents([]));
  }, [name]);

  if (!installation)
    return error ? (
      <>
        <PageTitle>Installation {id}</PageTitle>
        <ErrorBox message={error} />
      </>
    ) : (
      <p class="muted">Loading…</p>
    );

  // The section the server checks this installation against (GitBook's configurations.space for a space).
  const def: ConfigurationsDef | undefined = integration ? sectionFor(integration.configurations, installation.target) : undefined;
  const all = [...(components ?? []), ...tried.filter((t) => !components?.some((c) => c.id === t)).map((t) => ({ id: t, title: t, context: otherContext }))];
  const runnable = installation.status === 'active' || installation.status === 'pending';
  return (
    <>
      <p>
        <a href="#/installations">← Installations</a>
      </p>
      <div class="row title-row">
        {integration ? <Icon integration={integration} size={40} /> : null}
        <PageTitle>
          {integration?.title ?? installation.integration} <code class="muted">{installation.id}</code>
        </PageTitle>
        <span data-testid="installation-status">
          <Badge status={installation.status} />
        </span>
      </div>
      <ErrorBox message={error} />
      <dl class="facts">
        <dt>Target</dt>
        <dd>
          {installation.target}
          {installation.space ? ` ${installation.space}` : ''}
          {installation.site ? ` ${installation.site}` : ''}
        </dd>
        {installation.integration === 'webhook' ? (
          <>
            <dt>Webhook URL</dt>
            <dd data-testid="webhook-url">
              <Endpoint installation={installation} />
            </dd>
          </>
        ) : null}
        <dt>Public endpoint</dt>
        <dd>
          <code>{installation.urls.publicEndpoint}</code>
        </dd>
        <dt>Created</dt>
        <dd>
          <Time at={installation.createdAt} />
        </dd>
      </dl>
      <Actions installation={installation} onChange={(i) => i && setInstallation(i)} />
      <Section title="Configuration">
        {integration ? <ConfigurationForm installation={installation} def={def} onSaved={setInstallation} /> : <p class="muted">Loading the manifest…</p>}
      </Section>
      {integration && !integration.manifest?.script ? null : (
        <Section title="Components">
          {!runnable ? <p class="muted">Components run only while the installation is active or pending (it is {installation.status}).</p> : null}
          {runnable && components && !all.length ? <p class="muted">This integration declares no blocks and its script exports no components.</p> : null}
          {runnable ? (
            <div class="components">
              {all.map((c) => (
                <LiveComponent key={c.id} installationId={installation.id} componentId={c.id} title={c.title} context={c.context} />
              ))}
            </div>
          ) : null}
          {runnable ? (
            <form
              class="row"
              onSubmit={(e) => {
                e.preventDefault();
                const v = extra.trim();
                if (v && !all.some((c) => c.id === v)) setTried([...tried, v]);
                setExtra('');
              }}
            >
              <label for="extra-component">Render another component id</label>
              <input id="extra-component" type="text" value={extra} onInput={(e) => setExtra((e.currentTarget as HTMLInputElement).value)} />
              <button type="submit" class="secondary small">
                Render
              </button>
            </form>
          ) : null}
        </Section>
      )}
    </>
  );
}
