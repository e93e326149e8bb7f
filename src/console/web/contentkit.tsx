/**
 * ContentKit markup (what a component's render() returns) as HTML controls. Elements are plain
 * objects `{type, ...props, children?}`; strings and numbers are text. Controls bind to the
 * component's state through their `state` prop (the state key) and buttons send their `onPress`
 * action. An element type this renderer does not know is shown as a visible placeholder.
 */
import type { ComponentChildren, VNode } from 'preact';
import { Markdown, safeUrl } from './markdown.tsx';

export type Element = { type: string; children?: unknown[]; [k: string]: unknown };

export interface RenderContext {
  /** Current (editable) state of the component. */
  state: Record<string, unknown>;
  setState(key: string, value: unknown): void;
  /** Send an action (a button's onPress) to the component; ignored while one is under way. */
  act(action: Record<string, unknown>): void;
  /** An action is under way: buttons say so (aria-disabled) but stay focusable, so keyboard users keep their place. */
  busy: boolean;
  /** Prefix for ids of controls, unique per component on the page. */
  idPrefix: string;
}

export const KNOWN_ELEMENTS = [
  'block',
  'button',
  'text',
  'markdown',
  'hstack',
  'vstack',
  'box',
  'divider',
  'card',
  'image',
  'link',
  'input',
  'textinput',
  'select',
  'switch',
  'checkbox',
  'radio',
  'hint',
  'codeblock',
] as const;

const isElement = (v: unknown): v is Element => typeof v === 'object' && v !== null && typeof (v as Element).type === 'string';
const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : typeof v === 'number' ? String(v) : undefined);
const cls = (...parts: Array<string | false | undefined>) => parts.filter(Boolean).join(' ');
const token = (v: unknown) => (typeof v === 'string' ? v.replace(/[^a-z0-9_-]/gi, '') : '');

function actionOf(onPress: unknown): Record<string, unknown> | undefined {
  if (typeof onPress === 'string') return { action: onPress };
  if (onPress && typeof onPress === 'object' && typeof (onPress as { action?: unknown }).action === 'string') return onPress as Record<string, unknown>;
  return undefined;
}

/** The text of an element's children, for labels. */
function textOf(children: unknown): string {
  if (Array.isArray(children)) return children.map(textOf).join('');
  if (typeof children === 'string' || typeof children === 'number') return String(children);
  if (isElement(children)) return textOf(children.children);
  return '';
}

export function renderChildren(children: unknown, ctx: RenderContext, path: string): ComponentChildren[] {
  const list = Array.isArray(children) ? children : children === undefined || children === null ? [] : [children];
  return list.map((c, i) => renderNode(c, ctx, `${path}.${i}`));
}

