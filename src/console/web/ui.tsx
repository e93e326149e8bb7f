/** Small pieces every page uses: status badges, error boxes, times, integration icons, the announcer for live updates. */
import type { ComponentChildren, VNode } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import type { Problem } from './api.tsx';
import { formatTime } from './time.tsx';

/**
 * A status word with a colour. The word is shown exactly as the server gave it, so a status this
 * console does not know yet still reads right; known ones get a colour (only a help: the word
 * carries the meaning).
 */
export function Badge({ status }: { status: string }): VNode {
  return <span class={`badge badge-${status.replace(/[^a-z_-]/gi, '')}`}>{status}</span>;
}

/**
 * A wide table scrolls inside itself, never the page (the console must fit a 420 px screen). With
 * `cards`, a `table.cards` inside turns into one card per row wherever its column is too narrow for
 * the table (the container query in style.css), so nothing is scrolled out of sight.
 */
export function Scroll({ children, label, cards }: { children: ComponentChildren; label?: string; cards?: boolean }): VNode {
  const scroll = (
    // biome-ignore lint/a11y/useAriaPropsSupportedByRole: aria-label is set only with the region role
    <div class="scroll" role={label ? 'region' : undefined} aria-label={label} tabIndex={label ? 0 : undefined}>
      {children}
    </div>
  );
  return cards ? <div class="cards-box">{scroll}</div> : scroll;
}

export function ErrorBox({ message, problems, id }: { message?: string; problems?: Problem[]; id?: string }): VNode | null {
  if (!message && !problems?.length) return null;
  return (
    <div class="error-box" role="alert" id={id}>
      {message ? <p>{message}</p> : null}
      {problems?.length ? (
        <ul>
          {problems.map((p, i) => (
            <li key={i}>
              <code>{p.where}</code>: {p.message}
              {p.hint ? <span class="hint"> — {p.hint}</span> : null}
            </li>
          ))}
        </ul>
      ) : null}
    </div>
  );
}

/** A date with its time, in local time (see time.tsx); the UTC instant in the tooltip. */
export function Time({ at }: { at: string | null | undefined }): VNode {
  if (!at) return <span class="muted">—</span>;
  return (
    <time dateTime={at} title={at}>
      {formatTime(at)}
    </time>
  );
}

// One polite live region for the whole app: pages call announce() after an action completes.
let setMessage: ((m: string) => void) | undefined;

export function announce(message: string): void {
  setMessage?.(message);
}

export function Announcer(): VNode {
  const [message, set] = useState('');
  useEffect(() => {
    setMessage = (m) => {
      // Clearing first makes screen readers repeat an identical message.
      set('');
      setTimeout(() => set(m), 30);
    };
    return () => (setMessage = undefined);
  }, []);
  return (
    <div class="announcer" role="status" aria-live="polite" aria-atomic="true">
      {message}
    </div>
  );
}

export function Section({ title, children, id }: { title: string; children: ComponentChildren; id?: string }): VNode {
  const hid = `${id ?? title.toLowerCase().replace(/[^a-z0-9]+/g, '-')}-h`;
  return (
    <section class="panel" aria-labelledby={hid} id={id}>
      <h2 id={hid}>{title}</h2>
      {children}
    </section>
  );
}

/** A heading that takes focus when the page changes, so keyboard and screen-reader users land on it. */
export function PageTitle({ children }: { children: ComponentChildren }): VNode {
  return (
    <h1 tabIndex={-1} class="page-title" data-page-title>
      {children}
    </h1>
  );
}

/** An integration's icon (from its manifest), or its initial when it has none or the icon fails to load. */
export function Icon({
  integration,
  size = 32,
}: {
  integration: { name: string; title: string | null; manifest: { icon: string | null } | null };
  size?: number;
}): VNode {
  const [failed, setFailed] = useState(false);
  if (integration.manifest?.icon && !failed)
    return (
      <img
        class="icon"
        src={`/console/integrations/${encodeURIComponent(integration.name)}/icon`}
        alt=""
        width={size}
        height={size}
        onError={() => setFailed(true)}
      />
    );
  return (
    <span class="icon icon-letter" aria-hidden="true" style={{ width: `${size}px`, height: `${size}px` }}>
      {(integration.title ?? integration.name).slice(0, 1).toUpperCase()}
    </span>
  );
}
