/** `switchyard install` and `switchyard installations list|show|configure|pause|resume|uninstall`. */
import { defineCommand } from 'citty';
import type { InstallationView } from '../installations/index.ts';
import { SwitchyardError } from '../errors.ts';
import { apiClient, type ApiClient } from './client.ts';
import { configArg, configFrom, jsonArg } from './common.ts';
import { parseSets, repeated } from './sets.ts';
import { dim, green, printJson, table, yellow } from './table.ts';

const statusColour = (s: string) => (s === 'active' ? green(s) : s === 'pending' || s === 'paused' ? yellow(s) : dim(s));

async function propertiesOf(client: ApiClient, integration: string, target: string, opts: { link?: boolean } = {}) {
  try {
    // An install link reads its integration's catalogue entry (it may read nothing else).
    const r = await client.get(`/api/v1/${opts.link ? 'catalogue' : 'integrations'}/${encodeURIComponent(integration)}`);
    const conf = r?.integration?.manifest?.configurations ?? r?.integration?.configurations ?? r?.configurations;
    return (target === 'site' ? conf?.site?.properties : conf?.account?.properties) ?? {};
  } catch {
    return {};
  }
}

function printInstallation(i: InstallationView): void {
  const lines = [
    `${i.id}  ${statusColour(i.status)}`,
    `  integration     ${i.integration}`,
    `  target          ${i.target}${i.site ? ` (site ${i.site})` : ''}${i.space ? ` (space ${i.space})` : ''}`,
    `  public endpoint ${i.urls.publicEndpoint}`,
    `  created         ${i.createdAt}   updated ${i.updatedAt}`,
    '  configuration',
    ...(Object.keys(i.configuration).length ? Object.entries(i.configuration).map(([k, v]) => `    ${k} = ${JSON.stringify(v)}`) : ['    (empty)']),
  ];
  if (i.missing?.length) lines.push(`  missing         ${i.missing.join(', ')} (required before it is active)`);
  for (const c of i.connect) lines.push(`  ${c.label}: open ${c.url}`);
  process.stdout.write(`${lines.join('\n')}\n`);
  for (const w of i.warnings ?? []) process.stderr.write(`${yellow('warning')}: ${w}\n`);
}

const idArg = { id: { type: 'positional', required: true, description: 'installation id (inst_...)' } } as const;

export const install = defineCommand({
  meta: { name: 'install', description: 'Install an integration (organization-wide, or on a space or site)' },
  args: {
    integration: { type: 'positional', required: true, description: 'integration name' },
    space: { type: 'string', description: 'install on this space id (with --site: the space the site installation is in)' },
    site: { type: 'string', description: 'install on this site id' },
    set: { type: 'string', description: 'configuration key=value (repeatable)' },
    secret: { type: 'string', description: 'webhook integration: use this signing secret instead of a generated one' },
    link: {
      type: 'string',
      description: 'install with this install link instead of the admin token (`switchyard integrations link <name>` makes one)',
      valueHint: 'sy_link_...',
    },
    ...configArg,
    ...jsonArg,
  },
  async run({ args, rawArgs }) {
    const config = configFrom(args);
    if (args.link !== undefined && !args.link.trim())
      throw new SwitchyardError('bad_request', '--link needs the install link (sy_link_...)', { where: '--link' });
    // With a link, the link is the credential: no admin token is read or sent.
    const client = apiClient(config, args.link ? { token: args.link.trim() } : {});
    const target = args.site ? 'site' : args.space ? 'space' : 'organization';
    const props = await propertiesOf(client, args.integration, target, { link: Boolean(args.link) });
    const configuration = parseSets(repeated(rawArgs, 'set'), props);
    const r = await client.post('/api/v1/installations', {
      integration: args.integration,
      target,
      ...(args.space ? { space: args.space } : {}),
      ...(args.site ? { site: args.site } : {}),
      configuration,
      ...(args.secret ? { webhook_secret: args.secret } : {}),
    });
    if (args.json) return printJson(r);
    printInstallation(r.installation);
    process.stdout.write(`\n  installation token (shown once): ${r.token}\n`);
    if (r.webhookSecret) process.stdout.write(`  webhook signing secret (shown once): ${r.webhookSecret}\n`);
    if (r.installation.status !== 'active') {
      const view = r.installation as InstallationView;
      const buttons = new Set(view.connect.map((c) => c.property));
      const keys = view.missing.filter((k) => !buttons.has(k)); // buttons are set by opening their connect URL
      process.stdout.write(
        `\n  ${yellow('pending')}: required configuration missing (${view.missing.join(', ')}); set it with \`switchyard installations configure ${r.installation.id}${keys.map((k) => ` --set ${k}=...`).join('')}\`\n`,
      );
    }
  },
});

