/**
 * HTTPS on the server's own port (`server.tls`): the certificate and its private key, read and
 * checked together, and read again when their files change. A pair that cannot serve is refused
 * with the file and the reason: at start that stops the server (exit 2), later the pair already
 * served is kept. An expired certificate only warns: it is served (clients decide), so a renewal
 * that runs late never takes the server down.
 */
import { readFileSync, unwatchFile, watchFile, type Stats } from 'node:fs';
import { createPrivateKey, X509Certificate, type KeyObject } from 'node:crypto';
import { createSecureContext } from 'node:tls';
import { SwitchyardError } from '../errors.ts';
import type { Logger } from '../log/index.ts';

export interface TlsFiles {
  /** Absolute paths (config/index.ts resolves them against the config file's folder). */
  cert: string;
  key: string;
}

/** A pair that passed the checks: PEM text as read, and what the log says of it (nothing secret). */
export interface TlsPair {
  cert: string;
  key: string;
  /** The certificate's subject and names, for the log. */
  subject: string;
  names: string;
  validTo: string;
  /** SHA-256 of the server's certificate: a reload that reads the same pair changes nothing. */
  fingerprint: string;
}

const BEGIN_CERT = '-----BEGIN CERTIFICATE-----';
const PRIVATE_KEY_BLOCK = /-----BEGIN [A-Z ]*PRIVATE KEY-----/;

function refuse(setting: 'cert' | 'key', message: string, hint: string, cause?: unknown): SwitchyardError {
  return new SwitchyardError('tls_invalid', message, { where: `server.tls.${setting}`, hint, cause });
}

