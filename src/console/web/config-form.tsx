/**
 * The configuration form of an installation, generated from its manifest's `configurations`
 * (`account`, or `site` for site installations): string -> text input, `enum` -> dropdown,
 * `completion_url` -> dropdown of options from the installation's public endpoint, number,
 * boolean -> checkbox, button -> opens the OAuth flow (<publicEndpoint><callback_url>) in a new
 * window. The server validates; its field problems (`configuration.<name>`) appear beside fields.
 */
import type { VNode } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { api, ApiError, errorText, type ConfigurationsDef, type Installation, type Problem, type PropertyDef } from './api.tsx';
import { announce, Badge, ErrorBox } from './ui.tsx';

export interface Option {
  label: string;
  value: string;
}

/**
 * Options from a completion_url. Accepted answers: a JSON array of strings, or of `{label, value}`
 * objects (`id` is taken for a missing value), or an object `{options: [...]}` holding either.
 */
export function parseOptions(body: unknown): Option[] {
  const list = Array.isArray(body)
    ? body
    : body && typeof body === 'object' && Array.isArray((body as { options?: unknown }).options)
      ? (body as { options: unknown[] }).options
      : undefined;
  if (!list) throw new Error('expected a JSON array of options, or {"options": [...]}');
  return list.flatMap((o): Option[] => {
    if (typeof o === 'string' || typeof o === 'number') return [{ label: String(o), value: String(o) }];
    if (o && typeof o === 'object') {
      const r = o as { label?: unknown; value?: unknown; id?: unknown };
      const value = r.value ?? r.id;
      if (typeof value === 'string' || typeof value === 'number')
        return [{ label: typeof r.label === 'string' ? r.label : String(value), value: String(value) }];
    }
    return [];
  });
}

type Values = Record<string, string | boolean>;

function initialValues(def: ConfigurationsDef, configuration: Record<string, unknown>): Values {
  const out: Values = {};
  for (const [name, p] of Object.entries(def.properties ?? {})) {
    if (p.type === 'button') continue;
    const v = configuration[name] !== undefined && configuration[name] !== null ? configuration[name] : p.default;
    out[name] = p.type === 'boolean' ? v === true : v === undefined || v === null ? '' : String(v);
  }
  return out;
}

/** Only what changed: new values, and null for a cleared field (removes the key). */
function patchOf(def: ConfigurationsDef, values: Values, configuration: Record<string, unknown>): Record<string, unknown> {
  const patch: Record<string, unknown> = {};
  for (const [name, p] of Object.entries(def.properties ?? {})) {
    if (p.type === 'button') continue;
    const current = configuration[name];
    const raw = values[name];
    let next: unknown;
    if (p.type === 'boolean') next = raw === true;
    else if (raw === '') next = null;
    else if (p.type === 'number') next = Number.isFinite(Number(raw)) && String(raw).trim() !== '' ? Number(raw) : raw;
    else next = raw;
    if (next === null ? current !== undefined && current !== null : next !== current) patch[name] = next;
  }
  return patch;
}

const fieldName = (where: string) => (where.startsWith('configuration.') ? where.slice('configuration.'.length).split('.')[0] : undefined);

