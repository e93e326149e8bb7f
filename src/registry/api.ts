/**
 * The integrations API (the registry's view of each integration folder), declared once
 * (src/schema): the answers /openapi.json describes. index.ts's integrationView gives this shape
 * (route() fails to type-check otherwise).
 */
import { any, array, boolean, dateTime, named, nullable, object, oneOf, optional, record, string } from '../schema/index.ts';
import { CATEGORIES, VISIBILITIES } from '../manifest/schema.ts';
import { startupSchema } from '../http/health-api.ts';

export const INTEGRATION_STATUSES = ['loading', 'loaded', 'error', 'needs_configuration'] as const;

/** A problem of a folder: where (a field path or file position), what, and what to do. */
const problemSchema = object({
  where: string(),
  message: string(),
  hint: optional(string()),
  severity: optional(oneOf(['error', 'warning'])),
  needsEnv: optional(string({ description: 'the problem is only this unset environment variable: the folder needs configuration, not fixing' })),
});

export const integrationSchema = named(
  'Integration',
  object({
    name: string(),
    title: nullable(string()),
    status: oneOf(INTEGRATION_STATUSES),
    parked: nullable(
      object(
        { reason: string(), since: dateTime() },
        { description: 'set while the supervisor refuses to run this version (its code kept taking serving processes down)' },
      ),
    ),
    serving: boolean({ description: 'a version is serving (also while the latest change is rejected)' }),
    builtin: boolean({ description: 'the version serving is the one built into the program (no folder of that name serves)' }),
    version: nullable(string()),
    dir: string(),
    loadedAt: nullable(dateTime()),
    updatedAt: dateTime(),
    errors: array(problemSchema),
    warnings: array(problemSchema),
    manifest: nullable(
      object({
        description: string(),
        summary: nullable(string()),
        organization: string(),
        visibility: oneOf(VISIBILITIES),
        categories: array(oneOf(CATEGORIES)),
        script: nullable(string()),
        icon: nullable(string()),
        previewImages: array(string()),
        externalLinks: array(object({ url: string(), label: string() })),
        secrets: array(string(), { description: 'names only: values never leave the server' }),
      }),
    ),
    scopes: array(string()),
    blocks: array(record(any()), { description: "the manifest's blocks" }),
    configurations: record(any(), { description: "the manifest's configurations (account, site, space)" }),
  }),
);

export const integrationListAnswer = object({ integrations: array(integrationSchema), startup: startupSchema });
export const integrationAnswer = object({ integration: integrationSchema });
