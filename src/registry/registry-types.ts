/**
 * The registry as its users see it: what a loaded integration is, a folder's state, how far the
 * start-up load is, the options, and the Registry's methods. The stages (registry-*.ts) and
 * everything outside this folder draw these from here (through registry.ts and index.ts).
 */
import type { Config } from '../config/index.ts';
import type { Problem } from '../errors.ts';
import type { Logger } from '../log/index.ts';
import type { Manifest, ManifestDialect } from '../manifest/index.ts';

/** What the sandbox runs: one ES module; `@switchyard/runtime` (and its subpaths) left as imports. */
export interface GuestScript {
  name: string;
  /** Content hash of `code`. */
  version: string;
  code: string;
}

/** A version that passed every check and is (or was) serving. */
export interface LoadedIntegration {
  name: string;
  dir: string;
  manifest: Manifest;
  /** `gitbook` when read from gitbook-manifest.yaml: its code sees GitBook's environment shape. */
  dialect?: ManifestDialect;
  /** Resolved secret values by name. Never log these. */
  secrets: Record<string, string>;
  script?: GuestScript;
  /** The script's source map (JSON text), for stack traces; stays on the host (see runtime/stack-trace.ts). */
  sourceMap?: string;
  warnings: Problem[];
  loadedAt: number;
  /** A built-in integration (see RegistryOptions.builtins): no folder; `dir` is BUILTIN_DIR. */
  builtin?: true;
}

/** What a built-in integration shows as its folder. */
export const BUILTIN_DIR = '(built-in)';

/**
 * One folder's state. `status: 'error'` with `current` set means the last change was rejected and
 * the previous version keeps serving; without `current`, nothing serves from this folder.
 */
export interface IntegrationState {
  name: string;
  dir: string;
  status: IntegrationStatus;
  current?: LoadedIntegration;
  errors: Problem[];
  warnings: Problem[];
  updatedAt: number;
}

/**
 * `needs_configuration`: nothing is wrong with the folder but environment variables its secrets read
 * are unset (a shipped example before its .env is filled in): a one-line warning, not an error.
 */
export type IntegrationStatus = 'loaded' | 'error' | 'needs_configuration' | 'loading';

/** How far the start-up load is: every folder present at start, and how many were tried. */
export interface Readiness {
  /** Every folder present at start was tried (loaded, failed or needs configuration). */
  ready: boolean;
  total: number;
  /** Folders tried so far. */
  done: number;
  /** Folders serving now. */
  loaded: number;
  failed: number;
  /** When the start-up pass began and ended (ms since the epoch). */
  startedAt: number;
  readyAt?: number;
  /** Folders whose bundle was read back from the cache / built by esbuild during the pass. */
  cached: number;
  bundled: number;
}

export interface Registry {
  get(name: string): LoadedIntegration | undefined;
  list(): IntegrationState[];
  state(name: string): IntegrationState | undefined;
  /** Called after a swap (`current` the new version) or a removal (`current` undefined). */
  onChange(fn: (name: string, current: LoadedIntegration | undefined) => void): () => void;
  /** Re-read every folder now; resolves once done. */
  reload(): Promise<void>;
  readiness(): Readiness;
  /** Resolves true once the start-up pass is over, false when `timeoutMs` passed first. */
  whenReady(timeoutMs?: number): Promise<boolean>;
  /**
   * The integration serving under `name`: at once when it serves; while the start-up pass may
   * still bring it, loads its folder next and waits for it, up to `timeoutMs` (then throws a 503
   * `starting` error). Undefined when no folder serves that name.
   */
  whenLoaded(name: string, timeoutMs?: number): Promise<LoadedIntegration | undefined>;
  close(): Promise<void>;
}

export interface RegistryOptions {
  dir: string;
  log: Logger;
  /** Environment for `${{ env.NAME }}` secrets (a folder's own .env fills in what is missing). */
  env: Record<string, string | undefined>;
  limits: Config['sandbox'];
  watch?: boolean;
  /** Load the script in the sandbox: an error message when it fails. A version swaps in only when this passes. */
  verify?: (script: GuestScript) => Promise<string | undefined>;
  /**
   * Manifest-only integrations served whatever the folder holds: a folder that serves the same
   * name overrides one; while none does (no such folder, or one that fails to load) it serves.
   */
  builtins?: Array<{ name: string; manifest: string }>;
  /** Quiet time after the last file event of a folder before it is reloaded. */
  debounceMs?: number;
  /** Keep bundles here across starts (`<data_dir>/cache`): an unchanged folder is not bundled again. */
  cacheDir?: string;
  /** Remove cached bundles unused for a week (one process of several does it). */
  pruneCache?: boolean;
  /** Hand the registry back at once and load the folders in the background (see readiness()). */
  background?: boolean;
  /**
   * With `background`: begin loading once this resolves (the server's start line first, then the
   * integrations'; see Services.listening).
   */
  startAfter?: Promise<unknown>;
  now?: () => number;
}

/** How long a request for an integration waits, by default, while the start-up pass may still bring it. */
export const LOAD_WAIT_MS = 10_000;

/** Folders starting with `.` or `_` (and node_modules) are not integrations: a way to park one. */
export function isIntegrationFolderName(name: string): boolean {
  return !name.startsWith('.') && !name.startsWith('_') && name !== 'node_modules';
}
