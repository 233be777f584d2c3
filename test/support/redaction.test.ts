import { expect } from 'chai';
import { MASK, Redactor, type RedactionCounts } from '../../runtime/sessions/redact.ts';
import { BundleArchive } from '../../runtime/support/bundle-builder.ts';
import { BUNDLE_CAPS, TRUNCATION_MARKER } from '../../runtime/support/types.ts';
import { sha256Hex } from '../../store/artifact-store.ts';

interface TextCase { reason: string; given: string; want: string; counts: RedactionCounts }

/** check runs a table of free-text cases through one redactor: the text it leaves and what it counted. */
function check(redactor: Redactor, table: TextCase[]) {
  for (const t of table) {
    const counts: RedactionCounts = {};
    expect(redactor.text(t.given, counts), t.reason).to.equal(t.want);
    expect(counts, t.reason).to.deep.equal(t.counts);
  }
}

describe('Redactor: each rule masks what it names, counts it, and leaves the rest', () => {
  it('key names: secret-named fields are masked, token counters are not', () => {
    const table: { reason: string; given: Record<string, unknown>; want: Record<string, unknown>; masked: number }[] = [
      { reason: 'api_key is a secret name', given: { api_key: 'abc12345' }, want: { api_key: MASK }, masked: 1 },
      { reason: 'token is a secret name', given: { token: 'abc12345' }, want: { token: MASK }, masked: 1 },
      { reason: 'secret is a secret name', given: { client_secret: 'abc12345' }, want: { client_secret: MASK }, masked: 1 },
      { reason: 'password is a secret name', given: { password: 'hunter22' }, want: { password: MASK }, masked: 1 },
      { reason: 'authorization is a secret name', given: { Authorization: 'Basic dXNlcjpwYXNz' }, want: { Authorization: MASK }, masked: 1 },
      { reason: 'cookie is a secret name', given: { cookie: 'sid=abc123' }, want: { cookie: MASK }, masked: 1 },
      { reason: 'private_key is a secret name', given: { private_key: '-----BEGIN KEY-----' }, want: { private_key: MASK }, masked: 1 },
      { reason: 'a structure under a secret name is masked whole', given: { secrets: { a: 'x' } }, want: { secrets: MASK }, masked: 1 },
      { reason: 'token counts are not secrets', given: { usage: { input_tokens: 10, output_tokens: 20, total_tokens: 30, max_tokens: 4096 } }, want: { usage: { input_tokens: 10, output_tokens: 20, total_tokens: 30, max_tokens: 4096 } }, masked: 0 },
      { reason: 'a number under a secret name is not a credential', given: { token: 7 }, want: { token: 7 }, masked: 0 },
      { reason: 'ordinary names stay', given: { name: 'reviewer', model: 'm1' }, want: { name: 'reviewer', model: 'm1' }, masked: 0 },
    ];
    for (const t of table) {
      const counts: RedactionCounts = {};
      expect(new Redactor().value(t.given, counts), t.reason).to.deep.equal(t.want);
      expect(counts['key-name'] ?? 0, t.reason).to.equal(t.masked);
    }
  });

  it('Bearer tokens', () => {
    check(new Redactor(), [
      { reason: 'a bearer token in a header line', given: 'sent Authorization: Bearer eyJhbGciOi.abc.def', want: `sent Authorization: Bearer ${MASK}`, counts: { bearer: 1 } },
      { reason: 'any case', given: 'bearer abcdefgh12345678', want: `Bearer ${MASK}`, counts: { bearer: 1 } },
      { reason: 'the word alone is not a token', given: 'the Bearer scheme', want: 'the Bearer scheme', counts: {} },
    ]);
  });

  it('credentials in URLs', () => {
    check(new Redactor(), [
      { reason: 'user and password in a redis URL', given: 'REDIS_URL=redis://admin:s3cret@db:6379/0', want: `REDIS_URL=redis://${MASK}@db:6379/0`, counts: { 'url-credentials': 1 } },
      { reason: 'an https URL with credentials', given: 'clone https://bot:ghx123@git.example.com/x.git', want: `clone https://${MASK}@git.example.com/x.git`, counts: { 'url-credentials': 1 } },
      { reason: 'a URL without credentials stays', given: 'see https://example.com:8443/a?b=c', want: 'see https://example.com:8443/a?b=c', counts: {} },
    ]);
  });

  it('JSON fields in text, plain and escaped inside a string', () => {
    check(new Redactor(), [
      { reason: 'a plain JSON field', given: 'body {"apiKey":"abc123","model":"m1"}', want: `body {"apiKey":"${MASK}","model":"m1"}`, counts: { 'json-field': 1 } },
      { reason: 'spaces around the colon', given: '{"client_secret" : "abc123"}', want: `{"client_secret" : "${MASK}"}`, counts: { 'json-field': 1 } },
      { reason: 'an escaped JSON field (JSON text inside a JSON string)', given: 'body "{\\"apiKey\\":\\"abc123\\",\\"model\\":\\"m1\\"}"', want: `body "{\\"apiKey\\":\\"${MASK}\\",\\"model\\":\\"m1\\"}"`, counts: { 'json-field': 1 } },
      { reason: 'token counts in JSON text stay', given: '{"input_tokens":"12","output_tokens":"30"}', want: '{"input_tokens":"12","output_tokens":"30"}', counts: {} },
    ]);
    // Through a structure: a log line whose message carries JSON text, and double-encoded JSON.
    const counts: RedactionCounts = {};
    const out = new Redactor().value({ msg: `upstream answered ${JSON.stringify(JSON.stringify({ apiKey: 'abc123' }))}` }, counts);
    expect(JSON.stringify(out)).to.not.include('abc123');
    expect(counts['json-field']).to.equal(1);
  });

  it('secret-named values in free text', () => {
    check(new Redactor(), [
      { reason: 'name=value', given: 'connect password=hunter22 user=bob', want: `connect password=${MASK} user=bob`, counts: { 'key-value': 1 } },
      { reason: 'a query parameter', given: 'GET /cb?code=1&access_token=abc123&x=1', want: `GET /cb?code=1&access_token=${MASK}&x=1`, counts: { 'key-value': 1 } },
      { reason: 'a Basic authorization header', given: 'Authorization: Basic dXNlcjpwYXNz', want: `Authorization: ${MASK}`, counts: { 'key-value': 1 } },
      { reason: 'a counter name stays', given: 'input_tokens: 12 output_tokens=30', want: 'input_tokens: 12 output_tokens=30', counts: {} },
    ]);
  });

  it('the literal values passed in (resolved env: secrets; vault values later), longest first', () => {
    check(new Redactor(['canary-0123456789', 'canary-0123456789-longer', '']), [
      { reason: 'every occurrence is masked and counted', given: 'a canary-0123456789 b canary-0123456789', want: `a ${MASK} b ${MASK}`, counts: { literal: 2 } },
      { reason: 'a value containing another is masked whole', given: 'x canary-0123456789-longer', want: `x ${MASK}`, counts: { literal: 1 } },
      { reason: 'a literal inside a URL is counted once', given: 'redis://u:canary-0123456789@h', want: `redis://u:${MASK}@h`, counts: { literal: 1 } },
    ]);
  });

  it('API key shapes', () => {
    check(new Redactor(), [
      { reason: 'an OpenAI-style key', given: 'key sk-abcdefghijklmnop1234', want: `key ${MASK}`, counts: { 'token-shape': 1 } },
      { reason: 'an AWS access key id', given: 'AKIAABCDEFGHIJKLMNOP', want: MASK, counts: { 'token-shape': 1 } },
    ]);
  });
});