export function ConfigurationForm({
  installation,
  def,
  onSaved,
}: {
  installation: Installation;
  def: ConfigurationsDef | undefined;
  onSaved(i: Installation): void;
}): VNode {
  const properties = def?.properties ?? {};
  const required = new Set(def?.required ?? []);
  const [values, setValues] = useState<Values>(() => initialValues(def ?? {}, installation.configuration));
  const [problems, setProblems] = useState<Problem[]>([]);
  const [error, setError] = useState('');
  const [saving, setSaving] = useState(false);
  const [message, setMessage] = useState('');
  const formRef = useRef<HTMLFormElement>(null);
  const base = `cfg-${installation.id}`;

  useEffect(() => {
    setValues(initialValues(def ?? {}, installation.configuration));
  }, [installation.id, JSON.stringify(installation.configuration), JSON.stringify(def ?? {})]);

  if (!Object.keys(properties).length)
    return def?.componentId ? (
      <p class="muted">
        Its configuration screen is the component <code>{def.componentId}</code>: what it stores is kept (see Components).
      </p>
    ) : (
      <p class="muted">This integration has no configuration properties for a {installation.target} installation.</p>
    );

  const byField = new Map<string, Problem[]>();
  const general: Problem[] = [];
  for (const p of problems) {
    const f = fieldName(p.where);
    if (f && properties[f]) byField.set(f, [...(byField.get(f) ?? []), p]);
    else general.push(p);
  }

  async function submit(e: Event): Promise<void> {
    e.preventDefault();
    const patch = patchOf(def ?? {}, values, installation.configuration);
    if (!Object.keys(patch).length) {
      setMessage('Nothing changed.');
      return;
    }
    setSaving(true);
    setMessage('');
    try {
      const r = await api<{ installation: Installation }>('PATCH', `/api/v1/installations/${encodeURIComponent(installation.id)}`, { configuration: patch });
      setProblems([]);
      setError('');
      const text = `Configuration saved. Status: ${r.installation.status}.`;
      setMessage(text);
      announce(text);
      onSaved(r.installation);
    } catch (err) {
      if (err instanceof ApiError && err.problems.length) {
        setProblems(err.problems);
        setError(err.message);
        announce(`Not saved: ${err.problems.length} problem${err.problems.length === 1 ? '' : 's'}`);
        // Move focus to the first field the server refused.
        setTimeout(() => formRef.current?.querySelector<HTMLElement>('[aria-invalid="true"]')?.focus(), 0);
      } else {
        setProblems([]);
        setError(errorText(err));
      }
    } finally {
      setSaving(false);
    }
  }

  return (
    <form ref={formRef} class="config-form" onSubmit={submit} noValidate aria-describedby={error ? `${base}-error` : undefined}>
      <ErrorBox id={`${base}-error`} message={error} problems={general} />
      {Object.entries(properties).map(([name, p]) => (
        <Field
          key={name}
          name={name}
          prop={p}
          id={`${base}-${name}`}
          required={required.has(name)}
          value={values[name]}
          problems={byField.get(name) ?? []}
          installation={installation}
          onChange={(v) => setValues((old) => ({ ...old, [name]: v }))}
        />
      ))}
      <div class="row">
        <button type="submit" disabled={saving}>
          {saving ? 'Saving…' : 'Save configuration'}
        </button>
        <span class="form-status" data-testid="config-status">
          Status: <Badge status={installation.status} />
        </span>
        {message ? <span class="muted">{message}</span> : null}
      </div>
    </form>
  );
}

function Field(props: {
  name: string;
  prop: PropertyDef;
  id: string;
  required: boolean;
  value: string | boolean | undefined;
  problems: Problem[];
  installation: Installation;
  onChange(v: string | boolean): void;
}): VNode {
  const { name, prop, id, required, value, problems, installation, onChange } = props;
  const descId = `${id}-desc`;
  const errId = `${id}-err`;
  const invalid = problems.length > 0;
  const describedBy = [prop.description ? descId : '', invalid ? errId : ''].filter(Boolean).join(' ') || undefined;
  const label = (
    <label for={id}>
      {prop.title ?? name}
      {required ? <span class="required"> (required)</span> : null}
    </label>
  );
  const aria = { 'aria-invalid': invalid ? ('true' as const) : undefined, 'aria-describedby': describedBy, 'aria-required': required || undefined };
  let control: VNode;
  if (prop.type === 'button') {
    const connect = installation.connect.find((c) => c.property === name);
    const url = connect?.url ?? `${installation.urls.publicEndpoint}${prop.callback_url ?? ''}`;
    // The OAuth handler stores what it obtained under the property or under oauth_credentials.
    const connected = installation.configuration[name] !== undefined || installation.configuration.oauth_credentials !== undefined;
    return (
      <div class={`field${invalid ? ' invalid' : ''}`} data-field={name}>
        <span class="label" id={`${id}-label`}>
          {prop.title ?? name}
          {required ? <span class="required"> (required)</span> : null}
        </span>
        <div class="row">
          <button
            type="button"
            id={id}
            class="secondary"
            aria-describedby={[`${id}-label`, describedBy].filter(Boolean).join(' ')}
            onClick={() => window.open(url, '_blank', 'noopener')}
          >
            {prop.button_text ?? connect?.label ?? 'Connect'}
          </button>
          <span class={connected ? 'ok' : 'muted'}>{connected ? 'Connected' : 'Not connected'}</span>
        </div>
        <Description id={descId} text={prop.description} extra="Opens in a new window; come back here when it closes." />
        <FieldErrors id={errId} problems={problems} />
      </div>
    );
  }
  if (prop.type === 'boolean') {
    return (
      <div class={`field field-check${invalid ? ' invalid' : ''}`} data-field={name}>
        <div class="row">
          <input id={id} type="checkbox" checked={value === true} onChange={(e) => onChange((e.currentTarget as HTMLInputElement).checked)} {...aria} />
          {label}
        </div>
        <Description id={descId} text={prop.description} />
        <FieldErrors id={errId} problems={problems} />
      </div>
    );
  }
  if (prop.type === 'string' && prop.enum) {
    control = (
      <select id={id} value={String(value ?? '')} onChange={(e) => onChange((e.currentTarget as HTMLSelectElement).value)} {...aria}>
        <option value="">— not set —</option>
        {prop.enum.map((o) => (
          <option key={o} value={o}>
            {o}
          </option>
        ))}
      </select>
    );
  } else if (prop.type === 'string' && prop.completion_url) {
    control = (
      <CompletionSelect id={id} url={`${installation.urls.publicEndpoint}${prop.completion_url}`} value={String(value ?? '')} onChange={onChange} aria={aria} />
    );
  } else if (prop.type === 'number') {
    control = (
      <input
        id={id}
        type="text"
        inputMode="decimal"
        value={String(value ?? '')}
        onInput={(e) => onChange((e.currentTarget as HTMLInputElement).value)}
        {...aria}
      />
    );
  } else {
    control = <input id={id} type="text" value={String(value ?? '')} onInput={(e) => onChange((e.currentTarget as HTMLInputElement).value)} {...aria} />;
  }
  return (
    <div class={`field${invalid ? ' invalid' : ''}`} data-field={name}>
      {label}
      {control}
      <Description id={descId} text={prop.description} />
      <FieldErrors id={errId} problems={problems} />
    </div>
  );
}

