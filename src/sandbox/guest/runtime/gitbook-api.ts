/**
 * context.api in GitBook's client shape: `api.<namespace>.<method>(...args)` with the REST paths of
 * GitBook's API, answered `{ data }` like its client. The installation and integration endpoints
 * are served by this server; content endpoints (spaces, pages, sites) are forwarded to an upstream
 * platform API when `gitbook.api_url` is configured, else answered 501 saying so. A method not
 * listed here throws at once, naming itself, instead of sending a request nobody answers.
 */
type Send = (method: string, path: string, body?: unknown) => Promise<any>;
type Verb = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

const e = encodeURIComponent;

/** [verb, path from the leading arguments, how many of them name the path, whether a body follows]. */
type Route = [Verb, (...a: string[]) => string, number, 'body' | 'query' | ''];

const ROUTES: Record<string, Record<string, Route>> = {
  integrations: {
    getIntegrationInstallationById: ['GET', (n, i) => `integrations/${e(n)}/installations/${e(i)}`, 2, ''],
    updateIntegrationInstallation: ['PATCH', (n, i) => `integrations/${e(n)}/installations/${e(i)}`, 2, 'body'],
    listIntegrationInstallations: ['GET', (n) => `integrations/${e(n)}/installations`, 1, 'query'],
    getIntegrationSpaceInstallation: ['GET', (n, i, s) => `integrations/${e(n)}/installations/${e(i)}/spaces/${e(s)}`, 3, ''],
    updateIntegrationSpaceInstallation: ['PATCH', (n, i, s) => `integrations/${e(n)}/installations/${e(i)}/spaces/${e(s)}`, 3, 'body'],
    listIntegrationSpaceInstallations: ['GET', (n) => `integrations/${e(n)}/spaces`, 1, 'query'],
    getIntegrationSiteInstallation: ['GET', (n, i, s) => `integrations/${e(n)}/installations/${e(i)}/sites/${e(s)}`, 3, ''],
    updateIntegrationSiteInstallation: ['PATCH', (n, i, s) => `integrations/${e(n)}/installations/${e(i)}/sites/${e(s)}`, 3, 'body'],
    listIntegrationSiteInstallations: ['GET', (n) => `integrations/${e(n)}/sites`, 1, 'query'],
    createIntegrationInstallationToken: ['POST', (n, i) => `integrations/${e(n)}/installations/${e(i)}/tokens`, 2, ''],
  },
  spaces: {
    getSpaceById: ['GET', (s) => `spaces/${e(s)}`, 1, ''],
    getCurrentRevision: ['GET', (s) => `spaces/${e(s)}/content`, 1, 'query'],
    getRevisionById: ['GET', (s, r) => `spaces/${e(s)}/revisions/${e(r)}`, 2, 'query'],
    getPageInRevisionById: ['GET', (s, r, p) => `spaces/${e(s)}/revisions/${e(r)}/page/${e(p)}`, 3, 'query'],
    getRevisionSemanticChanges: ['GET', (s, r) => `spaces/${e(s)}/revisions/${e(r)}/changes`, 2, 'query'],
    importGitRepository: ['POST', (s) => `spaces/${e(s)}/git/import`, 1, 'body'],
    exportToGitRepository: ['POST', (s) => `spaces/${e(s)}/git/export`, 1, 'body'],
  },
  orgs: {
    getSiteById: ['GET', (o, s) => `orgs/${e(o)}/sites/${e(s)}`, 2, ''],
    getSiteAdaptiveSchema: ['GET', (o, s) => `orgs/${e(o)}/sites/${e(s)}/adaptive-schema`, 2, ''],
    updateSiteAdaptiveSchema: ['PUT', (o, s) => `orgs/${e(o)}/sites/${e(s)}/adaptive-schema`, 2, 'body'],
  },
  urls: {
    getContentByUrl: ['GET', () => 'urls/content', 0, 'query'],
  },
};

function withQuery(path: string, query: unknown): string {
  if (!query || typeof query !== 'object') return path;
  const q = Object.entries(query as Record<string, unknown>)
    .filter(([, v]) => v !== undefined && v !== null)
    .map(([k, v]) => `${e(k)}=${e(String(v))}`)
    .join('&');
  return q ? `${path}?${q}` : path;
}

function namespace(name: string, routes: Record<string, Route>, send: Send): Record<string, unknown> {
  const methods: Record<string, unknown> = {};
  for (const [method, [verb, path, n, rest]] of Object.entries(routes)) {
    methods[method] = async (...args: unknown[]) => {
      const parts = args.slice(0, n).map((a, i) => {
        if (typeof a !== 'string' || !a) throw new TypeError(`api.${name}.${method}(): argument ${i + 1} must be a non-empty string`);
        return a;
      });
      const extra = args[n];
      const url = rest === 'query' ? withQuery(path(...parts), extra) : path(...parts);
      const data = await send(verb, url, rest === 'body' ? (extra ?? {}) : undefined);
      return { data, ok: true, status: 200 };
    };
  }
  return new Proxy(Object.freeze(methods), {
    get(target, key) {
      if (typeof key !== 'string' || key in target || key === 'then') return (target as any)[key];
      return () => {
        throw new Error(`api.${name}.${key}() is not available here; available: ${Object.keys(target).join(', ')} (or api.request(method, path, body))`);
      };
    },
  });
}

export function gitbookNamespaces(send: Send): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [name, routes] of Object.entries(ROUTES)) out[name] = namespace(name, routes, send);
  return out;
}
