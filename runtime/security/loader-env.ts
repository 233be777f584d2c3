import { minimatch } from 'minimatch';
import { fieldsNamed } from './spec-fields.ts';

/**
 * LOADER_NAMES are the shapes of variable names that change how a process finds or loads code: the dynamic
 * loader's (`LD_*`, `DYLD_*`, glibc's), each language runtime's and package manager's (Node, npm, tsx and
 * esbuild, Python, Ruby, Perl, Java, Go, Rust, PHP, .NET, Lua, R, Erlang), OpenSSL's, git's and the shells'; and
 * every generic shape that points a runtime at code or options: search paths (`*PATH`), homes and roots, library
 * and module lists, option strings (`*OPTIONS`, `*OPTS`, `*FLAGS`), config and rc files, and names of programs a
 * process may start (`*_COMMAND`, `*EDITOR`, `*SHELL`, …). NOTE: the generic shapes are what make the rule fail
 * closed: a loader variable nobody listed (`ESBUILD_BINARY_PATH`, `GCONV_PATH`) is caught by its shape.
 */
export const LOADER_NAMES: readonly string[] = [
  'LD_*', 'DYLD_*', 'GLIBC_*', 'MALLOC_*', 'GCONV_*', 'HOSTALIASES', 'LOCALDOMAIN', 'RES_OPTIONS', 'NLSPATH', 'LOCPATH',
  'NODE_*', 'NPM_*', 'NPX_*', 'YARN_*', 'PNPM_*', 'COREPACK_*', 'TSX_*', 'ESBUILD_*', 'TS_NODE_*', 'SWC_*', 'BUN_*', 'DENO_*',
  'PYTHON*', 'PIP_*', 'UV_*', 'VIRTUAL_ENV*', 'CONDA*', 'PYENV*', 'RUBY*', 'GEM_*', 'BUNDLE_*', 'PERL*', 'JAVA*', '_JAVA_*',
  'JDK_*', 'CLASSPATH', 'MAVEN_*', 'GRADLE_*', 'GO{BIN,DEBUG,ENV,EXPERIMENT,FLAGS,PROXY,TOOLCHAIN,WORK}', 'CARGO_*', 'RUSTUP_*', 'RUSTC*', 'PHP*', 'DOTNET_*', 'CORECLR_*',
  'COMPLUS_*', 'MONO_*', 'LUA_*', 'R_*', 'ERL_*', 'ELIXIR_*', 'OPENSSL_*', 'SSL_*', 'GIT_*', 'SSH_*', 'XDG_*', 'BASH*', 'ENV',
  'IFS', 'PS4', 'PROMPT_COMMAND', 'SHELLOPTS',
  '*PATH', '*PATHS', '*HOME', '*_ROOT', '*DIR', '*DIRS', '*LIB', '*LIBS', '*LIBRARY*', '*MODULE*', '*PLUGIN*', '*LOADER*',
  '*PRELOAD*', '*AUDIT*', '*STARTUP*', '*OPT', '*OPTS', '*OPTION', '*OPTIONS', '*FLAGS', '*ARGS', '*CONF', '*CONFIG*',
  '*RC', '*RCFILE', '*_INIT', '*HOOK*', '*ENGINE*', '*COMMAND', '*_CMD', '*EXEC*', '*_EXE', '*BIN', '*BINARY*',
  '*PROGRAM', '*SHELL', '*EDITOR', 'VISUAL', '*PAGER', 'BROWSER', '*ASKPASS', '*INTERPRETER*', '*EVAL*',
];

/** HARMLESS are names of those runtimes' families that only select a mode, common enough in agent definitions to name. */
const HARMLESS = new Set(['NODE_ENV', 'NODE_NO_WARNINGS', 'PYTHONUNBUFFERED', 'PYTHONIOENCODING', 'PYTHONDONTWRITEBYTECODE', 'PYTHONUTF8']);

/** URL matches a value with a scheme and authority (`https://…`), whose `:` does not separate a list. */
const URL_VALUE = /^[a-z][a-z0-9+.-]*:\/\//i;

/** FILE_VALUE matches a value that names a file: an absolute, home- or dot-relative path, or a file: or data: URL. */
const FILE_VALUE = /^(?:\/|~|\.{1,2}(?:\/|$)|file:|data:)/i;

/**
 * loaderRefusal says why setting `name` (to `value`, when known) in a child's environment can make it load code
 * of the writer's choosing, or undefined when it cannot: the name has a loader shape (LOADER_NAMES, matched
 * ignoring case), or the value names a file, in whole or as an entry of a `:`-separated list. NOTE: the value
 * rule catches the loader variables whose names no shape anticipates; a plain setting (`MODE=audit`,
 * `LOG_LEVEL=debug`, `ANTHROPIC_BASE_URL=https://…`) passes both.
 */
export function loaderRefusal(name: string, value?: string): string | undefined {
  const upper = name.toUpperCase();
  const shape = HARMLESS.has(upper) ? undefined : LOADER_NAMES.find((p) => minimatch(upper, p));
  if (shape) return `can change how a process loads code (a ${shape} variable)`;
  if (value === undefined) return undefined;
  const entries = URL_VALUE.test(value) ? [value] : [value, ...value.split(':')];
  return entries.some((e) => FILE_VALUE.test(e.trim())) ? 'names a file, which a program may load as code' : undefined;
}

/** LoaderVariable is one `env` or `secret_env` entry of a spec that only an admin may write. */
export interface LoaderVariable {
  /** The field path in the spec, e.g. `env.LD_PRELOAD` or `mcp_servers[0].env.NODE_OPTIONS`. */
  path: string;
  reason: string;
}

/**
 * loaderVariablesOf lists every variable a spec sets for a child process (any `env` map at any depth, and the names
 * of any `secret_env` map, whose values the writer does not choose) that loaderRefusal refuses.
 */
export function loaderVariablesOf(spec: unknown): LoaderVariable[] {
  const out: LoaderVariable[] = [];
  for (const key of ['env', 'secret_env'] as const) {
    for (const { path, value } of fieldsNamed(spec, key)) {
      if (!value || typeof value !== 'object' || Array.isArray(value)) continue;
      for (const [name, v] of Object.entries(value)) {
        const reason = loaderRefusal(name, key === 'env' && typeof v === 'string' ? v : undefined);
        if (reason) out.push({ path: `${path}.${name}`, reason });
      }
    }
  }
  return out;
}
