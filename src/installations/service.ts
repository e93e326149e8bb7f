/**
 * Installations: the state machine of spec section 3, configuration validated against the
 * manifest, per-installation tokens, and the webhook subscriptions derived from them.
 *
 *   install ──> pending ──(configuration complete)──> active <──resume── paused
 *                  ^                                     │ ──pause──>
 *                  └──────(a required key removed)───────┘
 *   any state ──uninstall──> uninstalled (final: token revoked, no code runs)
 */
import { AsyncResource } from 'node:async_hooks';
import { randomBytes } from 'node:crypto';
import { SwitchyardError, type Problem } from '../errors.ts';
import { newEventId } from '../events/types.ts';
import { hashToken, INSTALL_LINK_PREFIX } from '../http/auth.ts';
import type { Principal } from '../http/app.ts';
import { setOwn } from '../schema/index.ts';
import type { Database, Queries, Tx } from '../store/contract.ts';
import type { Generations } from '../store/generations.ts';
import { createObservers } from '../lib/observers.ts';
import { oncePerTurn } from '../lib/batch.ts';
import { createLogger, type Logger } from '../log/index.ts';
import { missingRequired, sectionFor, validateConfiguration, withDefaults, type Manifest, type ManifestDialect } from '../manifest/index.ts';
import { mintIntegrationToken, mintInvocationToken, newInstallationToken, readIntegrationToken, readInvocationToken, signingKey } from './tokens.ts';
import { WEBHOOK_INTEGRATION, requireOrganizationTarget, webhookConfigurationProblems } from './webhook.ts';
import type { SignatureScheme } from '../webhooks/index.ts';
import { checkExternalIds, configurationSizeProblem } from './limits.ts';
import { createInstallLinks, linkRefusal } from './links.ts';
import { installRefusal, type Installer } from './visibility.ts';
import { cachedTokens } from './token-cache.ts';
import { signingSecrets } from './signing-secrets.ts';
import { createRowCache } from './row-cache.ts';
import { createLiveInstallations, schemeOf } from './subscriptions.ts';
import { fromRow, lists, lockedRow, q, type Installation, type InstallationStatus, type InstallationTarget } from './rows.ts';

export type { Installation, InstallationStatus, InstallationTarget } from './rows.ts';

/** Keys the platform writes into a configuration itself; they are not manifest properties. */
export const RESERVED_CONFIGURATION_KEYS = ['oauth_credentials'] as const;

export interface InstallRequest {
  integration: string;
  target?: InstallationTarget;
  space?: string;
  site?: string;
  configuration?: Record<string, unknown>;
  externalIds?: string[];
  /** The webhook signing secret to use (a webhook installation); one is made otherwise. */
  webhookSecret?: string;
  /** Who installs: the visibility rules (visibility.ts) bind every installer but the admin. */
  by: Installer;
}

/**
 * A lifecycle step, told to the modules that follow installations (see onChange). `endpoint` is set
 * for a webhook installation only: where its deliveries go now (undefined: no URL), and before.
 */
export type InstallationChange =
  | { kind: 'installed'; installation: Installation; emit: Change['emit']; endpoint?: Endpoint; webhookSecret?: string }
  | {
      kind: 'configured';
      installation: Installation;
      previous: Installation;
      emit: Change['emit'];
      endpoint?: Endpoint & { previousUrl: string | undefined; previousScheme: SignatureScheme };
    }
  | { kind: 'paused' | 'resumed' | 'uninstalled'; installation: Installation; endpoint?: Endpoint };
export type ChangeKind = InstallationChange['kind'];
export interface Endpoint {
  url: string | undefined;
  /** How its deliveries are signed (the `signature_scheme` setting). */
  scheme: SignatureScheme;
}
/**
 * Told inside the step's transaction (`tx`, awaited with it): its writes commit or roll back with
 * the step, and one that throws rolls the step back (a webhook installation without its secret is
 * never stored). It may answer what it made for the step's caller (the webhook signing secret).
 */
export type ChangeListener = (tx: Tx, change: InstallationChange) => Promise<{ webhookSecret?: string } | void> | { webhookSecret?: string } | void;
/** Told once the step has committed. */
export type CommittedListener = (change: InstallationChange) => void;

/** What happened, for the caller to act on after the transaction (events, secrets). */
export interface Change {
  installation: Installation;
  /** Runtime events to emit to the installation's integration. */
  emit: Array<{ type: string; [k: string]: unknown }>;
}