function readPem(setting: 'cert' | 'key', file: string): string {
  const what = setting === 'cert' ? 'certificate' : 'private key';
  try {
    return readFileSync(file, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    const why =
      code === 'ENOENT'
        ? 'does not exist'
        : code === 'EACCES' || code === 'EPERM'
          ? 'cannot be read by this user (permission denied)'
          : code === 'EISDIR'
            ? 'is a directory, not a file'
            : `cannot be read (${code ?? (e as Error).message})`;
    throw refuse(
      setting,
      `the ${what} file ${file} ${why}`,
      code === 'EACCES' || code === 'EPERM'
        ? `let the user the server runs as read it (chmod or chgrp), or point server.tls.${setting} at a copy it can read`
        : `point server.tls.${setting} in config.yaml at the PEM file (a relative path is read from the config file's folder)`,
    );
  }
}

/** Read both files and check they make a pair that can serve; throws tls_invalid naming the file. */
export function readTlsPair(files: TlsFiles, now = Date.now()): { pair: TlsPair; warnings: string[] } {
  const certPem = readPem('cert', files.cert);
  const keyPem = readPem('key', files.key);

  if (!certPem.includes(BEGIN_CERT)) {
    const swapped = PRIVATE_KEY_BLOCK.test(certPem);
    throw refuse(
      'cert',
      swapped
        ? `the certificate file ${files.cert} holds a private key, not a certificate`
        : `the certificate file ${files.cert} is not a PEM certificate (no "${BEGIN_CERT}" line)`,
      swapped
        ? 'server.tls.cert and server.tls.key look swapped'
        : 'give the PEM form (a DER file converts with `openssl x509 -inform der -in cert.der -out cert.pem`); the file may hold the chain after the certificate',
    );
  }
  let x509: X509Certificate;
  try {
    x509 = new X509Certificate(certPem);
  } catch (e) {
    throw refuse(
      'cert',
      `the certificate file ${files.cert} cannot be read as an X.509 certificate (${(e as Error).message})`,
      'check the file is whole: `openssl x509 -in <file> -noout -text` reads it',
      e,
    );
  }

  if (PRIVATE_KEY_BLOCK.test(keyPem) === false) {
    const swapped = keyPem.includes(BEGIN_CERT);
    throw refuse(
      'key',
      swapped
        ? `the private key file ${files.key} holds a certificate, not a private key`
        : `the private key file ${files.key} is not a PEM private key (no "-----BEGIN … PRIVATE KEY-----" line)`,
      swapped ? 'server.tls.cert and server.tls.key look swapped' : 'give the PEM private key the certificate was issued for',
    );
  }
  // PKCS#8 (`BEGIN ENCRYPTED PRIVATE KEY`) or the older PEM header (`Proc-Type: 4,ENCRYPTED`).
  if (/-----BEGIN ENCRYPTED PRIVATE KEY-----|Proc-Type:\s*4,\s*ENCRYPTED/.test(keyPem))
    throw refuse(
      'key',
      `the private key file ${files.key} is encrypted (it needs a passphrase)`,
      'the server reads keys without one: `openssl pkey -in <file> -out <new file>` writes it decrypted (keep that file mode 0600)',
    );
  let key: KeyObject;
  try {
    key = createPrivateKey(keyPem);
  } catch (e) {
    throw refuse(
      'key',
      `the private key file ${files.key} cannot be read as a private key (${(e as Error).message})`,
      'check the file is whole: `openssl pkey -in <file> -noout` reads it',
      e,
    );
  }

  if (!x509.checkPrivateKey(key)) {
    // A chain in the wrong order: the key's certificate is further down the file.
    const at = (certPem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? []).findIndex((pem, i) => {
      try {
        return i > 0 && new X509Certificate(pem).checkPrivateKey(key);
      } catch {
        return false;
      }
    });
    if (at > 0)
      throw refuse(
        'cert',
        `the certificate file ${files.cert} holds the chain in the wrong order: the certificate of the key ${files.key} is number ${at + 1} of the file`,
        "put the server's own certificate first, then the certificates that issued it (a fullchain.pem is in that order)",
      );
    throw refuse(
      'key',
      `the private key ${files.key} does not belong to the certificate ${files.cert}`,
      'give the key the certificate was issued for (renewals often make a new key: use both new files)',
    );
  }
  try {
    createSecureContext({ cert: certPem, key: keyPem });
  } catch (e) {
    throw refuse(
      'cert',
      `the certificate ${files.cert} and its key cannot serve TLS (${(e as Error).message})`,
      'check both files with `openssl x509 -in <cert> -noout -text`',
      e,
    );
  }

  const warnings: string[] = [];
  const validTo = new Date(x509.validTo);
  const validFrom = new Date(x509.validFrom);
  if (validTo.getTime() < now) warnings.push(`the certificate ${files.cert} expired on ${validTo.toISOString()}: clients refuse it until it is renewed`);
  else if (validFrom.getTime() > now)
    warnings.push(`the certificate ${files.cert} is not valid before ${validFrom.toISOString()}: clients refuse it until then`);
  return {
    pair: {
      cert: certPem,
      key: keyPem,
      subject: x509.subject.replace(/\n/g, ', '),
      names: x509.subjectAltName ?? '',
      validTo: validTo.toISOString(),
      fingerprint: x509.fingerprint256,
    },
    warnings,
  };
}

/** What the log says of a pair (never the key). */
export function pairFields(pair: TlsPair): Record<string, unknown> {
  return { subject: pair.subject, ...(pair.names ? { names: pair.names } : {}), valid_to: pair.validTo };
}

/**
 * Call `onChange` once both files have been still for `settleMs` after a change. The files are
 * polled by path (a stat each `intervalMs`), not watched by inode: a renewal that renames a new
 * file into place or swaps a symlink (certbot's live/ links, a mounted Kubernetes secret) is seen
 * like a write in place.
 */
export function watchTlsFiles(files: TlsFiles, onChange: () => void, opts: { intervalMs?: number; settleMs?: number } = {}): { close(): void } {
  const interval = opts.intervalMs ?? 1_000;
  const settle = opts.settleMs ?? 500;
  let timer: NodeJS.Timeout | undefined;
  let closed = false;
  const changed = (curr: Stats, prev: Stats) => {
    if (closed || (curr.mtimeMs === prev.mtimeMs && curr.ino === prev.ino && curr.size === prev.size && curr.ctimeMs === prev.ctimeMs)) return;
    // The cert and the key are often written one after the other: wait until both are still.
    clearTimeout(timer);
    timer = setTimeout(() => {
      if (!closed) onChange();
    }, settle);
    timer.unref();
  };
  const paths = [...new Set([files.cert, files.key])];
  for (const p of paths) watchFile(p, { interval, persistent: false }, changed);
  return {
    close() {
      closed = true;
      clearTimeout(timer);
      for (const p of paths) unwatchFile(p, changed);
    },
  };
}

/**
 * Where a listener gets its pair: `current` at start, then every accepted new pair. Alone, the
 * server reads the files itself (fileTlsSource); under the supervisor, the supervisor reads and
 * watches them and hands the pair to its serving processes (src/process/).
 */
export interface TlsSource {
  current: TlsPair;
  onPair(fn: (pair: TlsPair) => void): void;
  close(): void;
}

/**
 * A renewal seldom writes both files at the same instant: a pair that cannot serve is read again
 * this long after before it is called refused (and logged as an error).
 */
const CONFIRM_MS = 2_000;

/**
 * Read the pair now (throws tls_invalid when it cannot serve) and again whenever the files change.
 * A new pair that cannot serve, still so CONFIRM_MS later, is logged with its reason and the one
 * served is kept; the files' next change is tried again.
 */
export function fileTlsSource(files: TlsFiles, log: Logger, opts: { intervalMs?: number; settleMs?: number; confirmMs?: number } = {}): TlsSource {
  const first = readTlsPair(files);
  for (const w of first.warnings) log.warn(w, { code: 'tls_invalid' });
  let current = first.pair;
  let refused = false;
  let confirm: NodeJS.Timeout | undefined;
  const listeners: Array<(pair: TlsPair) => void> = [];

  const reread = (confirming: boolean) => {
    clearTimeout(confirm);
    let read: ReturnType<typeof readTlsPair>;
    try {
      read = readTlsPair(files);
    } catch (e) {
      if (!confirming) {
        confirm = setTimeout(() => reread(true), opts.confirmMs ?? CONFIRM_MS);
        confirm.unref();
        return;
      }
      refused = true;
      const err = e as Partial<SwitchyardError> & Error;
      log.error('the changed TLS files are refused; the previous certificate is still served', {
        code: err.code ?? 'tls_invalid',
        error: err.message,
        ...(err.hint ? { hint: err.hint } : {}),
        served: current.subject,
        served_valid_to: current.validTo,
      });
      return;
    }
    if (read.pair.fingerprint === current.fingerprint && read.pair.key === current.key) {
      if (refused) log.info('the TLS files make a pair again: the certificate served is unchanged', { cert: files.cert, ...pairFields(current) });
      refused = false;
      return;
    }
    refused = false;
    for (const w of read.warnings) log.warn(w, { code: 'tls_invalid' });
    current = read.pair;
    for (const fn of listeners) fn(current);
    log.info('TLS certificate reloaded', { cert: files.cert, ...pairFields(current) });
  };
  const watcher = watchTlsFiles(files, () => reread(false), opts);
  return {
    get current() {
      return current;
    },
    onPair: (fn) => void listeners.push(fn),
    close() {
      clearTimeout(confirm);
      watcher.close();
    },
  };
}
