/**
 * Server side of the OAuth handler (spec 2.3, 5.1): signed, single-use, expiring `state` for the
 * flows integrations run with createOAuthHandler(). The flow itself runs in the guest runtime
 * library; it calls these endpoints through context.api with its installation token.
 */
import { createRefreshClaims, type RefreshClaims } from './claims.ts';
import { SwitchyardError } from '../errors.ts';
import { principalOf } from '../http/app.ts';
import { readJson } from '../http/body.ts';
import { route } from '../http/route.ts';
import { claimAnswer, consumeAnswer, consumeBody, issueBody, issuedAnswer, releaseAnswer, releaseBody } from './api.ts';
import { defineModule } from '../module/contract.ts';
import { createStateStore, type StateStore } from './state.ts';

export { createStateStore, codeChallengeOf, STATE_TTL_MS, type StateStore, type ConsumeResult } from './state.ts';
export { oauthMigrations } from './schema.ts';

/** Largest `data` a state may carry (it travels in the authorize URL). */
export const STATE_DATA_MAX = 2048;

const messages: Record<string, string> = {
  malformed: 'the OAuth state is malformed',
  forged: 'the OAuth state was not issued by this server',
  expired: 'the OAuth state has expired (states live 10 minutes); start the connection again',
  reused: 'the OAuth state was already used; start the connection again',
  wrong_installation: 'the OAuth state belongs to another installation',
};

function installationOf(req: Request): string {
  const p = principalOf(req);
  if (p.kind !== 'installation') throw new SwitchyardError('forbidden', 'OAuth state is issued to an installation token only');
  return p.installationId;
}

/**
 * How long one invocation may hold an installation's credential renewal before another may take
 * it: longer than the renewal can take (re-read, token request, store: three calls, each bounded by
 * sandbox.subrequest_timeout), so a slow provider never lets a second renewal start under the first.
 */
export function refreshClaimMs(subrequestTimeoutMs: number): number {
  return 3 * subrequestTimeoutMs + 5_000;
}

declare module '../module/contract.ts' {
  interface Capabilities {
    oauthStates?: StateStore;
    oauthRefreshClaims?: RefreshClaims;
  }
}

export const oauthModule = defineModule({
  name: 'oauth',
  provides: ['oauthStates', 'oauthRefreshClaims'],
  // An integration's OAuth flow checks its installation there when the server has them.
  uses: ['installations'],
  async start(services) {
    services.oauthStates = await createStateStore(services.store.database);
    services.oauthRefreshClaims = createRefreshClaims(services.store.database);
  },
  routes(app, services) {
    // Looked up per request: tests swap in a store with another clock.
    const states = () => services.oauthStates;
    // The bodies are read by the handlers, whose messages predate route()'s: documented, not checked by it.
    const json = (schema: typeof issueBody | typeof releaseBody | typeof consumeBody, required = true) => ({ media: 'application/json', schema, required });
    route(
      app,
      {
        method: 'POST',
        path: '/api/v1/oauth/state',
        summary: 'Issue a signed, single-use OAuth state (installation token only; lives 10 minutes); with {"pkce": true} also a PKCE S256 challenge',
        auth: 'token',
        passThrough: json(issueBody, false),
        response: issuedAnswer,
      },
      async ({ req }) => {
        const id = installationOf(req);
        const body = await readJson<{ data?: unknown; pkce?: unknown }>(req, 16 * 1024, { optional: true });
        const data = body.data ?? {};
        if (typeof data !== 'object' || data === null || Array.isArray(data))
          throw new SwitchyardError('bad_request', '"data" must be an object', { where: 'data' });
        if (JSON.stringify(data).length > STATE_DATA_MAX)
          throw new SwitchyardError('bad_request', `"data" is larger than ${STATE_DATA_MAX} bytes of JSON (it travels in the authorize URL)`, {
            where: 'data',
          });
        if (body.pkce !== undefined && typeof body.pkce !== 'boolean')
          throw new SwitchyardError('bad_request', '"pkce" must be true or false', { where: 'pkce' });
        return states().issue(id, data as Record<string, unknown>, { pkce: body.pkce === true });
      },
    );
    // Single-flight renewal: the isolates of one integration run invocations side by side, and two
    // of them renewing the same credentials would both spend the refresh token (a provider that
    // rotates refresh tokens refuses the second, some then revoke the whole grant). One claim per
    // installation at a time, in the store (every serving process sees it), for refreshClaimMs() at most.
    const claims = () => services.oauthRefreshClaims;
    route(
      app,
      {
        method: 'POST',
        path: '/api/v1/oauth/refresh/claim',
        summary:
          "Claim the renewal of this installation's OAuth credentials (installation token only; one at a time, 3 x sandbox.subrequest_timeout + 5 s at most)",
        auth: 'token',
        response: claimAnswer,
        responseDescription: '{granted: true, claim, until} or {granted: false, until}',
      },
      async ({ req }) => {
        const id = installationOf(req);
        const r = await claims().take(id, Date.now(), refreshClaimMs(services.config.sandbox.subrequest_timeout));
        return r.granted
          ? { granted: true, claim: r.claim, until: new Date(r.until).toISOString() }
          : { granted: false, until: new Date(r.until).toISOString() };
      },
    );
    route(
      app,
      {
        method: 'POST',
        path: '/api/v1/oauth/refresh/release',
        summary: 'Release a renewal claim (installation token only)',
        auth: 'token',
        passThrough: json(releaseBody),
        response: releaseAnswer,
      },
      async ({ req }) => {
        const id = installationOf(req);
        const body = await readJson<{ claim?: unknown }>(req, 1024);
        return { released: typeof body.claim === 'string' && (await claims().release(id, body.claim)) };
      },
    );
    route(
      app,
      {
        method: 'POST',
        path: '/api/v1/oauth/state/consume',
        summary:
          "Verify and burn an OAuth state (the installation's token, or its integration's token for a state of any of its installations); returns its PKCE code_verifier, once",
        auth: 'token',
        passThrough: json(consumeBody),
        response: consumeAnswer,
        responses: { '400': { description: 'malformed, forged, expired, reused or wrong installation (the error hint names which)' } },
      },
      async ({ req }) => {
        // The installation's own callback, or (GitBook's integration-wide redirect URL) the
        // integration's callback with no installation: then a state of any of its installations.
        const p = principalOf(req);
        const caller =
          p.kind === 'integration' ? async (id: string) => (await services.installations?.find(id))?.integration === p.integration : installationOf(req);
        const body = await readJson<{ state?: unknown }>(req, 16 * 1024);
        if (typeof body.state !== 'string') throw new SwitchyardError('bad_request', '"state" is required', { where: 'state' });
        const r = await states().consume(body.state, caller);
        if (!r.ok) {
          services.log.warn('OAuth state refused', {
            ...(typeof caller === 'string' ? { installation: caller } : { integration: (p as { integration: string }).integration }),
            reason: r.reason,
          });
          throw new SwitchyardError('bad_request', messages[r.reason], { where: 'state', hint: r.reason });
        }
        return { ok: true, installationId: r.installationId, data: r.data, ...(r.codeVerifier ? { codeVerifier: r.codeVerifier } : {}) };
      },
    );
  },
});