export default defineCommand({
  meta: { name: 'installations', description: 'List, inspect and manage installations' },
  subCommands: {
    list: defineCommand({
      meta: { name: 'list', description: 'List installations' },
      args: {
        integration: { type: 'string', description: 'only this integration' },
        status: { type: 'string', description: 'pending, active, paused or uninstalled' },
        all: { type: 'boolean', description: 'include uninstalled ones', default: false },
        ...configArg,
        ...jsonArg,
      },
      async run({ args }) {
        const r = await apiClient(configFrom(args)).get('/api/v1/installations', {
          integration: args.integration,
          status: args.status,
          all: args.all || undefined,
        });
        if (args.json) return printJson(r);
        const list = r.installations as InstallationView[];
        if (!list.length) return void process.stdout.write('no installations\n');
        process.stdout.write(
          `${table(
            ['id', 'integration', 'target', 'status', 'updated'],
            list.map((i) => [
              i.id,
              i.integration,
              i.target + (i.target === 'site' && i.site ? `:${i.site}` : i.space ? `:${i.space}` : ''),
              statusColour(i.status),
              i.updatedAt,
            ]),
          )}\n`,
        );
      },
    }),
    show: defineCommand({
      meta: { name: 'show', description: 'Show one installation, its configuration and connect URLs' },
      args: { ...idArg, reveal: { type: 'boolean', description: 'show stored credentials', default: false }, ...configArg, ...jsonArg },
      async run({ args }) {
        const r = await apiClient(configFrom(args)).get(`/api/v1/installations/${encodeURIComponent(args.id)}`, { reveal: args.reveal || undefined });
        if (args.json) return printJson(r);
        printInstallation(r.installation);
      },
    }),
    configure: defineCommand({
      meta: { name: 'configure', description: 'Edit configuration properties (validated against the manifest)' },
      args: {
        ...idArg,
        set: { type: 'string', description: 'key=value (repeatable)' },
        unset: { type: 'string', description: 'remove a key (repeatable)' },
        ...configArg,
        ...jsonArg,
      },
      async run({ args, rawArgs }) {
        const client = apiClient(configFrom(args));
        const current = (await client.get(`/api/v1/installations/${encodeURIComponent(args.id)}`)).installation as InstallationView;
        const props = await propertiesOf(client, current.integration, current.target);
        const patch: Record<string, unknown> = parseSets(repeated(rawArgs, 'set'), props);
        for (const k of repeated(rawArgs, 'unset')) patch[k] = null;
        if (!Object.keys(patch).length) {
          const { SwitchyardError } = await import('../errors.ts');
          throw new SwitchyardError('bad_request', 'nothing to change: pass --set key=value or --unset key');
        }
        const r = await client.patch(`/api/v1/installations/${encodeURIComponent(args.id)}`, { configuration: patch });
        if (args.json) return printJson(r);
        printInstallation(r.installation);
      },
    }),
    secret: defineCommand({
      meta: { name: 'secret', description: "Show a webhook installation's signing secret (masked unless --reveal), or --rotate it" },
      args: {
        ...idArg,
        reveal: { type: 'boolean', description: "print the secret itself (for a receiver's configuration)", default: false },
        rotate: { type: 'boolean', description: 'make a new secret; the old one keeps signing for webhooks.secret_rotation_overlap', default: false },
        ...configArg,
        ...jsonArg,
      },
      async run({ args }) {
        const client = apiClient(configFrom(args));
        const path = `/api/v1/webhooks/${encodeURIComponent(args.id)}/secret`;
        if (args.rotate) {
          const r = await client.post(`${path}/rotate`, {});
          if (args.json) return printJson(r);
          process.stdout.write(`new signing secret (shown once): ${r.secret}\n`);
          if (r.previousExpiresAt) process.stdout.write(`the previous secret keeps signing until ${r.previousExpiresAt}: update the receiver before then\n`);
          return;
        }
        const r = await client.get(path, { reveal: args.reveal || undefined });
        if (args.json) return printJson(r);
        process.stdout.write(`${r.secret}${r.revealed ? '' : dim('  (masked: --reveal prints it)')}\n`);
        for (const p of r.previous as Array<{ secret: string; expiresAt: string }>)
          process.stdout.write(`${p.secret}  ${dim(`previous, signs until ${p.expiresAt}`)}\n`);
      },
    }),
    pause: lifecycle('pause', 'Pause: no code runs; webhook deliveries wait as held (new events included) until resumed'),
    resume: lifecycle('resume', 'Resume a paused installation: its held webhook deliveries are sent at once, in event order'),
    uninstall: defineCommand({
      meta: { name: 'uninstall', description: 'Uninstall: token revoked, code never runs again, pending deliveries cancelled' },
      args: { ...idArg, ...configArg, ...jsonArg },
      async run({ args }) {
        const r = await apiClient(configFrom(args)).delete(`/api/v1/installations/${encodeURIComponent(args.id)}`);
        if (args.json) return printJson(r);
        process.stdout.write(`${r.installation.id} uninstalled\n`);
      },
    }),
  },
});

function lifecycle(action: 'pause' | 'resume', description: string) {
  return defineCommand({
    meta: { name: action, description },
    args: { ...idArg, ...configArg, ...jsonArg },
    async run({ args }) {
      const r = await apiClient(configFrom(args)).post(`/api/v1/installations/${encodeURIComponent(args.id)}/${action}`);
      if (args.json) return printJson(r);
      process.stdout.write(`${r.installation.id} ${statusColour(r.installation.status)}\n`);
    },
  });
}
