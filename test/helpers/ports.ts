/**
 * A free TCP port on 127.0.0.1 for a program a test starts on a port it must be told in advance
 * (PostgreSQL, `switchyard receive --port`). Not one the kernel picks for `listen(0)`: those come
 * from the ephemeral range, which every outgoing connection on the machine also draws its own port
 * from, so between the pick and the program's listen one of the suite's thousands of connections
 * may take it ("address already in use", seen in CI). A port below that range is taken only by a
 * program that asks for it by number.
 */
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';

const LOWEST = 10_000;

function ephemeralLow(): number {
  try {
    const [low] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);
    return Number.isInteger(low) && low > LOWEST + 1000 ? low : 32_768;
  } catch {
    return 32_768;
  }
}

const bindable = (port: number) =>
  new Promise<boolean>((resolve) => {
    const s = createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });

export async function freePortOutsideEphemeral(): Promise<number> {
  const high = ephemeralLow() - 1;
  for (let tries = 0; tries < 200; tries++) {
    const port = LOWEST + Math.floor(Math.random() * (high - LOWEST + 1));
    if (await bindable(port)) return port;
  }
  throw new Error(`no free port between ${LOWEST} and ${high} after 200 tries`);
}
