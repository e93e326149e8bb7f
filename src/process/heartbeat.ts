/**
 * The supervisor's heartbeat: a ping to each listening serving process every HEARTBEAT_MS; one
 * silent for `server.heartbeat_timeout` is presumed wedged (an isolate call that never returns holds
 * its main thread) and killed, and marked `unresponsive` so its death is told as such and it is
 * replaced like any other. The answer (`pong`) sets the slot's lastPong (supervisor.ts).
 */
import { send, type Slot } from './slots.ts';

/** Pings to each serving process. */
const HEARTBEAT_MS = 1_000;

/** Starts pinging; returns what stops it. */
export function startHeartbeat(slots: readonly Slot[], timeoutMs: number): () => void {
  const heartbeat = setInterval(() => {
    const now = Date.now();
    for (const s of slots) {
      if (!s.serving || !s.ready) continue;
      if (now - s.lastPong > timeoutMs && !s.unresponsive) {
        s.unresponsive = true;
        s.serving.process.kill('SIGKILL');
        continue;
      }
      send(s.serving, { t: 'ping' });
    }
  }, HEARTBEAT_MS);
  return () => clearInterval(heartbeat);
}
