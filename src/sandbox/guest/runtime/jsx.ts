/**
 * The JSX runtime for ContentKit: `<block><button label="Go" onPress={{ action: 'go' }} /></block>`
 * becomes `{ type: 'block', children: [{ type: 'button', label: 'Go', onPress: { action: 'go' } }] }`.
 * Function components are called with their props; fragments become their children.
 */
export const Fragment = Symbol.for('switchyard.fragment');

function flatten(children: unknown, out: unknown[]): unknown[] {
  if (Array.isArray(children)) for (const c of children) flatten(c, out);
  else if (children !== null && children !== undefined && children !== false && children !== true) {
    if (children && typeof children === 'object' && (children as any).type === Fragment) flatten((children as any).children, out);
    else out.push(children);
  }
  return out;
}

export function jsx(type: unknown, props: Record<string, unknown> | null, key?: unknown): unknown {
  const p = { ...(props ?? {}) };
  if (key !== undefined) p.key = key;
  if (typeof type === 'function') return (type as (p: unknown) => unknown)(p);
  const children = 'children' in p ? flatten(p.children, []) : undefined;
  if (type === Fragment) return children ?? [];
  delete p.children;
  const element: Record<string, unknown> = { type, ...p };
  if (children !== undefined && children.length > 0) element.children = children;
  return element;
}

export const jsxs = jsx;
export const jsxDEV = jsx;
