/**
 * The `context` a component's render gets when its request names none: where the component is
 * shown. A block of a `gitbook-manifest.yaml` gets the one GitBook gives a block in a page being
 * edited, `{type: 'document', editable: true}`: GitBook's own blocks read it (its mermaid block
 * destructures `element.context.editable`) and some refuse any other. Everything else gets
 * `fallback` (`{type: 'api'}` for an API caller, `{type: 'console'}` in the console).
 */
import type { LoadedIntegration } from '../registry/index.ts';

export const GITBOOK_BLOCK_CONTEXT = Object.freeze({ type: 'document', editable: true });

export function renderContextFor(
  integration: Pick<LoadedIntegration, 'dialect' | 'manifest'>,
  componentId: string,
  fallback: Record<string, unknown> = { type: 'api' },
): Record<string, unknown> {
  const blocks = (integration.manifest.blocks ?? []) as Array<{ id: string }>;
  if (integration.dialect === 'gitbook' && blocks.some((b) => b.id === componentId)) return { ...GITBOOK_BLOCK_CONTEXT };
  return fallback;
}
