/**
 * Writes test/wpt/url/*.json from the inputs in url-cases.ts, in the formats of WPT's
 * url/resources (urltestdata.json, setters_tests.json, urlencoded-parser data). Expected values
 * come from Node's WHATWG URL implementation (Ada), which passes the Web Platform Tests; the files
 * are committed, so a later Node cannot silently change them. Re-run after editing the inputs:
 *   PATH=node_modules/.bin:$PATH node test/wpt/tools/generate-url-data.ts
 */
import { writeFileSync } from 'node:fs';
import { parseCases, setterCases, urlencodedCases } from './url-cases.ts';

const dir = new URL('../url/', import.meta.url).pathname;
const attrs = ['href', 'origin', 'protocol', 'username', 'password', 'host', 'hostname', 'port', 'pathname', 'search', 'hash'] as const;

function snapshot(u: URL): Record<string, string> {
  const out: Record<string, string> = {};
  for (const a of attrs) out[a] = u[a];
  return out;
}

const parse = parseCases.map(([input, base]) => {
  const u = base === null ? URL.parse(input) : URL.parse(input, base);
  return u ? { input, base, ...snapshot(u) } : { input, base, failure: true };
});
writeFileSync(`${dir}urltestdata.json`, `${JSON.stringify(parse, null, 1)}\n`);

const setters = setterCases.map(([href, setter, value]) => {
  const u = new URL(href);
  (u as any)[setter] = value;
  return { href, setter, new_value: value, expected: snapshot(u) };
});
writeFileSync(`${dir}setters_tests.json`, `${JSON.stringify(setters, null, 1)}\n`);

const urlencoded = urlencodedCases.map((input) => ({ input, output: [...new URLSearchParams(input)] }));
writeFileSync(`${dir}urlencoded-parser.json`, `${JSON.stringify(urlencoded, null, 1)}\n`);
console.log(`wrote ${parse.length} parse cases, ${setters.length} setter cases, ${urlencoded.length} urlencoded cases to ${dir}`);
