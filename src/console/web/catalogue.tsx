/**
 * Visibility in the console (docs/installations.md, "Visibility"): the Catalogue page (the public
 * integrations, GET /api/v1/catalogue) and, on an integration's page, who may install it and its
 * install links (made, shown once, revoked).
 */
import type { VNode } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { api, errorText, type CatalogueEntry, type LinkAnswer } from './api.tsx';
import { announce, ErrorBox, Icon, PageTitle, Section } from './ui.tsx';

export function CataloguePage(): VNode {
  const [list, setList] = useState<CatalogueEntry[] | undefined>();
  const [error, setError] = useState('');
  useEffect(() => {
    api<{ integrations: CatalogueEntry[] }>('GET', '/api/v1/catalogue')
      .then((r) => setList(r.integrations))
      .catch((e) => setError(errorText(e)));
  }, []);
  return (
    <>
      <PageTitle>Catalogue</PageTitle>
      <p class="lead">
        The public integrations of this server: anyone with a token sees them. Private and unlisted ones are on the Integrations page; an unlisted one installs
        through its install link.
      </p>
      <ErrorBox message={error} />
      {list ? (
        list.length ? (
          <ul class="catalogue">
            {list.map((e) => (
              <li key={e.name} class="panel" data-catalogue={e.name}>
                <div class="row nowrap">
                  <Icon integration={{ name: e.name, title: e.title, manifest: e.icon ? { icon: e.icon } : null }} size={40} />
                  <div>
                    <h2>
                      <a href={`#/integrations/${encodeURIComponent(e.name)}`}>{e.title}</a>
                    </h2>
                    <code class="small">{e.name}</code>
                  </div>
                </div>
                <p>{e.description}</p>
                <dl class="facts small">
                  <dt>Installs on</dt>
                  <dd>{e.targets.join(', ')}</dd>
                  <dt>Scopes</dt>
                  <dd>{e.scopes.length ? e.scopes.map((s) => <code key={s}>{s} </code>) : 'none'}</dd>
                  {e.categories.length ? (
                    <>
                      <dt>Categories</dt>
                      <dd>{e.categories.join(', ')}</dd>
                    </>
                  ) : null}
                </dl>
                <a class="button small" href={`#/installations?install=${encodeURIComponent(e.name)}`}>
                  Install {e.title}
                </a>
              </li>
            ))}
          </ul>
        ) : (
          <p>
            No public integration: an integration is listed here when its manifest says <code>visibility: public</code>.
          </p>
        )
      ) : error ? null : (
        <p class="muted">Loading…</p>
      )}
    </>
  );
}

const RULES: Record<string, string> = {
  private: "Only this server's organization installs it (organization: in config.yaml must name the manifest's), with an install link or the admin token.",
  unlisted: 'Installed through its install link (or the admin token); not in the catalogue.',
  public: 'Anyone who may install: listed in the catalogue.',
};

/** Who may install an integration, and its install links: made here, shown once, revoked together. */
export function InstallLinks({ name, visibility }: { name: string; visibility: string }): VNode {
  const [expires, setExpires] = useState('7d');
  const [made, setMade] = useState<LinkAnswer | undefined>();
  const [confirming, setConfirming] = useState(false);
  const [error, setError] = useState('');
  const [busy, setBusy] = useState(false);
  const path = `/api/v1/integrations/${encodeURIComponent(name)}/links`;
  async function run(make: boolean): Promise<void> {
    setBusy(true);
    try {
      if (make) {
        const r = await api<LinkAnswer>('POST', path, { expires });
        setMade(r);
        announce(`Install link of ${name} made; it works until ${r.expiresAt}`);
      } else {
        await api('DELETE', path);
        setMade(undefined);
        announce(`Every install link of ${name} is revoked`);
      }
      setError('');
    } catch (e) {
      setError(errorText(e));
    } finally {
      setBusy(false);
      setConfirming(false);
    }
  }
  return (
    <Section title="Who may install it">
      <p>
        <strong>{visibility}</strong>: {RULES[visibility] ?? 'the admin token only.'} The admin token (this console) installs any integration.
      </p>
      {made ? (
        <div class="notice" role="status">
          <p>
            Install link, works until {made.expiresAt}. Copy it now; it is not shown again. Whoever holds it installs {name}:
          </p>
          <code class="secret">{made.link}</code>
          <p class="small">
            <code>switchyard install {name} --link &lt;link&gt;</code>, or <code>POST {made.installUrl}</code> with{' '}
            <code>Authorization: Bearer &lt;link&gt;</code>.
          </p>
        </div>
      ) : null}
      <div class="inline-form">
        <div class="field">
          <label for="link-expires">Works for</label>
          <select id="link-expires" value={expires} onChange={(e) => setExpires((e.currentTarget as HTMLSelectElement).value)}>
            <option value="1d">1 day</option>
            <option value="7d">7 days</option>
            <option value="30d">30 days</option>
          </select>
        </div>
        <button type="button" disabled={busy} onClick={() => run(true)}>
          Make an install link
        </button>
        {confirming ? (
          <>
            <button type="button" class="danger" disabled={busy} onClick={() => run(false)}>
              Confirm: revoke every link
            </button>
            <button type="button" class="secondary" onClick={() => setConfirming(false)}>
              Cancel
            </button>
          </>
        ) : (
          <button type="button" class="danger" disabled={busy} onClick={() => setConfirming(true)}>
            Revoke all links…
          </button>
        )}
        <ErrorBox message={error} />
      </div>
    </Section>
  );
}
