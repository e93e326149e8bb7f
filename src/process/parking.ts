/**
 * Blame and parking: the integration to blame for a serving process's death (the suspects its crash
 * record scores, see crash-record.ts) is named in the log, and parked after PARK_AFTER deaths within
 * PARK_WINDOW_MS: its invocations answer 503 in every serving process until a new version of it
 * loads or `switchyard integrations resume <name>`. Kept in the supervisor's memory (a restart of
 * `serve` forgets it).
 */
import type { Logger } from '../log/index.ts';
import { suspects, type CrashRecordContent } from './crash-record.ts';
import type { Parking } from './messages.ts';

export const PARK_AFTER = 3;
export const PARK_WINDOW_MS = 60_000;

/** Who a death's crash record points at. */
export interface Blame {
  /** Every integration running at the death, with its score (suspects()). */
  scores: Map<string, number>;
  /** Those with the top score (none when no one scored). */
  blamed: string[];
}

export function blameFor(record: CrashRecordContent): Blame {
  const scores = suspects(record);
  const top = Math.max(0, ...scores.values());
  const blamed = [...scores].filter(([, v]) => v === top && v > 0).map(([n]) => n);
  return { scores, blamed };
}

export interface ParkingLot {
  /** The integrations parked now (what every serving process is told). */
  parked(): Parking[];
  /** A death these suspects were running at: parks the one to blame once it is due. */
  noteCrash(scores: Map<string, number>, record: CrashRecordContent): void;
  /** `switchyard integrations resume <name>`: false when it was not parked. */
  resume(name: string): boolean;
}

/** `changed` is told the parked list whenever it changes. */
export function createParkingLot(log: Logger, changed: (parked: Parking[]) => void): ParkingLot {
  const crashes = new Map<string, Array<{ at: number; score: number }>>();
  const parked = new Map<string, Parking>();
  const list = () => [...parked.values()];
  return {
    parked: list,
    /**
     * Park the integration to blame once it was a suspect in PARK_AFTER deaths within the window and
     * scored more than any other suspect over them (see suspects() in crash-record.ts).
     */
    noteCrash(scores, record) {
      const now = Date.now();
      for (const [name, score] of scores) {
        const list = (crashes.get(name) ?? []).filter((c) => now - c.at < PARK_WINDOW_MS);
        list.push({ at: now, score });
        crashes.set(name, list);
      }
      const total = (name: string) => (crashes.get(name) ?? []).filter((c) => now - c.at < PARK_WINDOW_MS).reduce((a, c) => a + c.score, 0);
      for (const name of scores.keys()) {
        const times = (crashes.get(name) ?? []).filter((c) => now - c.at < PARK_WINDOW_MS).length;
        if (times < PARK_AFTER || parked.has(name)) continue;
        const mine = total(name);
        if ([...crashes.keys()].some((other) => other !== name && total(other) >= mine)) continue;
        const version = record.running.find((r) => r.name === name)?.version ?? '';
        const reason = `integration ${name} is parked: its code took down a serving process ${times} times within ${PARK_WINDOW_MS / 1000} s; it runs again when a new version loads or after \`switchyard integrations resume ${name}\``;
        parked.set(name, { name, version, reason, at: now });
        log.error('integration parked', { integration: name, version, crashes: times });
        changed(list());
      }
    },
    resume(name) {
      if (!parked.delete(name)) return false;
      crashes.delete(name);
      log.info('integration resumed', { integration: name });
      changed(list());
      return true;
    },
  };
}
