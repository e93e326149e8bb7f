/**
 * One component of an installation, rendered live: the first render asks the server without state
 * (the component's initialState runs), every button sends its action with the current state, and
 * the answer `{type: 'element', state, props, element}` replaces what is shown.
 */
import type { VNode } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { api, ApiError, errorText, type InvocationView } from './api.tsx';
import { renderNode, type Element, type RenderContext } from './contentkit.tsx';
import { announce } from './ui.tsx';

interface Rendered {
  type: string;
  state: Record<string, unknown>;
  props: Record<string, unknown>;
  element: Element;
}

/** Why a render failed: the answer's message, and the invocation it ran as (its fault is in the logs). */
interface RenderError {
  message: string;
  requestId?: string;
}

/**
 * What to say about a failed render. Integration code that threw is answered with a bare 500
 * ("Internal server error": its stack is for the logs only); the console is the admin's, so it reads
 * the invocation's record and shows the fault itself.
 */
async function renderError(e: unknown): Promise<RenderError> {
  const requestId = e instanceof ApiError ? e.requestId : undefined;
  if (!requestId || (e as ApiError).status < 500) return { message: errorText(e), requestId };
  try {
    const inv = await api<InvocationView>('GET', `/api/v1/logs/${encodeURIComponent(requestId)}`);
    if (inv.error)
      return {
        message: `The component failed (${inv.error.kind === 'limit' ? `limit ${inv.error.limit ?? ''}`.trim() : inv.error.kind}): ${inv.error.message}`,
        requestId,
      };
  } catch {
    // Not recorded (or no longer kept): what the answer said is all there is.
  }
  return { message: errorText(e), requestId };
}

export function LiveComponent({
  installationId,
  componentId,
  title,
  context,
}: {
  installationId: string;
  componentId: string;
  title: string;
  /** Where it is shown, as its render is told (GitBook's block context for a GitBook block). */
  context: Record<string, unknown>;
}): VNode {
  const [view, setView] = useState<Rendered | undefined>();
  const [state, setStateValue] = useState<Record<string, unknown>>({});
  const [error, setError] = useState<RenderError | undefined>();
  const [busy, setBusy] = useState(false);
  const [showState, setShowState] = useState(false);
  const busyRef = useRef(false);
  const latest = useRef({ view, state });
  latest.current = { view, state };

  async function render(action?: Record<string, unknown>): Promise<void> {
    busyRef.current = true;
    setBusy(true);
    const { view: v, state: s } = latest.current;
    try {
      const r = await api<Rendered>('POST', `/api/v1/installations/${encodeURIComponent(installationId)}/render`, {
        componentId,
        props: v?.props ?? {},
        ...(v ? { state: s } : {}),
        ...(action ? { action } : {}),
        context,
      });
      if (!r || typeof r !== 'object' || !r.element) throw new Error('the component answered without an element');
      setView(r);
      setStateValue(r.state ?? {});
      setError(undefined);
      if (action) announce(`${title}: ${String(action.action)} done`);
    } catch (e) {
      setError(await renderError(e));
    } finally {
      busyRef.current = false;
      setBusy(false);
    }
  }

  useEffect(() => {
    setView(undefined);
    setStateValue({});
    void render();
  }, [installationId, componentId]);

  const ctx: RenderContext = {
    state,
    setState: (key, value) => setStateValue((s) => ({ ...s, [key]: value })),
    act: (action) => {
      if (!busyRef.current) void render(action);
    },
    busy,
    idPrefix: `c-${componentId.replace(/[^a-z0-9_-]/gi, '')}`,
  };

  const hid = `component-${componentId}-h`;
  return (
    <article class="component" aria-labelledby={hid} aria-busy={busy} data-component={componentId}>
      <header class="component-head">
        <h3 id={hid}>
          {title} <code class="muted">{componentId}</code>
        </h3>
        <div class="row">
          <button type="button" class="secondary small" onClick={() => void render()} disabled={busy}>
            Re-render
          </button>
          <button type="button" class="secondary small" aria-expanded={showState} onClick={() => setShowState(!showState)}>
            {showState ? 'Hide state' : 'Show state'}
          </button>
        </div>
      </header>
      {error ? (
        <div class="error-box" role="alert">
          <p>{error.message}</p>
          {error.requestId ? (
            <p>
              <a href={`#/logs/${encodeURIComponent(error.requestId)}`}>
                Its log entry <code>{error.requestId}</code>
              </a>
            </p>
          ) : null}
        </div>
      ) : null}
      <div class="component-view" aria-live="polite">
        {view ? renderNode(view.element, ctx) : busy ? <p class="muted">Rendering…</p> : null}
      </div>
      {showState ? (
        // biome-ignore lint/a11y/useAriaPropsSupportedByRole: a label on a pre is not announced; kept until the console's markup is reviewed for it
        <pre class="state" aria-label={`state of ${componentId}`}>
          {JSON.stringify(state, null, 2)}
        </pre>
      ) : null}
    </article>
  );
}
