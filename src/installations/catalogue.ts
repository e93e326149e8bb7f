/**
 * The catalogue (spec 2.5: a `public` integration is the one offered to everyone, in the
 * marketplace): the public integrations this server serves, for any token it accepts (the admin,
 * the console, installation tokens, install links). One entry is also shown to whoever may install
 * it: the admin, and the holder of an install link of it, whatever its visibility; to anyone else a
 * private or unlisted integration is not found, as if it were not there.
 */
import type { H3 } from 'h3';
import { SwitchyardError } from '../errors.ts';
import { principalOf, type Principal } from '../http/app.ts';
import { route } from '../http/route.ts';
import { IMAGE_HEADERS, readImageInside, type Manifest } from '../manifest/index.ts';
import type { LoadedIntegration } from '../registry/index.ts';
import type { ServicesWith } from '../module/contract.ts';
import { catalogueAnswer, catalogueItemAnswer, INSTALLATION_TARGETS, type CatalogueEntry } from './api.ts';
import { WEBHOOK_INTEGRATION } from './webhook.ts';

type Target = (typeof INSTALLATION_TARGETS)[number];

/**
 * Where an integration installs: the webhook integration into the organization only (spec 5.5);
 * one whose manifest names a `target` (GitBook's) there; any other anywhere.
 */
export function installTargets(name: string, manifest: Manifest): Target[] {
  if (name === WEBHOOK_INTEGRATION) return ['organization'];
  const t = manifest.target;
  return t && t !== 'all' ? [t] : [...INSTALLATION_TARGETS];
}

/** One integration as the catalogue shows it; `publicUrl` makes its icon's address. */
export function catalogueEntry(integration: LoadedIntegration, publicUrl: string): CatalogueEntry {
  const m = integration.manifest;
  const name = integration.name;
  return {
    name,
    title: m.title,
    description: m.description,
    // A built-in integration has no folder to read an icon from.
    icon: m.icon && !integration.builtin ? `${publicUrl}/api/v1/catalogue/${encodeURIComponent(name)}/icon` : null,
    scopes: [...(m.scopes as string[])],
    targets: installTargets(name, m),
    categories: [...(m.categories ?? [])],
  };
}

/** Whether `p` may see integration `i` in the catalogue (see the file's comment). */
function mayShow(p: Principal, i: LoadedIntegration): boolean {
  if (i.manifest.visibility === 'public') return true;
  if (p.kind === 'admin') return true;
  return p.kind === 'link' && p.integration === i.name;
}

export function catalogueRoutes(app: H3, services: ServicesWith<'installations'>): void {
  const name = { name: 'integration name' };

  /** A loaded integration `p` may see, else 404 (an unlisted or private one is not told apart from none). */
  function shown(req: Request, integrationName: string): LoadedIntegration {
    const i = services.registry?.get(integrationName);
    if (!i || !mayShow(principalOf(req), i))
      throw new SwitchyardError('not_found', `the catalogue has no integration "${integrationName}"`, {
        hint: 'see GET /api/v1/catalogue for the public ones',
      });
    return i;
  }

  route(
    app,
    {
      method: 'GET',
      path: '/api/v1/catalogue',
      summary: 'The catalogue: the public integrations this server serves (spec 2.5), by name',
      auth: 'token',
      installLink: true,
      response: catalogueAnswer,
    },
    () => {
      const loaded = (services.registry?.list() ?? []).flatMap((s) => (s.current ? [s.current] : []));
      const integrations = loaded
        .filter((i) => i.manifest.visibility === 'public')
        .sort((a, b) => a.name.localeCompare(b.name))
        .map((i) => catalogueEntry(i, services.config.publicUrl));
      return { integrations };
    },
  );

  route(
    app,
    {
      method: 'GET',
      path: '/api/v1/catalogue/:name',
      summary:
        "One integration's catalogue entry, summary and configuration properties: a public one for any token; any one for the admin and for the holder of an install link of it",
      auth: 'token',
      installLink: true,
      params: name,
      response: catalogueItemAnswer,
    },
    ({ req, params }) => {
      const i = shown(req, params.name);
      return {
        integration: catalogueEntry(i, services.config.publicUrl),
        visibility: i.manifest.visibility,
        summary: i.manifest.summary ?? null,
        configurations: (i.manifest.configurations ?? {}) as Record<string, unknown>,
      };
    },
  );

  route(
    app,
    {
      method: 'GET',
      path: '/api/v1/catalogue/:name/icon',
      summary: "An integration's icon (PNG, JPEG or SVG, served sandboxed), for whoever may see its entry",
      auth: 'token',
      installLink: true,
      params: name,
      responseDescription: 'The icon (image/png, image/jpeg or image/svg+xml)',
    },
    ({ req, params }) => {
      const i = shown(req, params.name);
      const image = i.builtin ? undefined : readImageInside(i.dir, i.manifest.icon, true);
      if (!image) throw new SwitchyardError('not_found', `integration "${params.name}" has no icon`);
      return new Response(new Uint8Array(image.bytes), { headers: { 'content-type': image.type, ...IMAGE_HEADERS } });
    },
  );
}
