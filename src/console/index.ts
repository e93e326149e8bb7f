/**
 * The web console: a browser UI served by the server itself under /console (integrations,
 * installations and their configuration forms, live components, events and deliveries). It talks
 * to the same management API as the CLI, with a session cookie in place of the bearer token.
 * Attaches `services.resolveSession` (read by authenticate() in src/http/app.ts).
 */
import { defineModule } from '../module/contract.ts';
import { consoleRoutes } from './routes.ts';
import { createSessions, requestSession, type Sessions } from './session.ts';
import { generationsFor } from '../store/generations.ts';

export { consoleAssets, CONSOLE_ASSETS_DEFINE, type ConsoleAssets } from './assets.ts';
export { createSessions, requestSession, SESSION_COOKIE, CSRF_HEADER, LOGIN_HEADER, SESSION_TTL_MS, type Session, type Sessions } from './session.ts';

declare module '../module/contract.ts' {
  interface Capabilities {
    consoleSessions?: Sessions;
  }
}

export const consoleModule = defineModule({
  name: 'console',
  provides: ['consoleSessions'],
  // Its pages show the integrations and their runs when the server has those modules.
  uses: ['registry', 'runtime'],
  async start(services) {
    const sessions = await createSessions({
      adminToken: services.adminToken,
      store: { database: services.store.database, generations: generationsFor(services.store) },
    });
    services.consoleSessions = sessions;
    services.resolveSession = async (req: Request) => ((await requestSession(req, sessions)) ? ({ kind: 'admin' } as const) : undefined);
  },
  routes(app, services) {
    consoleRoutes(app, services, services.consoleSessions);
  },
});
