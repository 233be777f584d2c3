import dns from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import type { Duplex } from 'node:stream';
import { Agent, buildConnector, fetch as undiciFetch, type Dispatcher } from 'undici';
import type { AuthMode } from './types.ts';

/**
 * EgressFailure is the class of an outbound request's failure, as statuses show it: the destination is refused
 * by the egress rule, the connection failed, no answer came in time, or the answer's status was a failure.
 * NOTE: a status names the class (and an HTTP status code), never an errno code or an upstream body: those would
 * make every status a reader can see a port scanner and an echo of what the target said.
 */
export type EgressFailure = 'egress_denied' | 'connect_failed' | 'timeout' | 'http_status';

/** EGRESS_DENIED is the error code of a connection the egress rule refuses. */
export const EGRESS_DENIED = 'EGRESS_DENIED';

/** EgressDeniedError is a connection the egress rule refused; its message names the host, never the address it resolved to. */
export class EgressDeniedError extends Error {
  readonly code = EGRESS_DENIED;
  constructor(readonly host: string) {
    super(`egress_denied: ${host} is a private, loopback or link-local destination that EGRESS_ALLOWLIST does not list`);
    this.name = 'EgressDeniedError';
  }
}

/** INTERNAL_V4 are the IPv4 ranges no request leaves for unless listed (RFC 6890 special-purpose, not globally reachable). */
const INTERNAL_V4: [string, number][] = [
  ['0.0.0.0', 8], ['10.0.0.0', 8], ['100.64.0.0', 10], ['127.0.0.0', 8], ['169.254.0.0', 16], ['172.16.0.0', 12],
  ['192.0.0.0', 24], ['192.168.0.0', 16], ['198.18.0.0', 15], ['224.0.0.0', 4], ['240.0.0.0', 4],
];
/**
 * INTERNAL_V6 are the IPv6 ranges refused likewise. NOTE: IPv4-mapped addresses (::ffff:a.b.c.d) are checked
 * against the IPv4 ranges by net.BlockList itself; ::/96 covers ::, ::1 and the deprecated IPv4-compatible form.
 */
const INTERNAL_V6: [string, number][] = [['::', 96], ['fc00::', 7], ['fe80::', 10], ['fec0::', 10], ['ff00::', 8], ['64:ff9b:1::', 48], ['100::', 64]];
const LOOPBACK: [string, number, 'ipv4' | 'ipv6'][] = [['127.0.0.0', 8, 'ipv4'], ['::1', 128, 'ipv6']];

