/**
 * Hello components: every part of createIntegration() in one script.
 * - components: a counter block (initialState, action returning { state }, render with JSX)
 * - events: installation_setup and space_content_updated
 * - fetch: the public endpoint (spec 4.2) and the option list of the `channel` property
 */
import { createComponent, createIntegration } from '@switchyard/runtime';
import { routeOf } from './route.ts';

interface CounterProps {
  start?: number;
}
interface CounterState {
  count: number;
}

const counter = createComponent({
  componentId: 'counter',
  initialState: (props: CounterProps): CounterState => ({ count: props.start ?? 0 }),
  action: async (element: { state: CounterState }, action: { action: string }, context: any) => {
    const step = Number(context.environment.installation?.configuration?.step ?? 1);
    switch (action.action) {
      case 'increment':
        if (context.environment.installation?.configuration?.announce) console.log(`counter pressed: ${element.state.count + step}`);
        return { state: { count: element.state.count + step } };
      case 'reset':
        return { state: { count: 0 } };
      default:
        return {};
    }
  },
  render: async (element: { state: CounterState }, context: any) => {
    const configuration = context.environment.installation?.configuration ?? {};
    const greeting: string = configuration.greeting ?? 'Hello';
    return (
      <block>
        <text>
          {greeting}! Pressed {element.state.count} {element.state.count === 1 ? 'time' : 'times'}.
        </text>
        <button label="Press me" style={configuration.style ?? 'primary'} onPress={{ action: 'increment' }} />
        <button label="Reset" style="secondary" onPress={{ action: 'reset' }} />
      </block>
    );
  },
});

const channels = [
  { label: 'General', value: 'general' },
  { label: 'Releases', value: 'releases' },
  { label: 'Random', value: 'random' },
];

export default createIntegration({
  components: [counter],

  events: {
    installation_setup: async (event: any, context: any) => {
      const installation = context.environment.installation;
      // Spec 3: the configuration is incomplete while the status is not "active".
      if (installation?.status !== 'active') console.log(`installation ${event.installationId}: configuration incomplete`);
      else console.log(`installation ${event.installationId}: ready, greeting "${installation.configuration.greeting}"`);
    },
    space_content_updated: async (event: any) => {
      console.log(`space ${event.spaceId} changed (revision ${event.revisionId})`);
    },
  },

  fetch: async (request: Request, context: any) => {
    const route = routeOf(request, context.environment);
    // completion_url of the `channel` property: the options to pick from.
    if (route === '/channels') return Response.json(channels);
    // The reference public endpoint (spec 4.2): answer fast, process later.
    if (request.method !== 'POST') return new Response('Method not allowed', { status: 405 });
    const body = await request.text();
    context.waitUntil?.(Promise.resolve().then(() => console.log(`received ${body.length} bytes on ${route}`)));
    return Response.json({ received: true });
  },
});
