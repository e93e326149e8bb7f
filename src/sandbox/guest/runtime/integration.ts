/** createIntegration and createComponent: declare what an integration handles (spec 2.1, 2.2). */
export type Handler = (...args: any[]) => unknown;

export interface ComponentDefinition {
  componentId: string;
  initialState?: (props: any) => any;
  action?: (element: any, action: any, context: any) => unknown;
  render: (element: any, context: any) => unknown;
}

export interface IntegrationDefinition {
  fetch?: (request: Request, context: any) => unknown;
  components?: ComponentDefinition[];
  events?: Record<string, Handler | Handler[]>;
}

const INTEGRATION = Symbol.for('switchyard.integration');
const COMPONENT = Symbol.for('switchyard.component');

/** Validate an integration's definition once, at load, so mistakes surface in `switchyard check`. */
export function createIntegration(definition: IntegrationDefinition): IntegrationDefinition {
  if (!definition || typeof definition !== 'object') throw new TypeError('createIntegration() expects an object { fetch, components, events }');
  const { fetch, components = [], events = {} } = definition;
  if (fetch !== undefined && typeof fetch !== 'function') throw new TypeError('createIntegration(): `fetch` must be a function (request, context) => Response');
  if (!Array.isArray(components)) throw new TypeError('createIntegration(): `components` must be an array of createComponent() results');
  const ids = new Set<string>();
  components.forEach((c, i) => {
    if (!c || typeof c !== 'object' || typeof c.componentId !== 'string') throw new TypeError(`createIntegration(): components[${i}] is not a component (use createComponent({ componentId, render }))`);
    if (ids.has(c.componentId)) throw new TypeError(`createIntegration(): two components have the componentId "${c.componentId}"`);
    ids.add(c.componentId);
  });
  if (!events || typeof events !== 'object') throw new TypeError('createIntegration(): `events` must be an object mapping event types to handlers');
  for (const [type, h] of Object.entries(events)) {
    const list = Array.isArray(h) ? h : [h];
    list.forEach((fn, i) => {
      if (typeof fn !== 'function') throw new TypeError(`createIntegration(): events.${type}${Array.isArray(h) ? `[${i}]` : ''} must be a function (event, context) => void`);
    });
  }
  return Object.freeze({ [INTEGRATION]: true, fetch, components: [...components], events: { ...events } }) as IntegrationDefinition;
}

/** Declare a UI component: its id, how its state starts, how it reacts to actions, how it renders. */
export function createComponent<C extends ComponentDefinition>(component: C): C {
  if (!component || typeof component !== 'object') throw new TypeError('createComponent() expects an object { componentId, initialState, action, render }');
  if (typeof component.componentId !== 'string' || !component.componentId) throw new TypeError('createComponent(): `componentId` must be a non-empty string');
  if (typeof component.render !== 'function') throw new TypeError(`createComponent("${component.componentId}"): \`render\` must be a function (element, context) => markup`);
  if (component.initialState !== undefined && typeof component.initialState !== 'function') throw new TypeError(`createComponent("${component.componentId}"): \`initialState\` must be a function (props) => state`);
  if (component.action !== undefined && typeof component.action !== 'function') throw new TypeError(`createComponent("${component.componentId}"): \`action\` must be a function (element, action, context) => { state }`);
  return Object.freeze({ [COMPONENT]: true, ...component }) as C;
}