function Description({ id, text, extra }: { id: string; text?: string; extra?: string }): VNode | null {
  if (!text && !extra) return null;
  return (
    <p class="description" id={id}>
      {text}
      {text && extra ? ' ' : ''}
      {extra}
    </p>
  );
}

function FieldErrors({ id, problems }: { id: string; problems: Problem[] }): VNode | null {
  if (!problems.length) return null;
  return (
    <p class="field-error" id={id}>
      {problems.map((p, i) => (
        <span key={i}>
          {p.message}
          {p.hint ? <span class="hint"> — {p.hint}</span> : null}
        </span>
      ))}
    </p>
  );
}

/** A dropdown whose options come from the integration; falls back to free text when they cannot be had. */
function CompletionSelect({
  id,
  url,
  value,
  onChange,
  aria,
}: {
  id: string;
  url: string;
  value: string;
  onChange(v: string): void;
  aria: Record<string, unknown>;
}): VNode {
  const [options, setOptions] = useState<Option[] | undefined>();
  const [error, setError] = useState('');
  const [loading, setLoading] = useState(false);

  async function load(): Promise<void> {
    setLoading(true);
    setError('');
    try {
      // The integration's own code answers this: never send it the console's cookie.
      const res = await fetch(url, { credentials: 'omit', headers: { accept: 'application/json' } });
      if (!res.ok) throw new Error(`the integration answered ${res.status}`);
      setOptions(parseOptions(await res.json()));
    } catch (e) {
      setOptions(undefined);
      setError(`Options could not be loaded from ${url}: ${errorText(e)}`);
    } finally {
      setLoading(false);
    }
  }

  useEffect(() => {
    void load();
  }, [url]);

  return (
    <div class="completion">
      {options ? (
        <select id={id} value={value} onChange={(e) => onChange((e.currentTarget as HTMLSelectElement).value)} {...aria}>
          <option value="">— not set —</option>
          {value && !options.some((o) => o.value === value) ? <option value={value}>{value}</option> : null}
          {options.map((o) => (
            <option key={o.value} value={o.value}>
              {o.label}
            </option>
          ))}
        </select>
      ) : (
        <input id={id} type="text" value={value} onInput={(e) => onChange((e.currentTarget as HTMLInputElement).value)} {...aria} />
      )}
      <button type="button" class="secondary small" onClick={() => void load()} disabled={loading} aria-label="Reload options">
        {loading ? 'Loading…' : 'Reload'}
      </button>
      {error ? (
        <p class="field-error" role="status">
          {error}
        </p>
      ) : null}
    </div>
  );
}
