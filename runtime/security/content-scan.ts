/**
 * The one content scanner: memory writes are refused on a hit (the controller's first rule, rule names
 * `memory_scan.<id>`), and installed skills are marked with a warning per hit. Each rule is a named pattern of one
 * category; the names are the original's, so a rule_trace reads the same.
 *
 * The patterns look for an instruction or a command, not for a word: "ignore" or "curl" alone never hits, "ignore all
 * previous instructions" or `curl … $API_KEY` does. Each has a near-miss in test/security/content-scan.test.ts.
 */

/** ScanCategory groups the scanner's rules; `secret` is the masking set's rule (scanSecrets). */
export type ScanCategory = 'invisible_unicode' | 'prompt_injection' | 'exfiltration' | 'persistence' | 'policy' | 'secret';

export interface ScanFinding {
  /** The rule id, e.g. `prompt_injection_ignore_previous` (memory prefixes it with `memory_scan.`). */
  rule: string;
  category: ScanCategory;
  message: string;
  /** Offset of the first match in the scanned text. */
  index: number;
  /** The matched text, bounded and with invisible characters shown as `<U+200B>`, so a report can quote it. */
  excerpt: string;
}

interface Rule { id: string; category: ScanCategory; message: string; pattern: RegExp }

// NOTE: zero-width characters and bidirectional controls hide text from a reader while a model still reads it.
const INVISIBLE = [0x200b, 0x200c, 0x200d, 0x200e, 0x200f, 0x202a, 0x202b, 0x202c, 0x202d, 0x202e];

const SECRETISH = String.raw`(?:\$\{?[A-Z_]*(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?)[A-Z_]*\}?|\.env\b|id_rsa|\.aws/credentials|/etc/shadow|\.netrc)`;
const SENSITIVE_FILE = String.raw`(?:~|\$HOME|/root|/home/[\w.-]+)/\.ssh/(?:id_\w+|authorized_keys|config)|/etc/(?:shadow|passwd|sudoers)|\.aws/credentials|\.netrc|\.git-credentials|(?:^|[\s/])\.env(?:\.\w+)?\b|\.kube/config`;

