/**
 * The sandbox's data shapes: its public face (scripts, envelopes, results) and the messages that
 * cross between the server and a sandbox worker process (worker-process.ts, for tests and `switchyard
 * check`: JSON over IPC, bytes as base64). A serving process runs its isolates in-process and
 * passes the same shapes without IPC (in-process.ts).
 */
import type { Config } from '../config/index.ts';

export type Limits = Config['sandbox'];

/** One bundled ES module; its imports of '@switchyard/runtime[/jsx-runtime]' are resolved by the sandbox. */
export interface GuestScript {
  name: string;
  version: string;
  code: string;
}

/**
 * The file name a script is compiled under: V8 names its stack frames `integration:<name>@<version>:L:C`,
 * which the runtime maps back to the author's files (runtime/stack-trace.ts).
 */
export function scriptFileName(script: Pick<GuestScript, 'name' | 'version'>): string {
  return `integration:${script.name}@${script.version}`;
}

export interface Envelope {
  event: { type: string; [k: string]: unknown };
  environment: Record<string, unknown>;
  fetchBody?: Uint8Array;
  /**
   * `events`: hand the event to the definition's `events` handlers even when its type has a path of
   * its own (a `ui_render` event, which otherwise renders a component). Set by the platform only.
   */
  dispatch?: 'events';
}

export interface LogLine {
  time: number;
  level: 'debug' | 'info' | 'log' | 'warn' | 'error';
  message: string;
}

export type LimitName =
  | 'cpu_time'
  | 'wall_time'
  | 'memory_mb'
  | 'subrequests'
  | 'request_body'
  | 'response_body'
  | 'script_size'
  | 'startup_time'
  | 'wait_until';

export interface InvocationError {
  kind: 'exception' | 'limit' | 'crash' | 'load';
  message: string;
  stack?: string;
  limit?: string;
}

export interface InvocationResult {
  status: number;
  headers: Array<[string, string]>;
  /** The answer's body: a string when the integration's Response was made from one. */
  body: Uint8Array | string;
  logs: LogLine[];
  error?: InvocationError;
  durationMs: number;
  cpuMs: number;
}

export interface ScriptExports {
  fetch: boolean;
  components: string[];
  events: string[];
  /** GitBook handlers the script declares that do not run here, each with the reason. */
  unsupported?: Array<{ handler: string; reason: string }>;
}

/**
 * `library`: the guest library that read the exports (see guestLibraryId). `limit`: the load was
 * stopped by this limit (start-up time, memory, script size), not by a fault in the code.
 */
export type CheckResult = { ok: true; exports: ScriptExports; library?: string } | { ok: false; error: string; limit?: LimitName };

/** What the worker needs to know about its host; sent at start and whenever it changes. */
export interface WorkerSettings {
  limits: Limits;
  allowPrivateNetworks: boolean;
  serverOrigin: string;
  /** Most isolates one integration may have at once (each serves one invocation at a time). */
  concurrency: number;
}

/** An envelope as it crosses the IPC channel (JSON): the body as base64. */
export type WireEnvelope = Omit<Envelope, 'fetchBody'> & { fetchBody?: string };
/** A result as it crosses the IPC channel (JSON): the body as base64. */
export type WireResult = Omit<InvocationResult, 'body'> & { body: string };

export type ToWorker =
  | { t: 'settings'; settings: WorkerSettings }
  | { t: 'invoke'; id: number; name: string; version: string; code?: string; envelope: WireEnvelope; requestId: string }
  | { t: 'check'; id: number; script: GuestScript }
  | { t: 'unload'; id: number; name: string }
  | { t: 'close' };

export type FromWorker =
  | { t: 'ready' }
  | { t: 'result'; id: number; result: WireResult }
  | { t: 'checked'; id: number; result: CheckResult }
  | { t: 'unloaded'; id: number }
  | { t: 'log'; integration: string; requestId: string; line: LogLine }
  /** The worker does not have this script version's code: send the invocation again with `code`. */
  | { t: 'need-code'; id: number };