export interface InstallationsDeps {
  database: Database;
  /** Where changes made by other processes are seen (store/generations.ts, generationsFor). */
  generations: Generations;
  /** The manifest of a loaded integration, or undefined when it is not loaded. */
  manifestOf(name: string): Manifest | undefined;
  /** Which manifest file it came from (GitBook's keeps its JSON Schema's open configurations for its code). */
  dialectOf?(name: string): ManifestDialect | undefined;
  now?: () => Date;
  /** Where a listener told after a commit that throws is reported. */
  log?: Logger;
  /** The organization names this server installs for (`organization:`); none when unset. */
  organizations?: readonly string[];
}

export { newEventId };

const urlOf = (i: Installation): string | undefined => (typeof i.configuration.webhook_url === 'string' ? i.configuration.webhook_url : undefined);
const endpointOf = (i: Installation): Endpoint | undefined => (i.integration === WEBHOOK_INTEGRATION ? { url: urlOf(i), scheme: schemeOf(i) } : undefined);

/** The installations service; reads the server's signing keys, so it is awaited at start. */
export async function createInstallations(deps: InstallationsDeps) {
  const { database, generations } = deps;
  const now = () => (deps.now?.() ?? new Date()).toISOString();
  const [tokenKey, integrationKey, signingSecretKey] = [
    await signingKey(database, 'invocation-token'),
    await signingKey(database, 'integration-token'),
    await signingKey(database, 'gitbook-signing-secrets'),
  ];
  const invocationTokens = cachedTokens((id, ttlMs, at) => mintInvocationToken(tokenKey, id, ttlMs, at));
  const integrationTokens = cachedTokens((name, ttlMs, at) => mintIntegrationToken(integrationKey, name, ttlMs, at));
  const secrets = signingSecrets(signingSecretKey);
  const links = await createInstallLinks(database, () => (deps.now?.() ?? new Date()).getTime());

  // The installations not uninstalled, in memory (subscriptions.ts): read below, before the service answers.
  const live = createLiveInstallations(database);
  // Rows read outside any transaction, by id (row-cache.ts).
  const rows = createRowCache(database);
  // Other serving processes (and nodes) write installations too (see store/generations.ts): their
  // changes drop these copies, and read the webhook endpoints again, before the next answer.
  const othersChanged = generations.watch('installations');
  async function fresh(): Promise<void> {
    if (!(await othersChanged())) return;
    rows.clear();
    await live.reload();
  }
  // What answers synchronously (cached, the webhook endpoints) asks too, for the next caller: in the
  // context this service was made in, never in that of a transaction the caller may be in (its
  // statements would be refused there).
  const outsideAny = new AsyncResource('installations.fresh');
  const freshSoon = oncePerTurn(() => outsideAny.runInAsyncScope(() => void fresh().catch(() => {})));

  /** The installation, read through the cache (fresh: another process's change is seen). */
  async function find(id: string): Promise<Installation | undefined> {
    await fresh();
    const known = live.get(id);
    if (known) return known;
    const r = await rows.read(id);
    return r ? fromRow(r) : undefined;
  }

  /**
   * The cached copy only, for synchronous code that cannot wait for the store (undefined when it
   * is not in memory: use find). As fresh as the last find or fresh() of this process.
   */
  function cached(id: string): Installation | undefined {
    freshSoon();
    const hit = rows.peek(id);
    return live.get(id) ?? (hit ? fromRow(hit) : undefined);
  }

  const missing = (id: string) =>
    new SwitchyardError('not_found', `installation ${id} does not exist`, { hint: 'list them with `switchyard installations list`' });

  async function require(id: string): Promise<Installation> {
    const inst = await find(id);
    if (!inst) throw missing(id);
    return inst;
  }

  /** The installation as `tx` sees it, locked for the rest of the step on PostgreSQL. */
  async function requireIn(tx: Queries, id: string): Promise<Installation> {
    const r = await lockedRow(tx, id);
    if (!r) throw missing(id);
    return fromRow(r);
  }

  function manifestFor(name: string): Manifest {
    const m = deps.manifestOf(name);
    if (!m)
      throw new SwitchyardError('not_found', `integration "${name}" is not loaded`, {
        hint: 'see `switchyard integrations list` for loaded integrations and their errors',
      });
    return m;
  }

  const configurationsOf = configurationSection;

  /** Problems with the configuration's values; `missing` lists required keys not yet set. */
  function check(
    manifest: Manifest,
    target: InstallationTarget,
    integration: string,
    configuration: Record<string, unknown>,
    edit: { byCode?: boolean; changed?: ReadonlySet<string> } = {},
  ) {
    const def = configurationsOf(manifest, target);
    // Platform-written keys (oauth_credentials) are exempt from validation unless the manifest
    // declares them as a property (a required button whose value the OAuth flow writes).
    const declaredNames = new Set(Object.keys((def?.properties as Record<string, unknown> | undefined) ?? {}));
    const declared: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(configuration))
      if (declaredNames.has(k) || !(RESERVED_CONFIGURATION_KEYS as readonly string[]).includes(k)) setOwn(declared, k, v);
    const problems: Problem[] = [
      // GitBook integrations' own code may keep keys it does not declare (what its OAuth
      // extractCredentials returns beside the credentials, say), as GitBook's open schemas let it;
      // people editing a configuration still get unknown keys refused.
      // A person's edit is judged on the keys it changes: what the code kept stays as it is.
      ...validateConfiguration(def, declared, {
        partial: true,
        undeclared: deps.dialectOf?.(integration) !== 'gitbook' ? false : edit.byCode ? true : (name) => edit.changed !== undefined && !edit.changed.has(name),
      }),
      ...(integration === WEBHOOK_INTEGRATION ? webhookConfigurationProblems(declared) : []),
    ];
    // Platform-written keys too: the whole of it is stored.
    const size = configurationSizeProblem(configuration);
    if (size) problems.push(size);
    return { problems, missing: missingRequired(def, declared) };
  }

  /**
   * The configuration an installation is stored with, on creation and on every update (whatever the
   * door: CLI, API, console, the integration's own API calls): the manifest's defaults filled in,
   * then checked. Removing a key that has a default sets it back to its default.
   */
  function settle(
    manifest: Manifest,
    target: InstallationTarget,
    integration: string,
    given: Record<string, unknown>,
    edit: { byCode?: boolean; changed?: ReadonlySet<string> } = {},
  ) {
    const configuration = withDefaults(configurationsOf(manifest, target), given);
    return { configuration, ...check(manifest, target, integration, configuration, edit) };
  }

  function fail(problems: Problem[]): never {
    throw new SwitchyardError('validation_failed', `the configuration has ${problems.length} problem${problems.length === 1 ? '' : 's'}; nothing was stored`, {
      problems,
    });
  }

  async function list(filter: { integration?: string; status?: string; includeUninstalled?: boolean } = {}): Promise<Installation[]> {
    const { integration, status } = filter;
    const rows = integration
      ? status
        ? await database.all(lists.integrationStatus, [integration, status])
        : await database.all(filter.includeUninstalled ? lists.integrationAll : lists.integrationLive, [integration])
      : status
        ? await database.all(lists.status, [status])
        : await database.all(filter.includeUninstalled ? lists.all : lists.live);
    return rows.map(fromRow);
  }

  /** After a write of `id` in `tx`: its cached row goes (now, and once the step commits), and the other processes are told. */
  async function changed(tx: Tx, id: string): Promise<void> {
    rows.forget(id);
    tx.afterCommit(() => rows.forget(id));
    await generations.bump(tx, 'installations');
  }

  async function install(tx: Tx, req: InstallRequest): Promise<Change & { token: string }> {
    const manifest = manifestFor(req.integration);
    const refused = installRefusal(req.integration, manifest, req.by, deps.organizations ?? []);
    if (refused) throw refused;
    // A site named with a space is a site installation in that space (spec 2.4's `space`).
    const target: InstallationTarget = req.target ?? (req.site ? 'site' : req.space ? 'space' : 'organization');
    if (req.integration === WEBHOOK_INTEGRATION) requireOrganizationTarget(target, req);
    if (target === 'space' && !req.space) throw new SwitchyardError('bad_request', 'a space installation needs a space id', { where: 'space' });
    if (target === 'site' && !req.site) throw new SwitchyardError('bad_request', 'a site installation needs a site id', { where: 'site' });
    const { configuration, problems, missing } = settle(manifest, target, req.integration, req.configuration ?? {});
    if (problems.length) fail(problems);
    checkExternalIds(req.externalIds ?? []);
    const id = `inst_${randomBytes(10).toString('hex')}`;
    const token = newInstallationToken();
    const at = now();
    const status: InstallationStatus = missing.length ? 'pending' : 'active';
    await tx.run(q.insert, [
      id,
      req.integration,
      target,
      req.space ?? null,
      req.site ?? null,
      status,
      JSON.stringify(configuration),
      JSON.stringify(req.externalIds ?? []),
      hashToken(token),
      at,
      at,
    ]);
    await changed(tx, id);
    const installation = await requireIn(tx, id);
    return { installation, token, emit: setupEvents(installation) };
  }

  /**
   * Edit configuration properties: `patch` keys are set, `null` removes one. Every edit is
   * validated against the manifest (nothing is stored on failure) and emits installation_setup.
   * `byCode`: the integration's own code writes it (an invocation's token).
   */
  async function configure(tx: Tx, current: Installation, patch: Record<string, unknown>, opts: { byCode?: boolean } = {}): Promise<Change> {
    const { id } = current;
    if (current.status === 'uninstalled') throw new SwitchyardError('conflict', `installation ${id} is uninstalled`);
    const manifest = manifestFor(current.integration);
    const edited: Record<string, unknown> = { ...current.configuration };
    for (const [k, v] of Object.entries(patch)) {
      if (v === null) delete edited[k];
      else setOwn(edited, k, v);
    }
    const {
      configuration: next,
      problems,
      missing,
    } = settle(manifest, current.target, current.integration, edited, { byCode: opts.byCode, changed: new Set(Object.keys(patch)) });
    if (problems.length) fail(problems);
    const status: InstallationStatus = current.status === 'paused' ? 'paused' : missing.length ? 'pending' : 'active';
    await tx.run(q.configure, [JSON.stringify(next), status, now(), id]);
    await changed(tx, id);
    const installation = await requireIn(tx, id);
    return { installation, emit: setupEvents(installation, { status: current.status, configuration: current.configuration }) };
  }

  /**
   * What an install or a configuration edit emits: installation_setup (spec 3), and for a space
   * or site installation GitBook's space_installation_setup / site_installation_setup ("installed
   * or updated on a space/site"), with the state before an edit as `previous`.
   */
  function setupEvents(installation: Installation, previous?: { status: InstallationStatus; configuration: Record<string, unknown> }): Change['emit'] {
    const { id, status } = installation;
    const before = previous ? { previous } : {};
    const emit: Change['emit'] = [{ type: 'installation_setup', eventId: newEventId(), installationId: id, status, ...before }];
    if (installation.target === 'space')
      emit.push({ type: 'space_installation_setup', eventId: newEventId(), installationId: id, spaceId: installation.space, status, ...before });
    if (installation.target === 'site')
      emit.push({ type: 'site_installation_setup', eventId: newEventId(), installationId: id, siteId: installation.site, status, ...before });
    return emit;
  }

  /** Replace the external ids an integration keeps on its installation (GitBook's externalIds). */
  async function setExternalIds(tx: Tx, id: string, externalIds: string[]): Promise<Installation> {
    checkExternalIds(externalIds);
    const current = await requireIn(tx, id);
    if (current.status === 'uninstalled') throw new SwitchyardError('conflict', `installation ${id} is uninstalled`);
    await tx.run(q.externalIds, [JSON.stringify(externalIds), now(), id]);
    await changed(tx, id);
    return requireIn(tx, id);
  }

  async function setStatus(tx: Tx, id: string, to: 'paused' | 'resume' | 'uninstalled'): Promise<Installation> {
    const current = await requireIn(tx, id);
    if (current.status === 'uninstalled') throw new SwitchyardError('conflict', `installation ${id} is uninstalled`);
    let status: InstallationStatus;
    if (to === 'resume') {
      if (current.status !== 'paused') throw new SwitchyardError('conflict', `installation ${id} is ${current.status}, not paused`);
      const manifest = deps.manifestOf(current.integration);
      const missing = manifest ? check(manifest, current.target, current.integration, current.configuration).missing : [];
      status = missing.length ? 'pending' : 'active';
    } else if (to === 'paused') {
      if (current.status === 'paused') return current;
      status = 'paused';
    } else status = 'uninstalled';
    const at = now();
    await tx.run(q.status, [status, at, status === 'uninstalled' ? at : null, id]);
    await changed(tx, id);
    return requireIn(tx, id);
  }

  async function resolveToken(token: string): Promise<Principal | undefined> {
    if (token.startsWith(INSTALL_LINK_PREFIX)) {
      const r = await links.read(token);
      if (r.ok) return { kind: 'link', integration: r.link.integration, linkId: r.link.id };
      // Authentic but expired or revoked: said as such. Anything else goes on to the admin-token
      // comparison, which counts it against the throttle like any wrong token.
      const refusal = linkRefusal(r);
      if (refusal) throw refusal;
      return undefined;
    }
    if (token.startsWith('sy_int_')) {
      // Only while the integration is loaded: its scopes come from the manifest serving now.
      const name = readIntegrationToken(integrationKey, token);
      const manifest = name ? deps.manifestOf(name) : undefined;
      if (!name || !manifest) return undefined;
      return { kind: 'integration', integration: name, scopes: (manifest.scopes as string[] | undefined) ?? [], via: 'invocation' };
    }
    let inst: Installation | undefined;
    const invId = readInvocationToken(tokenKey, token);
    if (invId) inst = await find(invId);
    else if (token.startsWith('sy_inst_')) {
      const r = await database.get(q.byTokenHash, [hashToken(token)]);
      inst = r ? fromRow(r) : undefined;
    }
    if (!inst || inst.status === 'uninstalled') return undefined;
    const scopes = (deps.manifestOf(inst.integration)?.scopes as string[] | undefined) ?? [];
    return { kind: 'installation', installationId: inst.id, integration: inst.integration, scopes, via: invId ? 'invocation' : 'token' };
  }

  await live.reload();

  /** The active installations, oldest first (synchronous: from memory; see fresh). */
  function active(): Installation[] {
    freshSoon();
    return live.active();
  }

  function webhookSubscriptions(type: string): Array<{ installationId: string; url: string }> {
    freshSoon();
    return live.subscribers(type);
  }
  /** A webhook installation's URL now, whatever event types it takes (a replay goes there). */
  function webhookUrl(installationId: string): string | undefined {
    freshSoon();
    return live.url(installationId);
  }
  /** How a webhook installation signs now (read at every attempt, and when its secret is rotated: a pending one's too). */
  function webhookScheme(installationId: string): SignatureScheme {
    freshSoon();
    return live.scheme(installationId);
  }

  // The lifecycle: each step is one transaction that tells the modules following installations
  // (the webhooks' secrets and queue) inside it, and the others (the runtime's events) once it
  // has committed. Routes only parse, authorize, call a step and answer.
  const inStep = new Set<ChangeListener>();
  const committed = createObservers<[InstallationChange]>(deps.log ?? createLogger(), 'installation change listener failed', (c) => ({
    installation: c.installation.id,
    kind: c.kind,
  }));
  async function tell(tx: Tx, change: InstallationChange): Promise<{ webhookSecret?: string }> {
    const out: { webhookSecret?: string } = {};
    for (const listener of inStep) Object.assign(out, (await listener(tx, change)) ?? {});
    tx.afterCommit(() => {
      live.set(change.installation);
      committed.notify(change);
    });
    return out;
  }
  const step =
    <A extends unknown[], T>(fn: (tx: Tx, ...args: A) => Promise<T>) =>
    (...args: A): Promise<T> =>
      database.transaction((tx) => fn(tx, ...args));
  const statusStep = (to: 'paused' | 'resume' | 'uninstalled', kind: 'paused' | 'resumed' | 'uninstalled') =>
    step(async (tx, id: string): Promise<Installation> => {
      const u = await setStatus(tx, id, to);
      await tell(tx, { kind, installation: u, endpoint: endpointOf(u) });
      return u;
    });
  const lifecycle = {
    /** Install (with its webhook signing secret, for a webhook installation). */
    install: step(async (tx, req: InstallRequest): Promise<Change & { token: string; webhookSecret?: string }> => {
      const c = await install(tx, req);
      const told = await tell(tx, {
        kind: 'installed',
        installation: c.installation,
        emit: c.emit,
        endpoint: endpointOf(c.installation),
        webhookSecret: req.webhookSecret,
      });
      return { ...c, ...(told.webhookSecret ? { webhookSecret: told.webhookSecret } : {}) };
    }),
    /** A configuration edit (and the externalIds, when given): queued deliveries follow the webhook URL. */
    configure: step(async (tx, id: string, patch: Record<string, unknown>, opts: { byCode?: boolean; externalIds?: string[] } = {}): Promise<Change> => {
      if (opts.externalIds) checkExternalIds(opts.externalIds);
      const previous = await requireIn(tx, id);
      const c = await configure(tx, previous, patch, opts);
      if (opts.externalIds) c.installation = await setExternalIds(tx, id, opts.externalIds);
      const endpoint = endpointOf(c.installation);
      await tell(tx, {
        kind: 'configured',
        installation: c.installation,
        previous,
        emit: c.emit,
        endpoint: endpoint && { ...endpoint, previousUrl: urlOf(previous), previousScheme: schemeOf(previous) },
      });
      return c;
    }),
    pause: statusStep('paused', 'paused'),
    resume: statusStep('resume', 'resumed'),
    uninstall: statusStep('uninstalled', 'uninstalled'),
  };

  // Follow the lifecycle: told each step inside its transaction (see ChangeListener), or with
  // `{ afterCommit: true }` once the step has committed (a listener that throws then is logged).
  function onChange(listener: ChangeListener): () => void;
  function onChange(listener: CommittedListener, opts: { afterCommit: true }): () => void;
  function onChange(listener: ChangeListener | CommittedListener, opts: { afterCommit?: boolean } = {}): () => void {
    if (opts.afterCommit) return committed.add((c) => void (listener as CommittedListener)(c));
    inStep.add(listener as ChangeListener);
    return () => void inStep.delete(listener as ChangeListener);
  }

  return {
    find,
    cached,
    require,
    list,
    /** Let what answers from memory (cached, the webhook endpoints) see other processes' changes now. */
    fresh,
    ...lifecycle,
    active,
    /** Replace the external ids alone (the integration's own API call). */
    setExternalIds: step(async (tx, id: string, externalIds: string[]) => {
      const i = await setExternalIds(tx, id, externalIds);
      tx.afterCommit(() => live.set(i));
      return i;
    }),
    /** Returns what removes the listener. */
    onChange,
    resolveToken,
    /** Install links: mint, read and revoke (links.ts). */
    links,
    webhookSubscriptions,
    webhookUrl,
    webhookScheme,
    /** A short-lived token for one invocation of the installation's code. */
    invocationToken(id: string, ttlMs: number): string {
      return invocationTokens(id, ttlMs);
    },
    /**
     * A short-lived integration-wide token for one invocation (GitBook's `apiTokens.integration`):
     * it reads and updates the integration's own installations, nothing else. Reused like
     * invocationToken while it has half its life left.
     */
    integrationToken(name: string, ttlMs: number): string {
      return integrationTokens(name, ttlMs);
    },
    /**
     * GitBook's `environment.signingSecrets`: a stable secret per integration and per installation
     * (signing-secrets.ts).
     */
    signingSecret(kind: 'integration' | 'installation', subject: string): string {
      return secrets(kind, subject);
    },
    /** Mint a new long-lived token (the old one stops working). */
    rotateToken: step(async (tx, id: string): Promise<string> => {
      await requireIn(tx, id);
      const token = newInstallationToken();
      await tx.run(q.token, [hashToken(token), now(), id]);
      await changed(tx, id);
      return token;
    }),
  };
}

export type Installations = Awaited<ReturnType<typeof createInstallations>>;

/**
 * The manifest section an installation's configuration is checked against (sectionFor in
 * manifest/sections.ts: `configurations.site` for a site, `configurations.space` for a space when
 * the manifest has one, else `configurations.account`).
 */
export function configurationSection(manifest: Manifest | undefined, target: InstallationTarget): any {
  return sectionFor(manifest?.configurations as Parameters<typeof sectionFor>[0], target);
}

/**
 * Whether a platform event concerns an installation: a space installation only hears about its own
 * space (`spaceId`), a site installation only about its own site (`siteId`); an organization
 * installation hears about every space and site. An event naming neither reaches all of them.
 */
export function concerns(installation: Installation, event: Record<string, unknown>): boolean {
  if (installation.target === 'space' && typeof event.spaceId === 'string') return installation.space === event.spaceId;
  if (installation.target === 'site' && typeof event.siteId === 'string') return installation.site === event.siteId;
  return true;
}
