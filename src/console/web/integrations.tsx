/** Integrations: what the registry loaded (or could not), and each one's manifest at a glance. */
import type { VNode } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { api, CONFIGURATION_SECTIONS, errorText, type Integration, type Problem } from './api.tsx';
import { Markdown, safeUrl } from './markdown.tsx';
import { Badge, ErrorBox, Icon, PageTitle, Scroll, Section } from './ui.tsx';
import { InstallLinks } from './catalogue.tsx';

function useIntegrations(): { list?: Integration[]; error: string; reload(): void } {
  const [list, setList] = useState<Integration[] | undefined>();
  const [error, setError] = useState('');
  const reload = () =>
    api<{ integrations: Integration[] }>('GET', '/api/v1/integrations')
      .then((r) => (setList(r.integrations), setError('')))
      .catch((e) => setError(errorText(e)));
  useEffect(() => {
    reload();
  }, []);
  return { list, error, reload };
}

export function IntegrationsPage(): VNode {
  const { list, error, reload } = useIntegrations();
  return (
    <>
      <PageTitle>Integrations</PageTitle>
      <p class="lead">
        Folders in the integrations directory. A change on disk is picked up while the server runs.{' '}
        <button type="button" class="secondary small" onClick={reload}>
          Refresh
        </button>
      </p>
      <ErrorBox message={error} />
      {list ? (
        list.length ? (
          <Scroll cards>
            <table class="table cards integrations">
              <caption class="sr-only">Integrations and their load status</caption>
              <thead>
                <tr>
                  <th scope="col">Integration</th>
                  <th scope="col">Status</th>
                  <th scope="col">Version</th>
                  <th scope="col">Problems</th>
                </tr>
              </thead>
              <tbody>
                {list.map((i) => (
                  <tr key={`${i.name}:${i.dir}`} data-integration={i.name}>
                    <td class="card-head">
                      <div class="row nowrap">
                        <Icon integration={i} />
                        <div class="shrink">
                          <a href={`#/integrations/${encodeURIComponent(i.name)}`}>{i.title ?? i.name}</a>
                          <div class="muted small">
                            <code>{i.name}</code> {i.manifest?.description ?? ''}
                          </div>
                        </div>
                      </div>
                    </td>
                    <td class="card-status">
                      <Badge status={i.status} />
                      {i.serving && i.status !== 'loaded' ? <div class="muted small">previous version serving</div> : null}
                    </td>
                    <td data-label="Version">
                      <code class="small">{i.version ? i.version.slice(0, 12) : '—'}</code>
                    </td>
                    <td class="card-line">
                      {i.errors.length ? (
                        <ProblemList problems={i.errors} kind="error" />
                      ) : i.warnings.length ? (
                        <ProblemList problems={i.warnings} kind="warning" />
                      ) : (
                        <span class="muted">no problems</span>
                      )}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </Scroll>
        ) : (
          <p>No integrations yet: add a folder with a platform-manifest.yaml to the integrations directory (`switchyard new &lt;name&gt;`).</p>
        )
      ) : error ? null : (
        <p class="muted">Loading…</p>
      )}
    </>
  );
}

/** Which installations a section configures (the server's rule: sectionFor in manifest/sections.ts). */
function sectionTitle(sections: Integration['configurations'], k: (typeof CONFIGURATION_SECTIONS)[number]): string {
  if (k === 'site') return 'Site installations (configurations.site)';
  if (k === 'space') return 'Space installations (configurations.space)';
  return sections.space ? 'Organization installations (configurations.account)' : 'Organization and space installations (configurations.account)';
}

function ProblemList({ problems, kind }: { problems: Problem[]; kind: 'error' | 'warning' }): VNode {
  return (
    <ul class={`problems problems-${kind}`}>
      {problems.map((p, i) => (
        <li key={i}>
          <span class="sr-only">{kind}: </span>
          <code>{p.where}</code> {p.message}
          {p.hint ? <div class="hint">{p.hint}</div> : null}
        </li>
      ))}
    </ul>
  );
}

export function IntegrationPage({ name }: { name: string }): VNode {
  const [integration, setIntegration] = useState<Integration | undefined>();
  const [error, setError] = useState('');
  useEffect(() => {
    api<{ integration: Integration }>('GET', `/api/v1/integrations/${encodeURIComponent(name)}`)
      .then((r) => setIntegration(r.integration))
      .catch((e) => setError(errorText(e)));
  }, [name]);
  if (error)
    return (
      <>
        <PageTitle>{name}</PageTitle>
        <ErrorBox message={error} />
      </>
    );
  if (!integration) return <p class="muted">Loading…</p>;
  const m = integration.manifest;
  const sections = integration.configurations;
  return (
    <>
      <p>
        <a href="#/integrations">← Integrations</a>
      </p>
      <div class="row title-row">
        <Icon integration={integration} size={48} />
        <PageTitle>{integration.title ?? integration.name}</PageTitle>
        <Badge status={integration.status} />
      </div>
      {m ? <p class="lead">{m.description}</p> : null}
      <p>
        <a class="button" href={`#/installations?install=${encodeURIComponent(integration.name)}`}>
          Install {integration.title ?? integration.name}
        </a>
      </p>
      {m ? <InstallLinks name={integration.name} visibility={m.visibility} /> : null}
      {integration.errors.length ? (
        <Section title="Errors">
          <ProblemList problems={integration.errors} kind="error" />
        </Section>
      ) : null}
      {integration.warnings.length ? (
        <Section title="Warnings">
          <ProblemList problems={integration.warnings} kind="warning" />
        </Section>
      ) : null}
      {m ? (
        <Section title="Manifest">
          <dl class="facts">
            <dt>Name</dt>
            <dd>
              <code>{integration.name}</code>
            </dd>
            <dt>Organization</dt>
            <dd>{m.organization}</dd>
            <dt>Visibility</dt>
            <dd>{m.visibility}</dd>
            <dt>Categories</dt>
            <dd>{m.categories.length ? m.categories.join(', ') : '—'}</dd>
            <dt>Script</dt>
            <dd>{m.script ? <code>{m.script}</code> : 'none'}</dd>
            <dt>Version</dt>
            <dd>
              <code>{integration.version ?? '—'}</code>
            </dd>
            <dt>Folder</dt>
            <dd>
              <code>{integration.dir}</code>
            </dd>
            <dt>Secrets</dt>
            <dd>{m.secrets.length ? m.secrets.map((s) => <code key={s}>{s} </code>) : 'none'}</dd>
            {m.externalLinks.length ? (
              <>
                <dt>Links</dt>
                <dd>
                  {m.externalLinks.map((l, i) => {
                    const href = safeUrl(l.url);
                    return href ? (
                      <a key={i} href={href} target="_blank" rel="noopener noreferrer" class="link-list">
                        {l.label}
                      </a>
                    ) : (
                      <span key={i}>{l.label}</span>
                    );
                  })}
                </dd>
              </>
            ) : null}
          </dl>
          {m.summary ? <Markdown source={m.summary} className="summary" /> : null}
          {m.previewImages.length ? (
            <div class="previews">
              {m.previewImages.map((p, i) => (
                <img
                  key={p}
                  src={`/console/integrations/${encodeURIComponent(integration.name)}/preview/${i}`}
                  alt={`Preview ${i + 1} of ${integration.title ?? integration.name}`}
                />
              ))}
            </div>
          ) : null}
        </Section>
      ) : null}
      <Section title="Scopes">
        {integration.scopes.length ? (
          <ul class="chips">
            {integration.scopes.map((s) => (
              <li key={s}>
                <code>{s}</code>
              </li>
            ))}
          </ul>
        ) : (
          <p class="muted">No scopes.</p>
        )}
      </Section>
      <Section title="Blocks">
        {integration.blocks.length ? (
          <ul>
            {integration.blocks.map((b) => (
              <li key={b.id}>
                <strong>{b.title}</strong> <code>{b.id}</code> — {b.description}
              </li>
            ))}
          </ul>
        ) : (
          <p class="muted">No blocks in the quick-insert menu.</p>
        )}
      </Section>
      <Section title="Configuration properties">
        {CONFIGURATION_SECTIONS.every((k) => !Object.keys(sections[k]?.properties ?? {}).length) ? <p class="muted">No configuration properties.</p> : null}
        {CONFIGURATION_SECTIONS.map((k) => {
          const props = Object.entries(sections[k]?.properties ?? {});
          if (!props.length) return null;
          return (
            <div key={k} data-section={k}>
              <h3>{sectionTitle(sections, k)}</h3>
              <Scroll cards>
                <table class="table cards properties">
                  <thead>
                    <tr>
                      <th scope="col">Property</th>
                      <th scope="col">Type</th>
                      <th scope="col">Description</th>
                    </tr>
                  </thead>
                  <tbody>
                    {props.map(([name, p]) => (
                      <tr key={name}>
                        <td class="card-head">
                          <code>{name}</code>
                          {sections[k]?.required?.includes(name) ? <span class="required"> (required)</span> : null}
                        </td>
                        <td class="card-status">
                          {p.type}
                          {p.enum ? `: ${p.enum.join(' | ')}` : ''}
                          {p.completion_url ? ` (options from ${p.completion_url})` : ''}
                          {p.callback_url ? ` (${p.callback_url})` : ''}
                        </td>
                        <td class="card-line">{p.description}</td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </Scroll>
            </div>
          );
        })}
      </Section>
    </>
  );
}

export { useIntegrations };
