/**
 * A small, safe Markdown subset for manifest summaries and ContentKit `markdown` elements. It
 * builds elements, never HTML strings, so any markup in the text is shown as text. Supported:
 * paragraphs, `#`..`###` headings, `-`/`*` and `1.` lists, fenced code blocks, `inline code`,
 * **bold**, *italic* / _italic_, ~~strike~~ and [links](https://…) (http, https and mailto only).
 */
import type { ComponentChildren, VNode } from 'preact';

const SAFE_URL = /^(https?:|mailto:)/i;

export function safeUrl(url: unknown): string | undefined {
  if (typeof url !== 'string') return undefined;
  const u = url.trim();
  return SAFE_URL.test(u) ? u : undefined;
}

/** Inline formatting; `key` keeps sibling keys unique. */
export function inline(text: string, key = 'i'): ComponentChildren[] {
  const out: ComponentChildren[] = [];
  // Order matters: code first (nothing inside it is formatted), then links, then emphasis.
  const re = /`([^`]+)`|\[([^\]]+)\]\(([^)\s]+)\)|\*\*([^*]+)\*\*|__([^_]+)__|~~([^~]+)~~|\*([^*\s][^*]*)\*|\b_([^_\s][^_]*)_\b/g;
  let last = 0;
  let n = 0;
  for (let m = re.exec(text); m; m = re.exec(text)) {
    if (m.index > last) out.push(text.slice(last, m.index));
    const k = `${key}.${n++}`;
    if (m[1] !== undefined) out.push(<code key={k}>{m[1]}</code>);
    else if (m[2] !== undefined) {
      const href = safeUrl(m[3]);
      out.push(
        href ? (
          <a key={k} href={href} target="_blank" rel="noopener noreferrer">
            {inline(m[2], k)}
          </a>
        ) : (
          m[0]
        ),
      );
    } else if (m[4] !== undefined || m[5] !== undefined) out.push(<strong key={k}>{inline(m[4] ?? m[5], k)}</strong>);
    else if (m[6] !== undefined) out.push(<s key={k}>{inline(m[6], k)}</s>);
    else out.push(<em key={k}>{inline(m[7] ?? m[8], k)}</em>);
    last = m.index + m[0].length;
  }
  if (last < text.length) out.push(text.slice(last));
  return out;
}

export function Markdown({ source, className }: { source: string; className?: string }): VNode {
  const lines = source.replace(/\r\n?/g, '\n').split('\n');
  const blocks: VNode[] = [];
  let para: string[] = [];
  let list: { ordered: boolean; items: string[] } | undefined;
  const flushPara = () => {
    if (para.length) blocks.push(<p key={`p${blocks.length}`}>{inline(para.join(' '), `p${blocks.length}`)}</p>);
    para = [];
  };
  const flushList = () => {
    if (!list) return;
    const k = `l${blocks.length}`;
    const items = list.items.map((it, i) => <li key={i}>{inline(it, `${k}.${i}`)}</li>);
    blocks.push(list.ordered ? <ol key={k}>{items}</ol> : <ul key={k}>{items}</ul>);
    list = undefined;
  };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const fence = /^\s*```/.exec(line);
    if (fence) {
      flushPara();
      flushList();
      const code: string[] = [];
      for (i++; i < lines.length && !/^\s*```/.test(lines[i]); i++) code.push(lines[i]);
      blocks.push(
        <pre key={`c${blocks.length}`}>
          <code>{code.join('\n')}</code>
        </pre>,
      );
      continue;
    }
    const heading = /^(#{1,3})\s+(.*)$/.exec(line);
    if (heading) {
      flushPara();
      flushList();
      const k = `h${blocks.length}`;
      const content = inline(heading[2], k);
      // Headings inside content sit below the page's own h1/h2.
      blocks.push(heading[1].length === 1 ? <h3 key={k}>{content}</h3> : heading[1].length === 2 ? <h4 key={k}>{content}</h4> : <h5 key={k}>{content}</h5>);
      continue;
    }
    const item = /^\s*(?:([-*+])|(\d+)[.)])\s+(.*)$/.exec(line);
    if (item) {
      flushPara();
      const ordered = item[2] !== undefined;
      if (list && list.ordered !== ordered) flushList();
      list ??= { ordered, items: [] };
      list.items.push(item[3]);
      continue;
    }
    if (!line.trim()) {
      flushPara();
      flushList();
      continue;
    }
    if (list) flushList();
    para.push(line.trim());
  }
  flushPara();
  flushList();
  return <div class={`markdown ${className ?? ''}`.trim()}>{blocks}</div>;
}
