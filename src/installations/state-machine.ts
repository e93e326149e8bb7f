/**
 * The installation state machine (spec section 3): the transitions a lifecycle step makes inside
 * its transaction, each one validated against the manifest and stored, with the runtime events it
 * emits. The service (service.ts) runs each in a transaction and tells the modules that follow
 * installations.
 *
 *   install ──> pending ──(configuration complete)──> active <──resume── paused
 *                  ^                                     │ ──pause──>
 *                  └──────(a required key removed)───────┘
 *   any state ──uninstall──> uninstalled (final: token revoked, no code runs)
 */
import { randomBytes } from 'node:crypto';
import { SwitchyardError, type Problem } from '../errors.ts';
import { newEventId } from '../events/types.ts';
import { hashToken } from '../http/auth.ts';
import { setOwn } from '../schema/index.ts';
import type { Tx } from '../store/contract.ts';
import { missingRequired, sectionFor, validateConfiguration, withDefaults, type Manifest, type ManifestDialect } from '../manifest/index.ts';
import { newInstallationToken } from './tokens.ts';
import { WEBHOOK_INTEGRATION, requireOrganizationTarget, webhookConfigurationProblems } from './webhook.ts';
import { checkExternalIds, configurationSizeProblem } from './limits.ts';
import { installRefusal, type Installer } from './visibility.ts';
import { q, type Installation, type InstallationStatus, type InstallationTarget } from './rows.ts';

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

/** What happened, for the caller to act on after the transaction (events, secrets). */
export interface Change {
  installation: Installation;
  /** Runtime events to emit to the installation's integration. */
  emit: Array<{ type: string; [k: string]: unknown }>;
}

export interface StateMachineDeps {
  /** The manifest of a loaded integration, or undefined when it is not loaded. */
  manifestOf(name: string): Manifest | undefined;
  /** Which manifest file it came from (GitBook's keeps its JSON Schema's open configurations for its code). */
  dialectOf?(name: string): ManifestDialect | undefined;
  /** The organization names this server installs for (`organization:`); none when unset. */
  organizations?: readonly string[];
  /** The time a transition is stored with (ISO 8601). */
  now(): string;
  /** The installation as `tx` sees it, locked for the rest of the step on PostgreSQL (not found: throws). */
  requireIn(tx: Tx, id: string): Promise<Installation>;
  /** After a write of `id` in `tx` (caches drop it, other processes are told). */
  changed(tx: Tx, id: string): Promise<void>;
}

/** The transitions; each runs inside the caller's transaction and throws (nothing stored) when refused. */
export interface StateMachine {
  /** A new installation: pending until its required configuration is set, active then. Answers its long-lived token. */
  install(tx: Tx, req: InstallRequest): Promise<Change & { token: string }>;
  /** A configuration edit (`null` removes a key): pending or active by what is still missing; a paused one stays paused. */
  configure(tx: Tx, current: Installation, patch: Record<string, unknown>, opts?: { byCode?: boolean }): Promise<Change>;
  /** Replace the external ids an integration keeps on its installation (GitBook's externalIds). */
  setExternalIds(tx: Tx, id: string, externalIds: string[]): Promise<Installation>;
  /** Pause, resume (to pending or active) or uninstall. */
  setStatus(tx: Tx, id: string, to: 'paused' | 'resume' | 'uninstalled'): Promise<Installation>;
}

export function createStateMachine(deps: StateMachineDeps): StateMachine {
  const { now, requireIn, changed } = deps;

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
  return { install, configure, setExternalIds, setStatus };
}

/**
 * The manifest section an installation's configuration is checked against (sectionFor in
 * manifest/sections.ts: `configurations.site` for a site, `configurations.space` for a space when
 * the manifest has one, else `configurations.account`).
 */
export function configurationSection(manifest: Manifest | undefined, target: InstallationTarget): any {
  return sectionFor(manifest?.configurations as Parameters<typeof sectionFor>[0], target);
}
