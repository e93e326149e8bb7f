/**
 * Shared parts of the OAuth tests: a real OAuth 2 authorization server (oauth2-mock-server) on
 * 127.0.0.1 that records every code it issued and every token request it answered, and a step-by-step
 * browser (redirect: 'manual') for the connect flow.
 */
import { OAuth2Server, Events } from 'oauth2-mock-server';
import type { TestContext } from 'node:test';

export interface TokenCall {
  headers: Record<string, string | string[] | undefined>;
  body: Record<string, string>;
  answer: { statusCode: number; body: any };
}

/**
 * Sandbox limits for these tests: the production CPU budget (50 ms) is about the code, not about a
 * loaded CI machine; a cold isolate on 2 busy cores can pass it, and these tests are not about limits.
 */
export const RELAXED_SANDBOX = { cpu_time: 5000, startup_time: 10_000 };

export interface Provider {
  server: OAuth2Server;
  url: string;
  /** Codes handed out at /authorize, in order. */
  codes: string[];
  /** Requests to /token with what was answered. */
  tokenCalls: TokenCall[];
  /** Query of each /authorize request. */
  authorizeCalls: URLSearchParams[];
  /**
   * Change the provider's next answer of one kind (a token answer, an authorize redirect). The hook
   * is removed when the (sub)test ends, so one that was never used cannot leak into the next test.
   */
  once(t: TestContext, event: Events.BeforeResponse | Events.BeforeAuthorizeRedirect, fn: (arg: any, req: any) => void): void;
}

export async function startProvider(t: TestContext): Promise<Provider> {
  const server = new OAuth2Server();
  await server.issuer.keys.generate('RS256');
  await server.start(0, '127.0.0.1');
  t.after(() => server.stop());
  // Its default issuer URL says "localhost": name the address it really listens on.
  server.issuer.url = `http://127.0.0.1:${server.address().port}`;
  const p: Provider = {
    server,
    url: server.issuer.url,
    codes: [],
    tokenCalls: [],
    authorizeCalls: [],
    once(t, event, fn) {
      server.service.once(event, fn);
      t.after(() => {
        server.service.removeListener(event, fn);
      });
    },
  };
  server.service.on(Events.BeforeAuthorizeRedirect, (redirect: { url: URL }, req: { url?: string }) => {
    p.authorizeCalls.push(new URL(req.url ?? '/', p.url).searchParams);
    const code = redirect.url.searchParams.get('code');
    if (code) p.codes.push(code);
  });
  // The mock accepts any code; a real provider accepts only the ones it issued, once.
  server.service.on(Events.BeforeResponse, (res: { statusCode: number; body: any }, req: any) => {
    const body = req.body as Record<string, string>;
    if (body.grant_type === 'authorization_code') {
      const i = p.codes.indexOf(body.code);
      if (i < 0) {
        res.statusCode = 400;
        res.body = { error: 'invalid_grant', error_description: 'unknown or used code' };
      } else p.codes.splice(i, 1);
    }
    p.tokenCalls.push({ headers: { ...req.headers }, body: { ...body }, answer: res });
  });
  return p;
}

/** One step of a browser: GET without following redirects. */
export async function visit(url: string): Promise<{ status: number; location: URL | null; text: string; headers: Headers }> {
  const res = await fetch(url, { redirect: 'manual' });
  const location = res.headers.get('location');
  return { status: res.status, location: location ? new URL(location, url) : null, text: await res.text(), headers: res.headers };
}
