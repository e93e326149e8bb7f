/**
 * The management API of installations, declared once (src/schema): the requests routes.ts
 * validates, the answers /openapi.json describes, and the CLI's reading of them (`InstallationView`).
 * routes.ts checks that installationView() gives the answer's shape (it fails to type-check otherwise).
 */
import {
  dateTime,
  any,
  array,
  duration,
  formatDuration,
  named,
  nullable,
  object,
  oneOf,
  optional,
  record,
  string,
  withDefault,
  type Infer,
} from '../schema/index.ts';
// The manifest's schema file itself, not its folder's index: the console's type-check follows these
// imports, and nothing here may bring in Node's modules.
import { VISIBILITIES } from '../manifest/schema.ts';
import { flag, enumParam, text, requestBody } from '../http/params.ts';
import { INSTALLATION_LIMITS as LIMITS } from './limits.ts';

export const INSTALLATION_TARGETS = ['organization', 'space', 'site'] as const;
export const INSTALLATION_STATUSES = ['pending', 'active', 'paused', 'uninstalled'] as const;

export const installationSchema = named(
  'Installation',
  object({
    id: string(),
    integration: string(),
    target: oneOf(INSTALLATION_TARGETS),
    space: optional(string()),
    site: optional(string()),
    status: oneOf(INSTALLATION_STATUSES),
    configuration: record(any(), { description: 'property values (credentials in URLs redacted unless revealed)' }),
    externalIds: array(string()),
    createdAt: dateTime(),
    updatedAt: dateTime(),
    uninstalledAt: optional(dateTime()),
    urls: object({ publicEndpoint: string() }),
    connect: array(object({ property: string(), label: string(), url: string() }), {
      description: 'buttons of the configuration to open (OAuth and the like)',
    }),
    missing: array(string(), { description: 'required properties not set yet (pending installations)' }),
    warnings: array(string(), {
      description:
        "what will fail ahead (a webhook URL the private-address guard refuses; one installation's answer also resolves its host name, the list does not)",
    }),
  }),
);

/** One installation as the API shows it (the CLI's reading of it). */
export type InstallationView = Infer<typeof installationSchema>;

export const installationAnswer = object({ installation: installationSchema });

export const listQuery = object({
  integration: text('only this integration'),
  status: enumParam(INSTALLATION_STATUSES, INSTALLATION_STATUSES.join(', ')),
  all: withDefault(flag('include uninstalled'), false),
});

export const listAnswer = object({ installations: array(installationSchema) });

export const installBody = requestBody({
  integration: string({ min: 1, description: 'the name of a loaded integration' }),
  target: optional(
    oneOf(INSTALLATION_TARGETS, {
      description: 'default: site with `site` (a `space` beside it is the space the site installation is in), space with `space` alone, else organization',
    }),
  ),
  space: optional(string({ max: LIMITS.id })),
  site: optional(string({ max: LIMITS.id })),
  configuration: optional(
    record(any(), { description: `property values; the manifest's defaults fill in absent keys (at most ${LIMITS.configurationBytes / 1024} kB as JSON)` }),
  ),
  externalIds: optional(array(string({ max: LIMITS.id }), { max: LIMITS.externalIds })),
  webhook_secret: optional(string({ min: 16, max: LIMITS.webhookSecret, description: 'webhook integration only: use this signing secret' })),
});

export const installAnswer = object({
  installation: installationSchema,
  token: string({ description: 'the installation token, shown once' }),
  webhookSecret: optional(string({ description: 'webhook integration: its signing secret, shown once' })),
});

/** What POST /api/v1/installations answers (the console shows its token and secret once). */
export type InstallAnswer = Infer<typeof installAnswer>;

export const showQuery = object({ reveal: withDefault(flag("show stored credentials (the admin, or integration code with its invocation's token)"), false) });

export const configureBody = requestBody({
  configuration: record(any(), {
    description: `keys set; null removes one (a property with a manifest default takes it back); the result at most ${LIMITS.configurationBytes / 1024} kB as JSON`,
  }),
  externalIds: optional(array(string({ max: LIMITS.id }), { max: LIMITS.externalIds, description: 'replaced when given' })),
});

export const tokenAnswer = object({ token: string({ description: 'the new installation token (the old one stops working)' }) });

export const renderBody = requestBody({
  componentId: string({ min: 1 }),
  props: optional(any()),
  state: optional(any()),
  action: optional(any()),
  context: optional(any()),
});

export const componentAnswer = named(
  'ComponentAnswer',
  object({ type: oneOf(['element']), state: optional(any()), props: optional(any()), element: any('ContentKit markup') }, { passthrough: true }),
);

/** How long an install link lives unless asked otherwise, and the bounds of what may be asked (ms). */
export const LINK_TTL = { default: 7 * 86_400_000, min: 60_000, max: 90 * 86_400_000 };

export const linkBody = requestBody({
  expires: withDefault(
    duration({
      min: LINK_TTL.min,
      max: LINK_TTL.max,
      description: `how long the link works (${formatDuration(LINK_TTL.min)} to ${formatDuration(LINK_TTL.max)})`,
    }),
    LINK_TTL.default,
  ),
});

export const linkAnswer = object({
  link: string({ description: 'the install link: a bearer token that installs this integration until it expires (shown once; nothing of it is stored)' }),
  id: string({ description: "the link's id, as logs name it" }),
  integration: string(),
  visibility: oneOf(VISIBILITIES),
  expiresAt: dateTime(),
  installUrl: string({ description: 'where it installs: POST here with Authorization: Bearer <link>' }),
});

/** What POST /api/v1/integrations/<name>/links answers. */
export type LinkAnswer = Infer<typeof linkAnswer>;

export const revokeAnswer = object({
  integration: string(),
  revokedAt: dateTime('every link of the integration made before this stopped working'),
});

const INSTALL_TARGETS = oneOf(INSTALLATION_TARGETS);

/** One integration as the catalogue shows it (spec 2.5: the public ones, for whoever installs). */
export const catalogueEntrySchema = named(
  'CatalogueEntry',
  object({
    name: string(),
    title: string(),
    description: string(),
    icon: nullable(string({ description: 'URL of its PNG icon (same tokens as the catalogue), or null' })),
    scopes: array(string()),
    targets: array(INSTALL_TARGETS, { description: 'where it installs' }),
    categories: array(string()),
  }),
);

export type CatalogueEntry = Infer<typeof catalogueEntrySchema>;

export const catalogueAnswer = object({ integrations: array(catalogueEntrySchema) });

export const catalogueItemAnswer = object({
  integration: catalogueEntrySchema,
  visibility: oneOf(VISIBILITIES),
  summary: nullable(string({ description: 'Markdown of its installation page' })),
  configurations: record(any(), { description: "the manifest's configurations (account, site, space): the properties an install sets" }),
});
