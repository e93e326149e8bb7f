/** createIntegration and createComponent: declare what an integration handles (spec 2.1, 2.2). */
import type { Request } from '../web/request.ts';

export type Handler = (...args: any[]) => unknown;

export interface ComponentDefinition {
  componentId: string;
  /** A function `(props, renderContext, context) => state`, or (GitBook) the state itself. */
  initialState?: ((props: any, renderContext?: any, context?: any) => any) | Record<string, unknown>;
  action?: (element: any, action: any, context: any) => unknown;
  render: (element: any, context: any) => unknown;
}

export interface IntegrationDefinition {
  fetch?: (request: Request, context: any) => unknown;
  components?: ComponentDefinition[];
  events?: Record<string, Handler | Handler[]>;
  /** GitBook handlers this server loads but does not run (see UNSUPPORTED_HANDLERS). */
  unsupported?: string[];
}

/**
 * Keys of GitBook's createIntegration() that name work the spec does not allow integrations to do
 * here, with the reason each invocation of them is answered with (501).
 */
export const UNSUPPORTED_HANDLERS: Record<string, string> = {
  fetch_published_script: 'injecting scripts into published sites is not possible for integrations (spec 2.5: site:script:inject is internal)',
  fetch_visitor_authentication: 'visitor authentication of published sites belongs to the hosted platform; this server publishes no sites',
  task: 'integration tasks (context.integration.queueTask) are not part of the spec; run the work in a handler with context.waitUntil',
  contentSources: 'content sources compute GitBook content revisions; this server stores no content',
};

/** Event types that reach a GitBook-only handler, and the key of that handler. */
export const UNSUPPORTED_EVENTS: Record<string, string> = {
  fetch_published_script: 'fetch_published_script',
  fetch_visitor_authentication: 'fetch_visitor_authentication',
  task: 'task',
  content_compute_revision: 'contentSources',
  content_compute_document: 'contentSources',
};

const KNOWN_KEYS = ['fetch', 'components', 'events', ...Object.keys(UNSUPPORTED_HANDLERS)];

const INTEGRATION = Symbol.for('switchyard.integration');
const COMPONENT = Symbol.for('switchyard.component');

/** The closest known key to a mistyped one (edit distance at most 2), for the error message. */
function closest(key: string): string | undefined {
  const distance = (a: string, b: string) => {
    const d = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array(b.length).fill(0)]);
    for (let j = 1; j <= b.length; j++) d[0][j] = j;
    for (let i = 1; i <= a.length; i++)
      for (let j = 1; j <= b.length; j++) d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    return d[a.length][b.length];
  };
  let best: string | undefined;
  let bestD = 3;
  for (const k of KNOWN_KEYS) {
    const dd = distance(key, k);
    if (dd < bestD) [best, bestD] = [k, dd];
  }
  return best;
}

/** Validate an integration's definition once, at load, so mistakes surface in `switchyard check`. */
export function createIntegration(definition: IntegrationDefinition): IntegrationDefinition {
  if (!definition || typeof definition !== 'object') throw new TypeError('createIntegration() expects an object { fetch, components, events }');
  for (const key of Object.keys(definition)) {
    if (KNOWN_KEYS.includes(key)) continue;
    const near = closest(key);
    throw new TypeError(`createIntegration(): unknown key "${key}"${near ? ` (did you mean "${near}"?)` : ''}; known keys: ${KNOWN_KEYS.join(', ')}`);
  }
  const { fetch, components = [], events = {} } = definition;
  if (fetch !== undefined && typeof fetch !== 'function') throw new TypeError('createIntegration(): `fetch` must be a function (request, context) => Response');
  if (!Array.isArray(components)) throw new TypeError('createIntegration(): `components` must be an array of createComponent() results');
  const ids = new Set<string>();
  components.forEach((c, i) => {
    if (!c || typeof c !== 'object' || typeof c.componentId !== 'string')
      throw new TypeError(`createIntegration(): components[${i}] is not a component (use createComponent({ componentId, render }))`);
    if (ids.has(c.componentId)) throw new TypeError(`createIntegration(): two components have the componentId "${c.componentId}"`);
    ids.add(c.componentId);
  });
  if (!events || typeof events !== 'object') throw new TypeError('createIntegration(): `events` must be an object mapping event types to handlers');
  for (const [type, h] of Object.entries(events)) {
    const list = Array.isArray(h) ? h : [h];
    list.forEach((fn, i) => {
      if (typeof fn !== 'function')
        throw new TypeError(`createIntegration(): events.${type}${Array.isArray(h) ? `[${i}]` : ''} must be a function (event, context) => void`);
    });
  }
  const unsupported = Object.keys(UNSUPPORTED_HANDLERS).filter((k) => {
    const v = (definition as Record<string, unknown>)[k];
    return v !== undefined && !(Array.isArray(v) && v.length === 0);
  });
  return Object.freeze({ [INTEGRATION]: true, fetch, components: [...components], events: { ...events }, unsupported }) as IntegrationDefinition;
}

/** Declare a UI component: its id, how its state starts, how it reacts to actions, how it renders. */
export function createComponent<C extends ComponentDefinition>(component: C): C {
  if (!component || typeof component !== 'object') throw new TypeError('createComponent() expects an object { componentId, initialState, action, render }');
  if (typeof component.componentId !== 'string' || !component.componentId) throw new TypeError('createComponent(): `componentId` must be a non-empty string');
  if (typeof component.render !== 'function')
    throw new TypeError(`createComponent("${component.componentId}"): \`render\` must be a function (element, context) => markup`);
  const init = component.initialState;
  if (init !== undefined && typeof init !== 'function' && (init === null || typeof init !== 'object' || Array.isArray(init)))
    throw new TypeError(
      `createComponent("${component.componentId}"): \`initialState\` must be a function (props, renderContext, context) => state, or a state object`,
    );
  if (component.action !== undefined && typeof component.action !== 'function')
    throw new TypeError(`createComponent("${component.componentId}"): \`action\` must be a function (element, action, context) => { state }`);
  return Object.freeze({ [COMPONENT]: true, ...component }) as C;
}

/**
 * GitBook's context.integration: its API client and queueTask. Tasks are not part of the spec, so
 * queueTask refuses with the reason instead of dropping the work.
 */
export function integrationContext(api: unknown) {
  return Object.freeze({
    api,
    async queueTask(): Promise<never> {
      throw new Error(`context.integration.queueTask() is not supported here: ${UNSUPPORTED_HANDLERS.task}`);
    },
  });
}
