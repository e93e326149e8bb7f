/**
 * config.yaml, declared once: the TypeScript type, the embedded defaults and the validation
 * messages all come from this schema. The root config.yaml documents the same keys with comments;
 * a test keeps the two equal.
 */
import { Cron } from 'croner';
import * as s from '../schema/index.ts';
import { readStoreUrl, STORE_URL_FORM } from '../store/postgres/url.ts';

/** What a cron pattern looks like, for whoever refuses one (here, and the retention job's own check). */
export const CRON_HINT = 'five fields: minute hour day-of-month month day-of-week, e.g. "17 3 * * *" (daily at 03:17)';

const GIB = 1024 ** 3;

/**
 * `server.trust_proxy`: how many reverse proxies stand in front of the server. `true` is one, `false`
 * none. The client is the X-Forwarded-For entry that many hops from the right (the one the outermost
 * trusted proxy added), as Express's `trust proxy` counts: entries further left are the client's own
 * words.
 */
function proxyHops(): s.Schema<number> {
  return {
    kind: 'proxy_hops',
    description: 'reverse proxies in front of the server (true = 1)',
    check(v, path, issues) {
      if (v === true || v === 'true') return 1;
      if (v === false || v === 'false') return 0;
      const n = typeof v === 'string' && /^\s*\d+\s*$/.test(v) ? Number(v) : v;
      if (typeof n === 'number' && Number.isInteger(n) && n >= 0 && n <= 16) return n;
      issues.push({
        path,
        message: `must be true, false or a number of proxies from 0 to 16, got ${s.typeName(v)}`,
        hint: 'true means one proxy (nginx, Caddy) in front of the server',
      });
      return s.INVALID;
    },
  };
}

/**
 * `store:`: where the state lives. Absent or empty: the SQLite file under data_dir. A
 * postgres:// URL: that PostgreSQL database, shared by every node given the same URL. The value
 * holds a password, so no message repeats it, and a URL that PostgreSQL's parsers would read
 * differently (an unencoded @ / ? # in the password) is refused here (store/postgres/url.ts).
 */
function storeUrl(): s.Schema<string> {
  return {
    kind: 'store_url',
    description: `empty for the SQLite file under data_dir, or ${STORE_URL_FORM}`,
    check(v, path, issues) {
      if (v === undefined || v === null || v === '') return '';
      if (typeof v !== 'string') {
        issues.push({
          path,
          message: `must be a postgres:// URL, got ${s.typeName(v)}`,
          hint: `${STORE_URL_FORM}, or \${{ env.DATABASE_URL }}; leave it out for SQLite under data_dir`,
        });
        return s.INVALID;
      }
      const read = readStoreUrl(v);
      if (!read.ok) {
        issues.push({ path, message: `${read.problem} (the value is not repeated here: it may hold a password)`, hint: read.hint });
        return s.INVALID;
      }
      return v;
    },
  };
}

