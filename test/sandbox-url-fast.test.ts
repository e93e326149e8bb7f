/**
 * The guest URL parser's fast path (src/sandbox/guest/web/url-fast.ts) against the full WHATWG
 * state machine it stands in front of: whenever the fast path answers, its record is the one the
 * full parser gives; the URLs integrations parse most do take the fast path. (The Web Platform
 * Tests' URL suites also run through it inside the isolate, in sandbox-wpt.test.ts.)
 */
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { fastParse } from '../src/sandbox/guest/web/url-fast.ts';

const usm = createRequire(import.meta.url)('whatwg-url/lib/url-state-machine.js') as { basicURLParse(input: string): unknown };
const full = (input: string) => usm.basicURLParse(input);

describe('the guest URL fast path', () => {
  it("takes the plain http(s) URLs of public endpoints and API calls, with the full parser's records", () => {
    for (const input of [
      'http://127.0.0.1:4000/v1/integrations/hello/installations/inst_0123/world',
      'https://api.example.com/v2/items?limit=10&cursor=a%20b#top',
      'http://localhost:8080',
      'https://example.com?q',
      'https://example.com/a//b/',
      'http://10.0.0.255/x:y@z',
      'https://sub-domain.example.org/path/with~tilde/(parens)*,;=',
    ]) {
      const record = fastParse(input);
      assert.ok(record, `fast path refused ${input}`);
      assert.deepEqual(record, full(input), input);
    }
  });

  it('leaves to the full parser what it would change or refuse', () => {
    for (const input of [
      'HTTP://example.com/', // upper-case scheme
      'http://Example.com/', // upper-case host
      'http://example.com:80/', // default port
      'https://example.com:443/',
      'http://example.com:0/',
      'http://example.com:65536/',
      'http://example.com/a/../b', // dot segments
      'http://example.com/a/%2e%2E/b',
      'http://example.com/./b',
      'http://user:pass@example.com/', // credentials
      'http://xn--nxasmq6b.com/', // punycode
      'http://example.123/', // numeric last label: IPv4 parser
      'http://0x7f.0.0.1/',
      'http://127.0.0.01/',
      'http://256.0.0.1/',
      'http://example.com/a b', // to be percent-encoded
      'http://example.com/a"b',
      "http://example.com/?a'b",
      'http://example.com/a\\b',
      'http://example.com/a^b',
      'http://example.com/é',
      ' http://example.com/', // trimmed
      'http://example.com/\t',
      'ws://example.com/', // other schemes
      'file:///etc/passwd',
      'http://-a.com/',
      'http://a..com/',
      'http://example.com./',
    ]) {
      assert.equal(fastParse(input), null, input);
    }
  });

  it('agrees with the full parser on generated URL-like strings', () => {
    const piece = fc.constantFrom(
      'http',
      'https',
      'HTTP',
      'ws',
      ':',
      '//',
      '/',
      '\\',
      '.',
      '..',
      '%2e',
      '%2E',
      '%',
      '%41',
      '?',
      '#',
      '@',
      "'",
      '"',
      ' ',
      '\t',
      'a',
      'Z',
      '0',
      '1',
      '9',
      '-',
      '_',
      '~',
      'xn--',
      'example',
      'com',
      '127',
      '255',
      '256',
      '0x',
      ':80',
      ':443',
      ':8080',
      ':0',
      '^',
      '|',
      '[',
      ']',
      '{',
      '}',
      '`',
      'é',
      '!',
      '$',
      '&',
      '(',
      ')',
      '*',
      '+',
      ',',
      ';',
      '=',
    );
    // Mostly characters the fast path takes, some that it must refuse.
    const part = fc.oneof(
      {
        weight: 6,
        arbitrary: fc.constantFrom(
          'a',
          'Z',
          '0',
          '9',
          '-',
          '_',
          '~',
          '.',
          '!',
          '$',
          '&',
          '(',
          ')',
          '*',
          '+',
          ',',
          ';',
          '=',
          ':',
          '@',
          '%41',
          '%',
          "'",
          '?',
          '/',
        ),
      },
      { weight: 1, arbitrary: piece },
    );
    const label = fc.constantFrom('a', 'example', 'com', 'xn--a', 'a-b', '-a', 'a-', '0', '1', '127', '255', '256', '0x1', 'A', '', 'localhost');
    const structured = fc
      .tuple(
        fc.constantFrom('http://', 'https://'),
        fc.array(label, { minLength: 1, maxLength: 4 }).map((ls) => ls.join('.')),
        fc.constantFrom('', ':80', ':443', ':8080', ':0', ':65535', ':65536', ':08'),
        fc
          .array(
            fc.array(part, { maxLength: 3 }).map((ps) => `/${ps.join('')}`),
            { maxLength: 4 },
          )
          .map((ss) => ss.join('')),
        fc.option(
          fc.array(part, { maxLength: 4 }).map((ps) => `?${ps.join('')}`),
          { nil: '' },
        ),
        fc.option(
          fc.array(part, { maxLength: 4 }).map((ps) => `#${ps.join('')}`),
          { nil: '' },
        ),
      )
      .map((parts) => parts.join(''));
    const generated = fc.oneof(
      fc.array(piece, { maxLength: 24 }).map((ps) => ps.join('')),
      fc.tuple(fc.constantFrom('http://', 'https://'), fc.array(piece, { maxLength: 16 })).map(([s, ps]) => s + ps.join('')),
      { weight: 3, arbitrary: structured },
    );
    let taken = 0;
    fc.assert(
      fc.property(generated, (input) => {
        const record = fastParse(input);
        if (record === null) return;
        taken++;
        assert.deepEqual(record, full(input), input);
      }),
      { numRuns: 30_000 },
    );
    assert.ok(taken > 500, `only ${taken} generated strings took the fast path: the comparison says little`);
  });
});
