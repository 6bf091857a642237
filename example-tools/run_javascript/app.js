// run_javascript: runs JavaScript that a model wrote, inside the sandbox.
//
// The code runs in SpiderMonkey (the componentize-js engine, interpreter
// only) in a fresh instance per call, under the tool's policy like any other
// tool: time, fuel, memory, output limits, files only in granted folders and
// /scratch (`fs`, see fs.js), network only to the hosts granted (fetch over
// wasi:http), no environment. The result is what
// the code logged (console.log, info and debug as stdout; warn and error as
// stderr, each capped and marked when cut) and the completion value of the
// script; an exception or a syntax error fails the call with its message and
// stack. Code that uses top-level `await` runs as the body of an async
// function: its value is what it `return`s.
//
// Built with componentize-js (see README.md).

import {
  defineTool, exportTools, host, Output, ToolCallError, ToolError,
} from '../../guest-sdk/js/wasm-agent-tool.js';
import { scratchListing } from './fs.js';
import { nodeFs, process, require } from './node.js';

/** Characters of stdout and of stderr kept (the rest is counted). */
const STDOUT_KEPT = 32 * 1024;
const STDERR_KEPT = 8 * 1024;
/** Characters of the value's text kept. */
const VALUE_KEPT = 8 * 1024;
/** Files, and bytes in all, returned from the scratch folder. */
const MAX_FILES = 32;
const MAX_FILE_BYTES = 512 * 1024;
/** Media types of the files returned, by extension. */
const MEDIA_TYPES = {
  txt: 'text/plain', md: 'text/markdown', csv: 'text/csv', json: 'application/json',
  html: 'text/html', svg: 'image/svg+xml', xml: 'application/xml', js: 'text/javascript',
  png: 'image/png', jpg: 'image/jpeg', jpeg: 'image/jpeg', gif: 'image/gif',
};
/** The file name stacks show for the code. */
const SOURCE = 'code.js';

/** Keeps the first `limit` characters written and counts the rest. */
class CappedText {
  constructor(limit) {
    this.limit = limit;
    this.parts = [];
    this.kept = 0;
    this.cut = 0;
  }

  write(text) {
    const room = this.limit - this.kept;
    if (room > 0) {
      const piece = text.length > room ? text.slice(0, room) : text;
      this.parts.push(piece);
      this.kept += piece.length;
    }
    this.cut += Math.max(0, text.length - Math.max(room, 0));
  }

  text() {
    const joined = this.parts.join('');
    return this.cut ? `${joined}\n[... ${this.cut.toLocaleString('en-US')} more characters cut]` : joined;
  }

  get empty() {
    return this.kept === 0 && this.cut === 0;
  }
}

/** How a value reads in the result: strings quoted, objects as JSON where they have one. */
function show(value, seen = new Set()) {
  switch (typeof value) {
    case 'string': return JSON.stringify(value);
    case 'undefined': return 'undefined';
    case 'function': return `[Function ${value.name || '(anonymous)'}]`;
    case 'bigint': return `${value}n`;
    case 'symbol': return value.toString();
    case 'object': break;
    default: return String(value);
  }
  if (value === null) return 'null';
  if (value instanceof Error) return `${value.name}: ${value.message}`;
  if (seen.has(value)) return '[Circular]';
  seen.add(value);
  try {
    if (Array.isArray(value)) return `[${value.map((item) => show(item, seen)).join(', ')}]`;
    if (value instanceof Map) {
      return `Map(${value.size}) {${[...value].map(([k, v]) => `${show(k, seen)} => ${show(v, seen)}`).join(', ')}}`;
    }
    if (value instanceof Set) return `Set(${value.size}) {${[...value].map((v) => show(v, seen)).join(', ')}}`;
    if (value instanceof Date) return value.toISOString();
    const entries = Object.entries(value).map(([k, v]) => `${JSON.stringify(k)}: ${show(v, seen)}`);
    return `{${entries.join(', ')}}`;
  } finally {
    seen.delete(value);
  }
}

/** console.log's way of joining its arguments: strings as they are. */
function line(args) {
  return `${args.map((arg) => (typeof arg === 'string' ? arg : show(arg))).join(' ')}\n`;
}

/** Routes `console` into the two capped buffers; returns a function that puts it back. */
function capture(stdout, stderr) {
  const saved = globalThis.console;
  const out = (...args) => stdout.write(line(args));
  const err = (...args) => stderr.write(line(args));
  globalThis.console = {
    ...saved, log: out, info: out, debug: out, trace: out, warn: err, error: err,
  };
  return () => { globalThis.console = saved; };
}

function report(stdout, stderr, value) {
  const parts = [];
  if (!stdout.empty) parts.push(`stdout:\n${stdout.text().replace(/\n$/, '')}`);
  if (!stderr.empty) parts.push(`stderr:\n${stderr.text().replace(/\n$/, '')}`);
  if (value !== undefined) parts.push(`value:\n${value}`);
  return parts.join('\n\n');
}

