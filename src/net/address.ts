/**
 * Which IP addresses outbound requests (webhook deliveries, guest fetch) must not reach unless
 * private networks are allowed: loopback, private, link-local, unique-local, CGNAT, cloud metadata,
 * unspecified, multicast and reserved ranges, including IPv4 addresses hidden inside IPv6
 * (mapped, compatible, NAT64, 6to4) and the numeric IPv4 spellings the OS resolver accepts
 * (`2130706433`, `0x7f.1`, `0177.0.0.1`).
 *
 * Failure policy: fail closed. A string that looks like a numeric address but does not parse
 * cleanly is treated as private; a string that is not an address at all (a hostname) is not an
 * address, so it is not private: hostnames are checked after DNS resolution (see lookup.ts).
 */
import { isIPv4, isIPv6 } from 'node:net';

/** [network, prefix length] pairs, IPv4 as a 32-bit number. */
const privateV4: Array<[number, number]> = [
  [v4('0.0.0.0'), 8], // "this network", unspecified
  [v4('10.0.0.0'), 8], // private
  [v4('100.64.0.0'), 10], // CGNAT (also Alibaba's metadata 100.100.100.200)
  [v4('127.0.0.0'), 8], // loopback
  [v4('169.254.0.0'), 16], // link-local, incl. the cloud metadata 169.254.169.254
  [v4('172.16.0.0'), 12], // private
  [v4('192.0.0.0'), 24], // IETF protocol assignments (incl. 192.0.0.192 Oracle metadata)
  [v4('192.0.2.0'), 24], // TEST-NET-1
  [v4('192.88.99.0'), 24], // 6to4 relay anycast
  [v4('192.168.0.0'), 16], // private
  [v4('198.18.0.0'), 15], // benchmarking
  [v4('198.51.100.0'), 24], // TEST-NET-2
  [v4('203.0.113.0'), 24], // TEST-NET-3
  [v4('224.0.0.0'), 4], // multicast
  [v4('240.0.0.0'), 4], // reserved, incl. broadcast 255.255.255.255
];

function v4(dotted: string): number {
  return dotted.split('.').reduce((acc, part) => acc * 256 + Number(part), 0);
}

function inV4Ranges(n: number): boolean {
  for (const [net, bits] of privateV4) {
    const size = 2 ** (32 - bits);
    if (n >= net && n < net + size) return true;
  }
  return false;
}

/**
 * Parse IPv4 the way inet_aton (and so getaddrinfo and the WHATWG URL parser) does: 1 to 4 parts,
 * each decimal, octal (leading 0) or hex (0x); the last part fills the remaining bytes.
 * Returns the 32-bit value, `null` when it is not a numeric IPv4 form at all, or NaN when it
 * looks numeric but is out of range (callers fail closed on NaN).
 */
export function parseIPv4(text: string): number | null {
  if (!/^[0-9a-fA-Fx.]+$/.test(text) || !/^[0-9]/.test(text)) return null;
  const parts = text.split('.');
  if (parts.length > 4 || parts.some((p) => p === '')) return null;
  const values: number[] = [];
  for (const p of parts) {
    let v: number;
    if (/^0[xX][0-9a-fA-F]*$/.test(p)) v = p.length === 2 ? 0 : parseInt(p.slice(2), 16);
    else if (/^0[0-7]*$/.test(p)) v = parseInt(p, 8);
    else if (/^[1-9][0-9]*$/.test(p)) v = parseInt(p, 10);
    else return null;
    values.push(v);
  }
  const last = values.pop()!;
  if (values.some((v) => v > 255)) return NaN;
  if (last >= 2 ** (8 * (4 - values.length))) return NaN;
  let n = 0;
  for (const v of values) n = n * 256 + v;
  return n * 2 ** (8 * (4 - values.length)) + last;
}

/** Expand an IPv6 literal into 8 16-bit groups (the input must satisfy net.isIPv6). */
function ipv6Groups(text: string): number[] {
  let s = text;
  const tail: number[] = [];
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(s);
  if (dotted) {
    const n = v4(dotted[1]);
    tail.push(Math.floor(n / 65536), n % 65536);
    s = s.slice(0, -dotted[1].length);
    if (!s.endsWith('::')) s = s.slice(0, -1); // drop the ':' before the dotted quad
  }
  const [head, rest] = s.includes('::') ? s.split('::') : [s, undefined];
  const parse = (part: string | undefined) => (part ? part.split(':').map((h) => parseInt(h, 16)) : []);
  const left = parse(head);
  const right = [...parse(rest), ...tail];
  const fill = rest === undefined ? [] : new Array(8 - left.length - right.length).fill(0);
  return [...left, ...fill, ...right];
}