describe('BundleArchive: the byte caps', () => {
  it('replaces an artifact over its cap by the truncation marker and lists it truncated', () => {
    const a = new BundleArchive();
    a.add('big.json', 'x'.repeat(BUNDLE_CAPS.artifact + 1), BUNDLE_CAPS.artifact);
    a.add('small.json', '{}', BUNDLE_CAPS.artifact);
    expect(a.files.map((f) => [f.path, f.content.toString()])).to.deep.equal([['big.json', TRUNCATION_MARKER], ['small.json', '{}']]);
    expect(a.artifacts[0]).to.deep.include({ path: 'big.json', included: true, truncated: true, bytes: TRUNCATION_MARKER.length, sha256: sha256Hex(TRUNCATION_MARKER) });
    expect(a.artifacts[1]).to.deep.include({ included: true, truncated: false, bytes: 2 });
  });

  it('omits an artifact that would take the bundle over its cap, saying why', () => {
    const a = new BundleArchive();
    for (let i = 0; i < 6; i++) a.add(`events-${i}.json`, 'e'.repeat(BUNDLE_CAPS.eventSummary - 10), BUNDLE_CAPS.eventSummary);
    const omitted = a.artifacts.filter((x) => !x.included);
    expect(omitted.length).to.be.greaterThan(0);
    expect(omitted[0]).to.deep.include({ omitted_reason: 'bundle exceeded byte cap', bytes: 0, sha256: '' });
    expect(a.files.reduce((n, f) => n + f.content.length, 0)).to.be.at.most(BUNDLE_CAPS.bundle);
  });
});