const HOST_NAME = /^(\*\.)?([a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)(\.[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)*$/;

/** EgressRules are a parsed EGRESS_ALLOWLIST: exact host names, `*.domain` suffixes, and addresses or CIDRs. */
export interface EgressRules {
  names: Set<string>;
  suffixes: string[];
  addresses: net.BlockList;
}

/**
 * parseEgressAllowlist reads EGRESS_ALLOWLIST's entries: a host name (`hooks.example.com`), a wildcard of its
 * subdomains (`*.example.com`, not the name itself), an address (`10.0.0.5`, `::1`) or a CIDR (`10.0.0.0/8`,
 * `fd00::/8`). Every entry that is none of these is a problem, by its text.
 */
export function parseEgressAllowlist(entries: readonly string[]): { rules: EgressRules; problems: string[] } {
  const rules: EgressRules = { names: new Set(), suffixes: [], addresses: new net.BlockList() };
  const problems: string[] = [];
  for (const raw of entries) {
    const e = raw.trim().toLowerCase().replace(/^\[(.*)\]$/, '$1');
    const [addr, bits, extra] = e.split('/');
    const family = net.isIP(addr);
    if (family) {
      const max = family === 4 ? 32 : 128;
      const prefix = bits === undefined ? max : /^\d{1,3}$/.test(bits) ? Number(bits) : NaN;
      if (extra !== undefined || !(prefix >= 0 && prefix <= max)) { problems.push(`EGRESS_ALLOWLIST entry "${raw}" has a bad prefix length (0-${max})`); continue; }
      rules.addresses.addSubnet(addr, prefix, family === 4 ? 'ipv4' : 'ipv6');
    } else if (HOST_NAME.test(e.replace(/\.$/, '')) && e.length <= 253) {
      const name = e.replace(/\.$/, '');
      if (name.startsWith('*.')) rules.suffixes.push(name.slice(1));
      else rules.names.add(name);
    } else {
      problems.push(`EGRESS_ALLOWLIST entry "${raw}" must be a host name, *.domain, an address or a CIDR`);
    }
  }
  return { rules, problems };
}

const familyOf = (address: string): 'ipv4' | 'ipv6' => (net.isIPv4(address) ? 'ipv4' : 'ipv6');
/** bare is a host without IPv6 brackets, a zone index (`fe80::1%eth0`) or a trailing dot, in lower case. */
const bare = (host: string) => host.toLowerCase().replace(/^\[(.*)\]$/, '$1').replace(/%.*$/, '').replace(/\.$/, '');

/**
 * hostMatches says whether a URL's host is one the rules name: by name, by a `*.domain` wildcard, or, for an
 * address literal, by an address or CIDR entry. NOTE: by the host as written, not by what it resolves to: it
 * answers "did the list name this destination", which the egress rule then checks at connect time.
 */
export function hostMatches(rules: EgressRules, host: string): boolean {
  const h = bare(host);
  if (rules.names.has(h) || rules.suffixes.some((s) => h.endsWith(s))) return true;
  return net.isIP(h) !== 0 && rules.addresses.check(h, familyOf(h));
}

/** EgressConfig is the egress rule of one process (runtime/process/config.ts). */
export interface EgressConfig {
  authMode: AuthMode;
  /** EGRESS_ALLOWLIST's entries (parseEgressAllowlist); loadConfig refuses a bad one. None: nothing is listed. */
  egressAllowlist?: string[];
}

/**
 * EgressPolicy is the one rule every outbound client of the service follows (webhook bridges and their probes,
 * remote MCP servers, model providers and models.dev, marketplace sources and downloads): a destination whose
 * address is private, loopback, link-local (the cloud metadata address 169.254.169.254 too), unique-local or
 * otherwise not globally reachable, IPv4-mapped forms included, is refused unless EGRESS_ALLOWLIST lists its host
 * name or its address. With AUTH_MODE=none (a loopback-only, one-user service) loopback destinations are allowed
 * too, so local development reaches local receivers. The check runs on the address a connection is actually made
 * to (a `lookup` hook, and a check of address literals, at connect time), so a name that resolves elsewhere than
 * it did at write time, and every redirect hop (a new connection), are checked again.
 */
export class EgressPolicy {
  private readonly rules: EgressRules;
  private readonly internal = new net.BlockList();
  private readonly loopback = new net.BlockList();
  private undici?: Agent;

  constructor(readonly config: EgressConfig) {
    this.rules = parseEgressAllowlist(config.egressAllowlist ?? []).rules;
    for (const [a, p] of INTERNAL_V4) this.internal.addSubnet(a, p, 'ipv4');
    for (const [a, p] of INTERNAL_V6) this.internal.addSubnet(a, p, 'ipv6');
    for (const [a, p, t] of LOOPBACK) this.loopback.addSubnet(a, p, t);
  }

  /** listed says whether EGRESS_ALLOWLIST names a host (exactly or by a `*.domain` wildcard). */
  listed(host: string): boolean {
    const h = bare(host);
    return this.rules.names.has(h) || this.rules.suffixes.some((s) => h.endsWith(s));
  }

  /** allows says whether a connection to `address`, reached through the name `host`, may be made. */
  allows(host: string, address: string): boolean {
    if (this.listed(host)) return true;
    const a = bare(address);
    if (!net.isIP(a)) return false;
    const family = familyOf(a);
    if (this.rules.addresses.check(a, family)) return true;
    if (!this.internal.check(a, family)) return true;
    return this.config.authMode === 'none' && this.loopback.check(a, family);
  }

  /**
   * lookup is a `dns.lookup` that keeps only the addresses the rule allows, and fails with EGRESS_DENIED when
   * none is left. NOTE: the connection is made to what this returns, so the address checked is the one used.
   */
  readonly lookup = (hostname: string, options: dns.LookupOptions | number | ((...a: any[]) => void), callback?: (...a: any[]) => void): void => {
    const cb = (typeof options === 'function' ? options : callback)!;
    const opts: dns.LookupOptions = typeof options === 'object' ? options : typeof options === 'number' ? { family: options } : {};
    dns.lookup(hostname, { ...opts, all: true }, (err, addresses) => {
      if (err) { cb(err); return; }
      const allowed = addresses.filter((a) => this.allows(hostname, a.address));
      if (!allowed.length) { cb(new EgressDeniedError(hostname)); return; }
      if (opts.all) cb(null, allowed);
      else cb(null, allowed[0].address, allowed[0].family);
    });
  };

  /**
   * literalRefusal checks a host that is an address literal, which net.connect dials without a lookup: the
   * refusal when the rule does not allow it, else undefined (also for a name, which `lookup` checks).
   */
  literalRefusal(host: string): EgressDeniedError | undefined {
    const h = bare(host);
    return net.isIP(h) && !this.allows(h, h) ? new EgressDeniedError(h) : undefined;
  }

  /** httpAgent is a keep-alive node:http(s) agent whose every connection passes the rule. */
  httpAgent(tls: boolean, options: https.AgentOptions = {}): http.Agent {
    const policy = this;
    const base = tls ? https.Agent : http.Agent;
    // NOTE: createConnection is the one place every socket of the agent is made, with the request's host.
    class EgressAgent extends (base as typeof http.Agent) {
      createConnection(opts: net.NetConnectOpts & { host?: string }, cb?: (err: Error | null, socket: Duplex) => void): Duplex {
        const refused = policy.literalRefusal(opts.host ?? '');
        if (refused) {
          const socket = new net.Socket();
          process.nextTick(() => socket.destroy(refused));
          return socket;
        }
        return (base.prototype as any).createConnection.call(this, { ...opts, lookup: policy.lookup }, cb);
      }
    }
    return new EgressAgent({ keepAlive: true, ...options });
  }

  /** dispatcher is the undici Agent of `fetch`: its connector checks every connection (redirect hops included). */
  get dispatcher(): Dispatcher {
    if (this.undici) return this.undici;
    const connect = buildConnector({ lookup: this.lookup } as buildConnector.BuildOptions);
    this.undici = new Agent({
      connect: (opts, cb) => {
        const refused = this.literalRefusal(opts.hostname);
        if (refused) { cb(refused, null); return; }
        connect(opts, cb);
      },
    });
    return this.undici;
  }

  /**
   * fetch is the WHATWG fetch of every outbound HTTP client but the webhook one: undici's, through `dispatcher`.
   * NOTE: undici's own fetch, not the global one, so the Agent and the fetch are of one version.
   */
  readonly fetch = ((input: string | URL, init?: RequestInit) =>
    undiciFetch(input as string, { ...(init as object), dispatcher: this.dispatcher } as Parameters<typeof undiciFetch>[1])) as unknown as typeof globalThis.fetch;

  /** close ends the pooled connections of `fetch`. */
  async close(): Promise<void> {
    await this.undici?.close().catch(() => undefined);
    this.undici = undefined;
  }
}

/**
 * failureOf classifies a failed outbound request (a fetch's rejection or a socket's error): the rule refused it,
 * it timed out, or it could not connect (any other transport error).
 * NOTE: a client that wraps the error in its own text (the MCP SDK's SSE transport keeps only the message of the
 * event stream's error) is recognized by EgressDeniedError's message, which no upstream can put there.
 */
export function failureOf(err: unknown): Exclude<EgressFailure, 'http_status'> {
  for (let e = err as (Error & { code?: string; cause?: unknown }) | undefined, depth = 0; e && depth < 5; e = e.cause as typeof e, depth++) {
    if (e.code === EGRESS_DENIED || e instanceof EgressDeniedError || /\begress_denied: /.test(String(e.message))) return 'egress_denied';
    if (e.name === 'TimeoutError' || e.name === 'AbortError' || e.code === 'UND_ERR_CONNECT_TIMEOUT' || e.code === 'ETIMEDOUT') return 'timeout';
  }
  return 'connect_failed';
}