export function renderNode(node: unknown, ctx: RenderContext, path = '0', controlId?: string): ComponentChildren {
  if (node === null || node === undefined || node === false || node === true) return null;
  if (typeof node === 'string' || typeof node === 'number') return String(node);
  if (Array.isArray(node)) return renderChildren(node, ctx, path);
  if (!isElement(node)) return <Unknown key={path} type={typeof node} note="not an element" />;
  const el = node;
  const kids = () => renderChildren(el.children, ctx, path);
  const id = controlId ?? `${ctx.idPrefix}-${path.replace(/\./g, '-')}`;
  const stateKey = str(el.state);
  const valueOf = (fallback: unknown) => (stateKey && stateKey in ctx.state ? ctx.state[stateKey] : (el.initialValue ?? fallback));
  switch (el.type) {
    case 'block':
      return (
        <div key={path} class="ck ck-block" data-ck="block">
          {str(el.title) ? <div class="ck-block-title">{str(el.title)}</div> : null}
          {kids()}
        </div>
      );
    case 'button': {
      const action = actionOf(el.onPress);
      const label = str(el.label) ?? textOf(el.children) ?? 'Button';
      return (
        <button
          key={path}
          type="button"
          class={cls('ck', 'ck-button', `ck-button-${token(el.style) || 'primary'}`)}
          data-ck="button"
          disabled={!action || el.disabled === true}
          aria-disabled={ctx.busy || undefined}
          title={str(el.tooltip)}
          onClick={() => action && ctx.act(action)}
        >
          {label || 'Button'}
        </button>
      );
    }
    case 'text':
      return (
        <span key={path} class={cls('ck', 'ck-text', el.style ? `ck-text-${token(el.style)}` : false)} data-ck="text">
          {kids()}
        </span>
      );
    case 'markdown':
      return <Markdown key={path} source={str(el.content) ?? textOf(el.children)} className="ck ck-markdown" />;
    case 'hstack':
    case 'vstack':
      return (
        <div key={path} class={cls('ck', `ck-${el.type}`, el.align ? `ck-align-${token(el.align)}` : false)} data-ck={el.type}>
          {kids()}
        </div>
      );
    case 'box':
      return (
        <div key={path} class={cls('ck', 'ck-box', el.grow ? 'ck-grow' : false)} data-ck="box">
          {kids()}
        </div>
      );
    case 'divider':
      return <hr key={path} class="ck ck-divider" data-ck="divider" />;
    case 'card': {
      const action = actionOf(el.onPress);
      const title = str(el.title);
      const head =
        title || str(el.hint) ? (
          <div class="ck-card-head">
            {title ? <strong class="ck-card-title">{title}</strong> : null}
            {str(el.hint) ? <span class="ck-card-hint">{str(el.hint)}</span> : null}
          </div>
        ) : null;
      const buttons = Array.isArray(el.buttons) ? <div class="ck-card-buttons">{renderChildren(el.buttons, ctx, `${path}.b`)}</div> : null;
      return (
        <div key={path} class="ck ck-card" data-ck="card">
          {action ? (
            <button type="button" class="ck-card-press" aria-disabled={ctx.busy || undefined} onClick={() => ctx.act(action)}>
              {head ?? 'Open'}
            </button>
          ) : (
            head
          )}
          {el.children ? <div class="ck-card-body">{kids()}</div> : null}
          {buttons}
        </div>
      );
    }
    case 'image': {
      const source = el.source as { url?: unknown } | string | undefined;
      const url = typeof source === 'string' ? source : source?.url;
      const src = safeUrl(url) ?? (typeof url === 'string' && /^data:image\/(png|gif|jpeg|webp);/i.test(url) ? url : undefined);
      if (!src) return <Unknown key={path} type="image" note="no http(s) source.url" />;
      const ratio = typeof el.aspectRatio === 'number' && el.aspectRatio > 0 ? el.aspectRatio : undefined;
      return (
        <img
          key={path}
          class="ck ck-image"
          data-ck="image"
          src={src}
          alt={str(el.alt) ?? ''}
          style={ratio ? { aspectRatio: String(ratio) } : undefined}
          loading="lazy"
          referrerpolicy="no-referrer"
        />
      );
    }
    case 'link': {
      const target = el.target as { url?: unknown; action?: unknown } | undefined;
      const href = safeUrl(target?.url ?? el.url);
      const action = actionOf(target) ?? actionOf(el.onPress);
      if (href)
        return (
          <a key={path} class="ck ck-link" data-ck="link" href={href} target="_blank" rel="noopener noreferrer">
            {kids().length ? kids() : href}
          </a>
        );
      if (action)
        return (
          <button
            key={path}
            type="button"
            class="ck ck-link ck-link-button"
            data-ck="link"
            aria-disabled={ctx.busy || undefined}
            onClick={() => ctx.act(action)}
          >
            {kids()}
          </button>
        );
      return <Unknown key={path} type="link" note="no http(s) target.url or action" />;
    }
    case 'input': {
      const inner = `${id}-control`;
      const hintId = str(el.hint) ? `${id}-hint` : undefined;
      return (
        <div key={path} class="ck ck-input" data-ck="input">
          <label for={inner}>
            {str(el.label) ?? ''}
            {el.optional ? <span class="muted"> (optional)</span> : null}
          </label>
          {renderNode(el.element, ctx, `${path}.e`, inner)}
          {hintId ? (
            <p class="ck-hint" id={hintId}>
              {str(el.hint)}
            </p>
          ) : null}
        </div>
      );
    }
    case 'textinput': {
      const value = str(valueOf('')) ?? '';
      const common = {
        id,
        class: 'ck ck-textinput',
        'data-ck': 'textinput',
        placeholder: str(el.placeholder),
        'aria-label': controlId ? undefined : (str(el.placeholder) ?? stateKey ?? 'text'),
        value,
        disabled: el.disabled === true,
        onInput: (e: Event) => stateKey && ctx.setState(stateKey, (e.currentTarget as HTMLInputElement).value),
      };
      return el.multiline ? <textarea key={path} {...common} rows={3} /> : <input key={path} type="text" {...common} />;
    }
    case 'select': {
      const options = (Array.isArray(el.options) ? el.options : []).map((o: unknown) =>
        typeof o === 'string' ? { id: o, label: o } : { id: str((o as { id?: unknown }).id) ?? '', label: str((o as { label?: unknown }).label) ?? '' },
      );
      const value = str(valueOf('')) ?? '';
      return (
        <select
          key={path}
          id={id}
          class="ck ck-select"
          data-ck="select"
          aria-label={controlId ? undefined : (str(el.placeholder) ?? stateKey ?? 'choice')}
          value={value}
          onChange={(e) => stateKey && ctx.setState(stateKey, (e.currentTarget as HTMLSelectElement).value)}
        >
          {!value || !options.some((o) => o.id === value) ? <option value="">{str(el.placeholder) ?? '—'}</option> : null}
          {options.map((o) => (
            <option key={o.id} value={o.id}>
              {o.label || o.id}
            </option>
          ))}
        </select>
      );
    }
    case 'switch':
    case 'checkbox': {
      const checked = valueOf(false) === true;
      const label = str(el.label) ?? textOf(el.children);
      const box = (
        <input
          id={id}
          type="checkbox"
          role={el.type === 'switch' ? 'switch' : undefined}
          class={`ck ck-${el.type}`}
          data-ck={el.type}
          checked={checked}
          aria-label={controlId || label ? undefined : (stateKey ?? el.type)}
          disabled={el.disabled === true}
          onChange={(e) => stateKey && ctx.setState(stateKey, (e.currentTarget as HTMLInputElement).checked)}
        />
      );
      return label ? (
        // biome-ignore lint/a11y/noLabelWithoutControl: the control is `box`, the checkbox above
        <label key={path} class="ck-check-label">
          {box} {label}
        </label>
      ) : (
        <span key={path}>{box}</span>
      );
    }
    case 'radio': {
      const value = valueOf(undefined);
      const label = str(el.label) ?? textOf(el.children);
      return (
        <label key={path} class="ck-check-label">
          <input
            type="radio"
            class="ck ck-radio"
            data-ck="radio"
            name={`${ctx.idPrefix}-${stateKey ?? 'radio'}`}
            checked={value !== undefined && value === el.value}
            onChange={() => stateKey && ctx.setState(stateKey, el.value)}
          />{' '}
          {label}
        </label>
      );
    }
    case 'hint':
      return (
        <p key={path} class="ck ck-hint" data-ck="hint">
          {kids()}
        </p>
      );
    case 'codeblock':
      return (
        <pre key={path} class="ck ck-codeblock" data-ck="codeblock">
          <code>{str(el.content) ?? textOf(el.children)}</code>
        </pre>
      );
    default:
      return (
        <Unknown key={path} type={el.type}>
          {el.children ? kids() : null}
        </Unknown>
      );
  }
}

function Unknown({ type, note, children }: { type: string; note?: string; children?: ComponentChildren }): VNode {
  return (
    <div class="ck ck-unknown" data-ck="unknown" role="note">
      <span class="ck-unknown-label">
        Unsupported element <code>{type}</code>
        {note ? ` (${note})` : ''}
      </span>
      {children}
    </div>
  );
}