/** Most stack frames shown of an error. */
const MAX_FRAMES = 16;

/** The error as the model should read it: name, message, and the stack within
 * the code, repeated frames folded, with line numbers `shift` lines up. */
function describe(error, shift) {
  if (!(error instanceof Error)) return `uncaught exception: ${show(error)}`;
  const at = (lineNumber) => Math.max(1, lineNumber - shift);
  const own = error instanceof SyntaxError || String(error.stack ?? '').split('\n')[0].includes(SOURCE);
  const where = own && error.lineNumber ? ` (line ${at(error.lineNumber)}, column ${error.columnNumber})` : '';
  const frames = String(error.stack ?? '')
    .split('\n')
    .filter((frame) => frame.includes(SOURCE))
    .map((frame) => frame.replace(/code\.js:(\d+):/, (_, n) => `code.js:${at(Number(n))}:`));
  const lines = [`${error.name}: ${error.message}${where}`];
  for (let i = 0; i < frames.length && lines.length <= MAX_FRAMES;) {
    let same = 1;
    while (frames[i + same] === frames[i]) same += 1;
    lines.push(`  at ${frames[i]}`);
    if (same > 1) lines.push(`  [the frame above repeated ${same - 1} more times]`);
    i += same;
  }
  return lines.join('\n');
}

/** The first line of the source: names it in stacks. */
const PRAGMA = `//# sourceURL=${SOURCE}\n`;
/** Lines before the code: the pragma, and two more that `new AsyncFunction` adds. */
const ASYNC_SHIFT = 3;

/** An error of the code, with the lines to take off its line numbers. */
class Failure {
  constructor(error, shift) {
    this.error = error;
    this.shift = shift;
  }
}

/** Runs `code` as a script (its completion value is the value) or, when it
 * awaits at the top level, as the body of an async function. Its errors
 * are thrown as Failures. */
async function evaluate(code) {
  try {
    // Indirect eval: global scope, and the script's completion value.
    return (0, eval)(`${PRAGMA}${code}`);
  } catch (error) {
    if (!(error instanceof SyntaxError) || !/\bawait\b/.test(code)) throw new Failure(error, 1);
  }
  const AsyncFunction = (async () => {}).constructor;
  let body;
  try {
    // Its last expression is its value, as for a script, when it is one.
    const returning = returningLast(code);
    body = returning && compiles(AsyncFunction, returning);
    body ??= new AsyncFunction(`${PRAGMA}${code}`);
  } catch (error) {
    throw new Failure(error, ASYNC_SHIFT);
  }
  try {
    return await body();
  } catch (error) {
    throw new Failure(error, ASYNC_SHIFT);
  }
}

/** `code` with its last line returned, when that line looks like an
 * expression (the same lines, so stacks keep their line numbers). */
function returningLast(code) {
  const lines = code.replace(/\s+$/, '').split('\n');
  const last = lines[lines.length - 1].trim();
  if (!last || /^(return|const|let|var|if|else|for|while|do|switch|case|default|try|catch|finally|function|async\s+function|class|throw|break|continue|import|export|[}\])]|\/\/|\/\*)/.test(last)) {
    return null;
  }
  lines[lines.length - 1] = `return (${last.replace(/;$/, '')});`;
  return lines.join('\n');
}

/** The async function of `source`, or null when it does not compile. */
function compiles(AsyncFunction, source) {
  try {
    return new AsyncFunction(`${PRAGMA}${source}`);
  } catch {
    return null;
  }
}

/** Modules cannot be loaded: the engine would abort on `import()`, so it is
 * refused before the code runs (a static `import` is a SyntaxError anyway). */
