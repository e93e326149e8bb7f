/**
 * Nodes on one PostgreSQL store each load their own integrations folder. Each node writes what it
 * serves (integration → version) to `store_nodes` every few seconds; a node whose versions differ
 * from another live node's says so in /healthz (`nodes.differ`) and in its log, since an event
 * handled by two nodes could otherwise run two versions of the same integration.
 */
import { statement, type Queries } from '../store/contract.ts';
import type { Logger } from '../log/index.ts';
import type { Registry } from './registry-types.ts';

/** How often a node writes its row, and how long a row counts as a live node. */
const BEAT_MS = 5_000;
const LIVE_MS = 30_000;

export interface Difference {
  integration: string;
  here: string | null;
  /** Node id → the version it serves (null: it does not serve this integration). */
  others: Record<string, string | null>;
}

export interface PeersView {
  node: string;
  /** Live nodes, this one included. */
  count: number;
  differ: Difference[];
}

const q = {
  upsert: statement(
    `INSERT INTO store_nodes (node_id, integrations, seen_at) VALUES (?, ?, ?)
     ON CONFLICT (node_id) DO UPDATE SET integrations = excluded.integrations, seen_at = excluded.seen_at`,
  ),
  live: statement<{ node_id: string; integrations: string }>('SELECT node_id, integrations FROM store_nodes WHERE seen_at > ? AND node_id != ?'),
};

export function watchPeers(db: Queries, registry: Registry, node: string, log: Logger): { view(): PeersView; stop(): void } {
  let view: PeersView = { node, count: 1, differ: [] };
  let said = '';

  let beating = false;
  const beat = async () => {
    // A node still loading its folder would look like one missing integrations: it says nothing yet.
    // One beat at a time: a slow store must not pile them up.
    if (!registry.readiness().ready || beating) return;
    beating = true;
    const mine: Record<string, string> = {};
    for (const s of registry.list()) if (s.current) mine[s.name] = s.current.script?.version ?? 'manifest only';
    const now = Date.now();
    try {
      await db.run(q.upsert, [node, JSON.stringify(mine), now]);
      const rows = await db.all(q.live, [now - LIVE_MS, node]);
      view = { node, count: rows.length + 1, differ: differences(mine, rows) };
    } catch {
      return; // the store's health reports a failing store; the view keeps its last answer
    } finally {
      beating = false;
    }
    const text = JSON.stringify(view.differ);
    if (text !== said) {
      if (view.differ.length)
        log.warn('this node serves other integration versions than other nodes on the same store', {
          node,
          differ: view.differ
            .map(
              (d) =>
                `${d.integration}: ${d.here ?? 'absent'} here, ${Object.entries(d.others)
                  .map(([n, v]) => `${v ?? 'absent'} on ${n}`)
                  .join(', ')}`,
            )
            .join('; '),
          hint: 'give every node the same integrations folder (deploy them together)',
        });
      else if (said) log.info('integration versions agree with the other nodes again', { node });
      said = text;
    }
  };
  const timer = setInterval(() => void beat(), BEAT_MS);
  timer.unref();
  const unwatch = registry.onChange(() => setImmediate(() => void beat()));
  void registry.whenReady().then(() => beat());
  return {
    view: () => view,
    stop() {
      clearInterval(timer);
      unwatch();
    },
  };
}

export function differences(mine: Record<string, string>, others: Array<{ node_id: string; integrations: string }>): Difference[] {
  const theirs = others.map((r) => ({ node: r.node_id, v: safeParse(r.integrations) }));
  const names = new Set([...Object.keys(mine), ...theirs.flatMap((t) => Object.keys(t.v))]);
  const out: Difference[] = [];
  for (const name of [...names].sort()) {
    const here = mine[name] ?? null;
    const differing = theirs.filter((t) => (t.v[name] ?? null) !== here);
    if (differing.length) out.push({ integration: name, here, others: Object.fromEntries(differing.map((t) => [t.node, t.v[name] ?? null])) });
  }
  return out;
}

function safeParse(text: string): Record<string, string> {
  try {
    const v = JSON.parse(text) as unknown;
    return v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, string>) : {};
  } catch {
    return {};
  }
}
