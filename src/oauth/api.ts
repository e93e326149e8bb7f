/**
 * The OAuth state API, declared once (src/schema): the bodies its routes read themselves (their
 * messages predate route()'s) and the answers, as /openapi.json describes them.
 */
import { any, boolean, dateTime, object, oneOf, optional, record, string } from '../schema/index.ts';

export const issueBody = object({
  data: optional(record(any(), { description: 'carried by the state and handed back when it is consumed (at most 2048 bytes of JSON)' })),
  pkce: optional(boolean({ description: 'also a PKCE S256 challenge; its code_verifier is handed back once, when the state is consumed' })),
});

export const issuedAnswer = object({
  state: string(),
  expiresAt: dateTime(),
  codeChallenge: optional(string()),
  codeChallengeMethod: optional(oneOf(['S256'])),
});

export const claimAnswer = object({
  granted: boolean(),
  claim: optional(string({ description: 'when granted: hand it back to release the claim' })),
  until: dateTime('when the claim lapses'),
});

export const releaseBody = object({ claim: string() });
export const releaseAnswer = object({ released: boolean() });

export const consumeBody = object({ state: string() });
export const consumeAnswer = object({
  ok: boolean(),
  installationId: string(),
  data: record(any()),
  codeVerifier: optional(string()),
});