const DYNAMIC_IMPORT = /\bimport\s*\(/;

// `fetch` is the engine's, over wasi:http: the host lets a request through
// only to hosts the policy grants (`network`), within `max_requests` and
// `max_response`; any other is refused before it leaves.

/** The host's tools this code may call, as functions of one object argument
 * that return the tool's text (`tools.calculate({ expression: '2+2' })`;
 * `await` works too). A failure throws a ToolCallError. `tools.help` lists
 * them with their descriptions and parameters. */
function toolFunctions() {
  // The host is asked for the tools on first use only.
  let tools;
  const load = () => {
    if (tools) return tools;
    const specs = host.callableTools();
    tools = {};
    for (const spec of specs) {
      const call = (args = {}) => host.callTool(spec.name, args).content;
      Object.defineProperty(call, 'name', { value: spec.name });
      call.description = spec.description;
      call.parameters = spec.parameters;
      tools[spec.name] = call;
    }
    Object.defineProperty(tools, 'help', {
      enumerable: false,
      configurable: true,
      value: specs.map((spec) => `${spec.name}(${JSON.stringify(spec.parameters)}): ${spec.description}`).join('\n'),
    });
    return tools;
  };
  // Not a tool: what objects have (toJSON, toString, ...) and `then` (so
  // that `await tools` does not call a tool).
  const notATool = (name) => typeof name !== 'string' || name in Object.prototype
    || name === 'then' || name === 'toJSON';
  return new Proxy({}, {
    get(target, name) {
      if (notATool(name)) return target[name];
      const loaded = load();
      // A tool not granted is still asked for: the host refuses it with
      // capability_denied, naming the grant that would allow it.
      return name in loaded ? loaded[name] : (args = {}) => host.callTool(name, args).content;
    },
    has: (target, name) => typeof name === 'string' && name in load(),
    ownKeys: () => Reflect.ownKeys(load()),
    getOwnPropertyDescriptor: (target, name) => Reflect.getOwnPropertyDescriptor(load(), name),
    set: () => false,
    defineProperty: () => false,
    deleteProperty: () => false,
  });
}

const runJavascript = defineTool({
  name: 'run_javascript',
  description: 'Run JavaScript in a sandbox and return what it logged (console.log) and the value '
    + 'of its last expression (top-level await works). Standard built-ins (JSON, Math, Date, '
    + 'RegExp, Map, Set, typed arrays, BigInt) are available; fetch reaches only the hosts the '
    + 'policy grants; `fs` (also require(\'fs\'), \'fs/promises\', \'path\'), with Node\'s '
    + 'names (readFileSync, writeFileSync, existsSync, readdirSync, statSync, mkdirSync, '
    + 'fs.promises) and ours (readFile, writeFile, ...), sees only granted folders and '
    + '/scratch, the working folder, whose new files come back with the result; no other '
    + 'modules, no Intl, no processes. The host\'s tools '
    + 'granted to it are functions of `tools` (`tools.calculate({expression: "2+2"})` returns the '
    + 'tool\'s text; a failure throws ToolCallError). An exception or a syntax error fails the '
    + 'call with its message and stack.',
  parameters: {
    type: 'object',
    properties: {
      code: { type: 'string', description: 'JavaScript source to run, as a script.' },
      stdin: {
        type: 'string',
        description: 'Text the code can read as the global `stdin`.',
        default: '',
      },
    },
    required: ['code'],
    additionalProperties: false,
  },
  run: async ({ code, stdin = '' }) => {
    if (DYNAMIC_IMPORT.test(code)) {
      throw new ToolError('import() is not available: run_javascript has no modules; '
        + 'use the built-ins (JSON, Math, Date, RegExp, Map, Set, typed arrays, BigInt)');
    }
    const stdout = new CappedText(STDOUT_KEPT);
    const stderr = new CappedText(STDERR_KEPT);
    const restore = capture(stdout, stderr);
    globalThis.stdin = stdin;
    globalThis.tools = toolFunctions();
    globalThis.ToolCallError = ToolCallError;
    globalThis.fs = nodeFs;
    globalThis.require = require;
    globalThis.process = process;
    const before = scratchListing();
    let value;
    try {
      const result = await evaluate(code);
      if (result !== undefined) {
        const text = new CappedText(VALUE_KEPT);
        text.write(show(result));
        value = text.text();
      }
    } catch (caught) {
      const { error, shift } = caught instanceof Failure ? caught : new Failure(caught, 1);
      if (error === 'out of memory') throw error; // the host reports its memory limit
      restore();
      const said = report(stdout, stderr);
      const text = describe(error, shift);
      throw new ToolError(said ? `${said}\n\n${text}` : text);
    } finally {
      restore();
    }
    return withFiles(new Output(report(stdout, stderr, value) || '(no output)'), before);
  },
});

/** `output` with the scratch files new or changed since `before` as
 * artifacts (`file:PATH`), up to the caps, and listed in its text. */
function withFiles(output, before) {
  const lines = [];
  let total = 0;
  let returned = 0;
  for (const [name, key] of [...scratchListing()].sort(([a], [b]) => (a < b ? -1 : 1))) {
    if (before.get(name) === key) continue;
    const data = returned < MAX_FILES ? nodeFs.readFile(name, null) : null;
    if (data === null || total + data.length > MAX_FILE_BYTES) {
      lines.push(`- ${name} (not returned: over ${MAX_FILES} files or ${MAX_FILE_BYTES / 1024} KiB)`);
      continue;
    }
    total += data.length;
    returned += 1;
    lines.push(`- ${name} (${data.length.toLocaleString('en-US')} bytes)`);
    const extension = name.includes('.') ? name.split('.').pop().toLowerCase() : '';
    output.withBytes(`file:${name}`, MEDIA_TYPES[extension] ?? 'application/octet-stream', data);
  }
  if (lines.length) {
    const listing = `files in /scratch:\n${lines.join('\n')}`;
    output.content = output.content === '(no output)' ? listing : `${output.content}\n\n${listing}`;
  }
  return output;
}

export const tool = exportTools([runJavascript]);
