/**
 * Who is calling the management API, as the /api/v1 guard (app.ts) found it, and the checks routes
 * make of it.
 */
import { SwitchyardError } from '../errors.ts';

/**
 * Who is calling the management API: the admin, one installation with its own token, (GitBook's
 * integration-wide token, handed to invocations only) an integration acting on its own installations,
 * or the holder of an install link, who may install that link's integration and read its catalogue
 * entry (the /api/v1 guard refuses a link on every route not declared to take one).
 * Checks name what a kind may do; a new kind is refused wherever it is not named.
 */
export type Principal =
  | { kind: 'admin' }
  | {
      kind: 'installation';
      installationId: string;
      integration: string;
      scopes: string[];
      /** `invocation`: a short-lived token handed to one invocation of the installation's own code. */
      via: 'invocation' | 'token';
    }
  | {
      kind: 'integration';
      integration: string;
      scopes: string[];
      via: 'invocation';
    }
  | {
      kind: 'link';
      /** The integration the link installs. */
      integration: string;
      /** The link's own id (in logs; never the link itself). */
      linkId: string;
    };

const principals = new WeakMap<Request, Principal>();

/** Set by the /api/v1 guard once the caller is authenticated. */
export function setPrincipal(req: Request, p: Principal): void {
  principals.set(req, p);
}

/** The principal the /api/v1 guard found for this request. */
export function principalOf(req: Request): Principal {
  const p = principals.get(req);
  if (!p) throw new SwitchyardError('unauthorized', 'not authenticated');
  return p;
}

/** Throws 403 unless the caller is the admin. */
export function requireAdmin(req: Request): void {
  if (principalOf(req).kind !== 'admin')
    throw new SwitchyardError('forbidden', 'this endpoint needs the admin token', {
      hint: 'installation tokens may only read their own installation and update its configuration',
    });
}