const RULES: readonly Rule[] = [
  ...INVISIBLE.map((cp): Rule => ({
    id: `invisible_unicode_u_${cp.toString(16).padStart(4, '0')}`, category: 'invisible_unicode',
    message: `invisible character U+${cp.toString(16).toUpperCase().padStart(4, '0')}`, pattern: new RegExp(String.fromCodePoint(cp), 'u'),
  })),
  { id: 'prompt_injection_ignore_previous', category: 'prompt_injection', message: 'tells the reader to ignore earlier instructions',
    pattern: /\b(?:ignore|forget|override)\s+(?:all\s+|any\s+|the\s+|your\s+)*(?:previous|prior|above|earlier|preceding|original)\s+(?:instructions?|prompts?|messages?|rules?|directions?|context)\b/i },
  { id: 'prompt_injection_disregard_policy', category: 'prompt_injection', message: 'tells the reader to disregard its rules or policy',
    pattern: /\bdisregard\s+(?:all\s+|any\s+|the\s+|your\s+|of\s+)*(?:rules?|polic(?:y|ies)|guidelines?|instructions?|safety|guardrails?|system\s+prompt)\b/i },
  { id: 'prompt_injection_role_override', category: 'prompt_injection', message: 'tries to give the reader a new identity or role',
    pattern: /\b(?:you\s+are\s+now\b|from\s+now\s+on\s+you\s+are|pretend\s+(?:that\s+)?you\s+are|act\s+as\s+(?:if\s+you\s+were\s+)?(?:an?\s+)?(?:unrestricted|unfiltered|jailbroken|evil|DAN)\b)/i },
  { id: 'prompt_injection_hidden_instruction', category: 'prompt_injection', message: 'hides an instruction from the user',
    pattern: /<!--[^]*?\b(?:instruction|ignore|assistant|system|you must|do not tell)\b[^]*?-->|\b(?:do\s+not|don't|never)\s+(?:tell|inform|reveal\s+to|mention\s+(?:this\s+)?to)\s+the\s+user\b/i },
  { id: 'prompt_injection_system_override', category: 'prompt_injection', message: 'claims to replace the system prompt',
    pattern: /\bnew\s+system\s+prompt\b|\bsystem\s+prompt\s+(?:override|update|replacement)\b|<\/?\s*system\s*>|\[\s*system\s*\]\s*:|\boverride\s+(?:the\s+)?system\b/i },
  { id: 'prompt_injection_restriction_bypass', category: 'prompt_injection', message: 'asks to bypass restrictions',
    pattern: /\b(?:bypass|circumvent|disable|turn\s+off|evade)\s+(?:all\s+|any\s+|the\s+|your\s+)*(?:content\s+|safety\s+)?(?:restrictions?|safety|filters?|guardrails?|content\s+polic(?:y|ies)|moderation)\b|\bdeveloper\s+mode\s+(?:enabled|on)\b|\bjailbreak(?:ing|en)?\b/i },
  { id: 'exfiltration_curl_wget_secret', category: 'exfiltration', message: 'sends a secret over the network with curl or wget',
    pattern: new RegExp(String.raw`\b(?:curl|wget)\b[^\n]*${SECRETISH}`, 'i') },
  { id: 'exfiltration_cat_sensitive_file', category: 'exfiltration', message: 'reads a credential file',
    pattern: new RegExp(String.raw`\b(?:cat|less|more|head|tail|base64|xxd|cp|scp)\s+[^\n|;]*(?:${SENSITIVE_FILE})`, 'i') },
  { id: 'exfiltration_netcat_exec', category: 'exfiltration', message: 'opens a shell over the network',
    pattern: /\b(?:nc|ncat|netcat)\b[^\n]*\s-[a-z]*[ec]\b|\/dev\/tcp\/[\w.-]+\/\d+|\bbash\s+-i\s*>&/i },
  { id: 'exfiltration_base64_pipe', category: 'exfiltration', message: 'pipes base64 data into a shell or out over the network',
    pattern: /\bbase64\b[^\n|]*\|\s*(?:sudo\s+)?(?:ba|z|k)?sh\b|\bbase64\b[^\n|]*\|\s*(?:curl|wget|nc|ncat)\b|\|\s*base64\b[^\n|]*\|\s*(?:curl|wget|nc|ncat)\b/i },
  { id: 'persistence_authorized_keys', category: 'persistence', message: 'adds an SSH key to authorized_keys',
    pattern: /(?:>>?|\btee\b(?:\s+-a)?|\becho\b[^\n]*>>?)\s*[^\n]*authorized_keys\b|\bssh-copy-id\b/i },
  { id: 'persistence_ssh_directory', category: 'persistence', message: 'writes into an .ssh directory',
    pattern: /(?:>>?|\b(?:cp|mv|tee|install|chmod|mkdir(?:\s+-p)?)\b)\s*[^\n]*(?:~|\$HOME|\/root|\/home\/[\w.-]+)\/\.ssh\b/i },
  { id: 'persistence_launchctl', category: 'persistence', message: 'registers a launchd job',
    pattern: /\blaunchctl\s+(?:load|bootstrap|submit|enable)\b|\/Library\/Launch(?:Agents|Daemons)\//i },
  { id: 'persistence_cron', category: 'persistence', message: 'installs a cron job',
    pattern: /\bcrontab\s+(?:-[a-z]*\s+)*(?:-|[\w./~-]+\s*$|-e\b)|\|\s*crontab\b|>>?\s*\/etc\/cron|\/var\/spool\/cron\//im },
  { id: 'persistence_systemd', category: 'persistence', message: 'installs or enables a systemd unit',
    pattern: /\bsystemctl\s+(?:--user\s+)?(?:enable|daemon-reload|link)\b|(?:>>?|\btee\b|\bcp\b)\s*[^\n]*\/(?:etc\/systemd\/system|\.config\/systemd\/user)\//i },
  // NOTE: the policy rules keep source code and session debris out of long-term memory (the original's hygiene
  // rules); a skill legitimately holds code, so skill installs scan without this category.
  { id: 'policy_code_block', category: 'policy', message: 'holds a fenced code block', pattern: /^\s*(?:```|~~~)/m },
  { id: 'policy_code_declaration', category: 'policy', message: 'holds a source code declaration',
    pattern: /^\s*(?:export\s+)?(?:async\s+)?(?:function\s+\w+\s*\(|class\s+\w+[^\n]*\{\s*$|def\s+\w+\s*\([^\n]*\)\s*(?:->[^\n]*)?:\s*$|func\s+(?:\([^)]*\)\s*)?\w+\s*\(|(?:pub\s+)?fn\s+\w+\s*[(<]|(?:public|private|protected)\s+(?:static\s+)?[\w<>[\]]+\s+\w+\s*\()/m },
  { id: 'policy_repo_path', category: 'policy', message: 'names source files by repository path',
    pattern: /(?:^|[\s`'"(])(?:\.\/)?(?:src|lib|internal|pkg|cmd|app|test|tests)\/[\w./-]+\.(?:ts|tsx|js|mjs|go|py|rs|java|rb|c|cc|cpp|h)\b/ },
  { id: 'policy_debugging_session', category: 'policy', message: 'records a debugging session rather than a lasting fact',
    pattern: /\b(?:stack\s*trace|traceback\s*\(most recent call last\)|debugging\s+session|while\s+debugging|I\s+(?:fixed|debugged)\s+(?:the|a|this)\s+(?:bug|issue|error))\b|^\s+at\s+[\w.<>]+\s+\([^)]*:\d+:\d+\)/im },
];

/** SECRET_RULE is the rule that finds a value of the process's masking set (runtime/security/known-secrets.ts). */
export const SECRET_RULE = { id: 'secret_resolved_value', category: 'secret', message: 'holds a secret value the service knows (the value, or its base64 or URL encoding)' } as const;

/** SCAN_RULES names every pattern rule of scanContent, by category, for documentation and tests (SECRET_RULE is apart). */
export const SCAN_RULES: readonly { id: string; category: ScanCategory }[] = RULES.map(({ id, category }) => ({ id, category }));

/** SecretFinder is what scanSecrets needs of a masking set (runtime/security/secret-mask.ts SecretMask). */
export interface SecretFinder {
  found(v: unknown): boolean;
}

/**
 * scanSecrets returns the SECRET_RULE finding when any string of `value` (a text, or a request body's fields and
 * keys) holds a value of `secrets` in any form the mask knows, or none. NOTE: the excerpt never quotes the value,
 * and `index` is 0: where it sits would tell a reader part of it.
 */
export function scanSecrets(value: unknown, secrets: SecretFinder | undefined): ScanFinding[] {
  if (!secrets?.found(value)) return [];
  return [{ rule: SECRET_RULE.id, category: SECRET_RULE.category, message: SECRET_RULE.message, index: 0, excerpt: '[REDACTED]' }];
}

const EXCERPT = 80;

function excerpt(text: string): string {
  const cut = text.length > EXCERPT ? `${text.slice(0, EXCERPT)}…` : text;
  return cut.replace(/[\u200b-\u200f\u202a-\u202e]/g, (c) => `<U+${c.codePointAt(0)!.toString(16).toUpperCase()}>`);
}

/**
 * scanContent returns one finding per rule that matches `text` (in rule order), or none. `categories` limits the
 * scan (skill installs leave out `policy`).
 */
export function scanContent(text: string, categories?: readonly ScanCategory[]): ScanFinding[] {
  const out: ScanFinding[] = [];
  for (const rule of RULES) {
    if (categories && !categories.includes(rule.category)) continue;
    const m = rule.pattern.exec(text);
    if (m) out.push({ rule: rule.id, category: rule.category, message: rule.message, index: m.index, excerpt: excerpt(m[0]) });
  }
  return out;
}