export const configSchema = s.object({
  server: s.object({
    host: s.withDefault(s.string({ min: 1, description: 'interface to listen on' }), '127.0.0.1'),
    port: s.withDefault(s.number({ integer: true, min: 0, max: 65535 }), 8787),
    public_url: s.withDefault(
      s.string({ url: 'or-empty', description: 'URL integrations and users reach the server at; empty means http://<host>:<port>' }),
      '',
    ),
    console_url: s.withDefault(
      s.string({
        url: 'or-empty',
        description:
          'origin of the web console, apart from the public endpoints; empty means http://localhost:<port> (http://127.0.0.1:<port> when public_url names localhost)',
      }),
      '',
    ),
    processes: s.withDefault(
      s.number({
        integer: true,
        min: 0,
        max: 64,
        description:
          'serving processes under the supervisor; 0 means one per core (the cores this process may run on); 1 means a single process with no supervisor (debugging)',
      }),
      0,
    ),
    shutdown_timeout: s.withDefault(s.duration({ max: 300_000 }), 10_000),
    /** A serving process that answers no ping (one a second) this long is presumed wedged, killed and replaced. */
    heartbeat_timeout: s.withDefault(s.duration({ min: 2_000, max: 300_000 }), 5_000),
    body_limit: s.withDefault(s.bytes({ min: 1024, max: GIB }), 1024 * 1024),
    /** A JSON array of events on POST /api/v1/events (up to 1,000 of them; each still at most body_limit). */
    batch_body_limit: s.withDefault(
      s.bytes({ min: 1024, max: GIB, description: 'largest body of a batch of events (a JSON array on POST /api/v1/events)' }),
      16 * 1024 * 1024,
    ),
    trust_proxy: s.withDefault(proxyHops(), 0),
    /**
     * HTTPS on the server's own port: PEM files, relative to the config file's folder. Both or
     * neither; read at start (a pair that cannot serve stops it) and again whenever they change.
     */
    tls: s.object(
      {
        cert: s.withDefault(s.string({ description: 'PEM certificate (its chain after it) for HTTPS on server.port; empty means plain HTTP' }), ''),
        key: s.withDefault(s.string({ description: 'PEM private key of server.tls.cert (not encrypted)' }), ''),
      },
      {
        refine(v, report) {
          if (Boolean(v.cert) !== Boolean(v.key))
            report(
              [v.cert ? 'key' : 'cert'],
              `is empty while server.tls.${v.cert ? 'cert' : 'key'} is set`,
              'HTTPS needs both PEM files (certificate and private key); leave both empty for plain HTTP',
            );
        },
      },
    ),
  }),
  store: s.withDefault(storeUrl(), ''),
  data_dir: s.withDefault(s.string({ min: 1 }), './data'),
  integrations_dir: s.withDefault(s.string({ min: 1 }), './integrations'),
  /**
   * The organization this server installs for (spec 2.5): a `private` integration installs here
   * without the admin token only when its manifest's `organization` is one of these (its id and its
   * subdomain, say). Unset: no private integration installs without the admin token.
   */
  organization: s.optional(
    s.union([s.string({ min: 1 }), s.array(s.string({ min: 1 }), { min: 1, unique: true })], {
      description: "the organization's id or subdomain, or a list of both, as manifests name it in `organization`",
    }),
  ),
  admin_token: s.withDefault(
    s.string({
      pattern: /^(|\S{16,})$/,
      patternHint: 'empty (a token is generated into <data_dir>/admin-token), or at least 16 characters without spaces',
      description: 'bearer token of the management API; empty means generated into <data_dir>/admin-token',
    }),
    '',
  ),
  log: s.object({
    format: s.withDefault(s.oneOf(['auto', 'pretty', 'json'] as const), 'auto'),
    level: s.withDefault(s.oneOf(['debug', 'info', 'warn', 'error'] as const), 'info'),
  }),
  webhooks: s.object({
    max_retries: s.withDefault(s.number({ integer: true, min: 0, max: 20 }), 3),
    base_delay: s.withDefault(s.duration({ min: 1 }), 1000),
    jitter: s.withDefault(s.number({ min: 0, max: 1, description: 'extra delay, as a fraction of the base delay' }), 0.1),
    timeout: s.withDefault(s.duration({ min: 100, max: 300_000 }), 10_000),
    concurrency: s.withDefault(s.number({ integer: true, min: 1, max: 1024 }), 32),
    per_endpoint_concurrency: s.withDefault(s.number({ integer: true, min: 1, max: 256 }), 4),
    retry_after_max: s.withDefault(s.duration(), 60_000),
    /** Off: the spec fixes the retry delays (section 8), whatever the receiver's Retry-After says. */
    honor_retry_after: s.withDefault(s.boolean(), false),
    allow_private_networks: s.withDefault(s.boolean(), false),
    response_excerpt: s.withDefault(s.bytes({ max: 1024 * 1024 }), 20 * 1024),
    signature_tolerance: s.withDefault(s.duration({ min: 1000 }), 300_000),
    secret_rotation_overlap: s.withDefault(s.duration(), 24 * 3_600_000),
    lease: s.withDefault(s.duration({ min: 1000 }), 30_000),
  }),
  sandbox: s.object({
    memory_mb: s.withDefault(s.number({ integer: true, min: 8, max: 4096 }), 128),
    cpu_time: s.withDefault(s.duration({ min: 1 }), 50),
    wall_time: s.withDefault(s.duration({ min: 10 }), 30_000),
    subrequests: s.withDefault(s.number({ integer: true, min: 0, max: 10_000 }), 50),
    subrequest_timeout: s.withDefault(s.duration({ min: 10 }), 10_000),
    request_body: s.withDefault(s.bytes({ max: GIB }), 1024 * 1024),
    response_body: s.withDefault(s.bytes({ max: GIB }), 10 * 1024 * 1024),
    subrequest_body: s.withDefault(s.bytes({ max: GIB }), 10 * 1024 * 1024),
    script_size: s.withDefault(s.bytes({ max: GIB }), 5 * 1024 * 1024),
    startup_time: s.withDefault(s.duration({ min: 10 }), 1000),
    wait_until: s.withDefault(s.duration(), 30_000),
    log_lines: s.withDefault(s.number({ integer: true, min: 0 }), 256),
    log_bytes: s.withDefault(s.bytes({ description: 'message bytes of console output stored per invocation' }), 64 * 1024),
    log_bytes_per_minute: s.withDefault(s.bytes({ description: 'message bytes of console output stored per integration per minute' }), 1024 * 1024),
    log_disk_reserve: s.withDefault(
      s.bytes({ description: "no console output is stored while the data directory's disk has less free space" }),
      256 * 1024 * 1024,
    ),
  }),
  metrics: s.object({
    token: s.withDefault(
      s.string({
        pattern: /^(|\S{16,})$/,
        patternHint: 'empty (GET /metrics takes the admin token only), or at least 16 characters without spaces',
        description: 'a token that reads GET /metrics and nothing else (Prometheus bearer credentials)',
      }),
      '',
    ),
  }),
  retention: s.object(
    {
      schedule: s.withDefault(s.string({ min: 1, description: 'cron expression (croner)' }), '17 3 * * *'),
      keep: s.withDefault(s.duration({ min: 60_000 }), 30 * 86_400_000),
      keep_failed: s.withDefault(s.duration({ min: 60_000 }), 90 * 86_400_000),
      batch_size: s.withDefault(s.number({ integer: true, min: 1, max: 100_000 }), 500),
    },
    {
      // Checked with the rest of the file (with its line), not when a serving process starts the job.
      refine(v, report) {
        try {
          new Cron(v.schedule, { paused: true }).stop();
        } catch (e) {
          report(['schedule'], `"${v.schedule}" is not a cron expression: ${(e as Error).message}`, CRON_HINT);
        }
      },
    },
  ),
  gitbook: s.object({
    /** GitBook's API (https://api.gitbook.com): content calls of GitBook integrations go there; unset, they answer 501. */
    api_url: s.optional(s.string({ min: 1, url: true, description: 'upstream platform API for content endpoints, like https://api.gitbook.com' })),
    /** Token sent upstream with those calls (a GitBook API token); keep it in .env: ${{ env.GITBOOK_API_TOKEN }}. */
    api_token: s.optional(s.string({ min: 1 })),
    /**
     * The GitBook organization this server stands for: GitBook integrations see it as their
     * installations' `target.organization` (and pass it to api.orgs.* calls, forwarded to api_url).
     */
    organization: s.withDefault(s.string({ min: 1, description: 'GitBook organization id of the installations here' }), 'local'),
  }),
});

export type Config = s.Infer<typeof configSchema>;
