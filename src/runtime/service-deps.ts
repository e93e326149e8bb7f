/**
 * What the runtime is built from (RuntimeDeps), what it records (Invocation), and what it tells
 * its observers (InvocationNotice). The runtime's stages (service.ts composes them) share these.
 */
import type { Logger } from '../log/index.ts';
import type { Installations } from '../installations/index.ts';
import type { Registry } from '../registry/index.ts';
import type { InvocationResult, LogLine, Sandbox } from '../sandbox/index.ts';
import type { Database } from '../store/contract.ts';
import type { DropReason, LogBudgetOptions } from './log-budget.ts';
import type { ExportsCache } from './exports-cache.ts';

export interface RuntimeDeps {
  database: Database;
  log: Logger;
  publicUrl: () => string;
  registry: Registry;
  sandbox: Sandbox;
  installations: Installations;
  /** Lifetime of the token handed to one invocation (wall time + waitUntil + margin). */
  tokenTtlMs: number;
  /** The headers a public-endpoint answer leaves with (http/origins.ts: our cookies dropped, sandboxed). */
  publicAnswerHeaders?: (headers: Array<[string, string]>, origin: string | null) => Array<[string, string]>;
  /** GitBook's organization id for `installation.target.organization` (config gitbook.organization). */
  organization?: () => string;
  /** How much of the printed output is stored (see log-budget.ts). */
  logBudget: LogBudgetOptions;
  /** What script versions export, kept across starts (see exports-cache.ts). */
  exportsCache?: ExportsCache;
}

export interface Invocation {
  id: string;
  integration: string;
  installationId?: string;
  eventType: string;
  eventId?: string;
  status: number;
  durationMs: number;
  cpuMs: number;
  error?: { kind: string; message: string; stack?: string };
  logs: LogLine[];
  createdAt: string;
}

/** What the runtime just recorded, for observers (live logs, metrics). */
export type InvocationNotice =
  | { kind: 'recorded'; id: string; integration: string; installationId: string | null; status: number; error?: InvocationResult['error'] }
  | { kind: 'log'; id: string; line: LogLine }
  /** Lines of this invocation that were not stored (counted in its marker line). */
  | { kind: 'dropped'; id: string; integration: string; reason: DropReason; lines: number; bytes: number };
