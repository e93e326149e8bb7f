/**
 * The installations service: the composition of its parts, each with a contract of its own:
 *
 * - state-machine.ts: the transitions of spec section 3 (install, configure, pause, resume,
 *   uninstall), validated against the manifest;
 * - rows.ts: the table, and the locked read a step starts with (FOR UPDATE on PostgreSQL);
 * - row-cache.ts: rows read by id outside any transaction;
 * - subscriptions.ts: the installations not uninstalled, in memory, and the webhook subscriptions
 *   derived from them;
 * - token-cache.ts, signing-secrets.ts: the invocation and integration tokens, GitBook's signing secrets.
 *
 * Here: each lifecycle step as one transaction that tells the modules following installations
 * (onChange), what other processes changed seen before an answer from memory (fresh), token
 * resolution, and the service's surface.
 */
import { AsyncResource } from 'node:async_hooks';
import { SwitchyardError } from '../errors.ts';
import { newEventId } from '../events/types.ts';
import { hashToken, INSTALL_LINK_PREFIX } from '../http/auth.ts';
import type { Principal } from '../http/app.ts';
import type { Database, Queries, Tx } from '../store/contract.ts';
import type { Generations } from '../store/generations.ts';
import { createObservers } from '../lib/observers.ts';
import { oncePerTurn } from '../lib/batch.ts';
import { createLogger, type Logger } from '../log/index.ts';
import type { Manifest, ManifestDialect } from '../manifest/index.ts';
import { mintIntegrationToken, mintInvocationToken, newInstallationToken, readIntegrationToken, readInvocationToken, signingKey } from './tokens.ts';
import { WEBHOOK_INTEGRATION } from './webhook.ts';
import type { SignatureScheme } from '../webhooks/index.ts';
import { checkExternalIds } from './limits.ts';
import { createInstallLinks, linkRefusal } from './links.ts';
import { cachedTokens } from './token-cache.ts';
import { signingSecrets } from './signing-secrets.ts';
import { createStateMachine, type Change, type InstallRequest } from './state-machine.ts';
import { createRowCache } from './row-cache.ts';
import { createLiveInstallations, schemeOf } from './subscriptions.ts';
import { fromRow, lists, lockedRow, q, type Installation } from './rows.ts';

export type { Installation, InstallationStatus, InstallationTarget } from './rows.ts';
export { RESERVED_CONFIGURATION_KEYS, configurationSection, type Change, type InstallRequest } from './state-machine.ts';

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
   * What find would answer, without waiting, when it can tell: the copy in memory while a check
   * this turn found no other process's change (the public endpoints' hot path). Undefined
   * otherwise: use find.
   */
  function findNow(id: string): Installation | undefined {
    if (!othersChanged.quiet()) return undefined;
    const known = live.get(id);
    if (known) return known;
    const hit = rows.peek(id);
    return hit ? fromRow(hit) : undefined;
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

  const { install, configure, setExternalIds, setStatus } = createStateMachine({
    manifestOf: (name) => deps.manifestOf(name),
    dialectOf: (name) => deps.dialectOf?.(name),
    organizations: deps.organizations,
    now,
    requireIn,
    changed,
  });

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
  /** An active webhook installation's URL now (a delivery waiting for a slot goes only there). */
  function webhookActiveUrl(installationId: string): string | undefined {
    freshSoon();
    return live.activeUrl(installationId);
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
    findNow,
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
    webhookActiveUrl,
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
 * Whether a platform event concerns an installation: a space installation only hears about its own
 * space (`spaceId`), a site installation only about its own site (`siteId`); an organization
 * installation hears about every space and site. An event naming neither reaches all of them.
 */
export function concerns(installation: Installation, event: Record<string, unknown>): boolean {
  if (installation.target === 'space' && typeof event.spaceId === 'string') return installation.space === event.spaceId;
  if (installation.target === 'site' && typeof event.siteId === 'string') return installation.site === event.siteId;
  return true;
}