function isPrivateV6(groups: number[]): boolean {
  const [g0, g1, g2, g3, g4, g5, g6, g7] = groups;
  const embedded = g6 * 65536 + g7;
  const zeroTo = (n: number) => groups.slice(0, n).every((g) => g === 0);
  if (zeroTo(8)) return true; // ::
  if (zeroTo(7) && g7 === 1) return true; // ::1
  if (zeroTo(5) && g5 === 0xffff) return inV4Ranges(embedded); // ::ffff:a.b.c.d (mapped)
  if (zeroTo(4) && g4 === 0xffff && g5 === 0) return inV4Ranges(embedded); // ::ffff:0:a.b.c.d (translated)
  if (zeroTo(6)) return true; // ::a.b.c.d (compatible, deprecated): never a legitimate destination
  if (g0 === 0x64 && g1 === 0xff9b && g2 === 0 && g3 === 0 && g4 === 0 && g5 === 0) return inV4Ranges(embedded); // NAT64
  if (g0 === 0x64 && g1 === 0xff9b && g2 === 1) return true; // local-use NAT64 (64:ff9b:1::/48)
  if (g0 === 0x2002) return inV4Ranges(g1 * 65536 + g2); // 6to4 carries an IPv4 in bits 16-48
  if ((g0 & 0xfe00) === 0xfc00) return true; // fc00::/7 unique-local, incl. AWS metadata fd00:ec2::254
  if ((g0 & 0xffc0) === 0xfe80) return true; // fe80::/10 link-local
  if ((g0 & 0xffc0) === 0xfec0) return true; // fec0::/10 site-local (deprecated)
  if ((g0 & 0xff00) === 0xff00) return true; // multicast
  if (g0 === 0x2001 && g1 === 0x0db8) return true; // documentation
  if (g0 === 0x0100 && g1 === 0 && g2 === 0 && g3 === 0) return true; // discard-only 100::/64
  if (g0 === 0x2001 && g1 === 0) return true; // Teredo: tunnels to an arbitrary IPv4, refuse
  return false;
}

function dotted(n: number): string {
  return [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.');
}

/**
 * One spelling per address, so guards compare like with like: IPv4 in any numeric spelling and IPv4
 * carried in IPv6 (mapped `::ffff:7f00:1`, translated, compatible) become dotted IPv4; other IPv6 the
 * eight groups in lower-case hex without zone or brackets. Undefined for a hostname.
 */
export function canonicalIP(ip: string): string | undefined {
  let s = ip.trim();
  if (s.startsWith('[') && s.endsWith(']')) s = s.slice(1, -1);
  const zone = s.indexOf('%');
  if (zone >= 0) s = s.slice(0, zone);
  if (isIPv6(s)) {
    const g = ipv6Groups(s.toLowerCase());
    const zeroTo = (n: number) => g.slice(0, n).every((x) => x === 0);
    const embeds = (zeroTo(5) && g[5] === 0xffff) || (zeroTo(4) && g[4] === 0xffff && g[5] === 0) || (zeroTo(6) && g[6] !== 0);
    return embeds ? dotted(g[6] * 65536 + g[7]) : g.map((x) => x.toString(16)).join(':');
  }
  const n = isIPv4(s) ? v4(s) : parseIPv4(s);
  return n === null || Number.isNaN(n) ? undefined : dotted(n);
}

/** Loopback or unspecified (this machine), in any spelling canonicalIP knows. */
export function isLoopbackAddress(ip: string): boolean {
  const c = canonicalIP(ip);
  if (c === undefined) return false;
  return c.startsWith('127.') || c === '0.0.0.0' || c === '0:0:0:0:0:0:0:1' || c === '0:0:0:0:0:0:0:0';
}

/**
 * True when `ip` is an address that outbound requests must not reach by default. Accepts IPv4
 * (every numeric spelling the OS resolver accepts), IPv6 with or without brackets and zone id.
 */
export function isPrivateAddress(ip: string): boolean {
  let s = ip.trim();
  if (s.startsWith('[') && s.endsWith(']')) s = s.slice(1, -1);
  const zone = s.indexOf('%');
  if (zone >= 0) s = s.slice(0, zone);
  if (isIPv4(s)) return inV4Ranges(v4(s));
  if (isIPv6(s)) return isPrivateV6(ipv6Groups(s.toLowerCase()));
  const n = parseIPv4(s);
  if (n === null) return false; // a hostname: checked after resolution
  if (Number.isNaN(n)) return true; // numeric but malformed: fail closed
  return inV4Ranges(n);
}
