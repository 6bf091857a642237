// Write wasm-agent tools in JavaScript (ES module, built with componentize-js).
//
//   import { defineTool, exportTools, Output, ToolError, host } from './wasm-agent-tool.js';
//
//   const shout = defineTool({
//     name: 'shout',
//     description: 'Upper-case a text.',
//     parameters: {
//       type: 'object',
//       properties: { text: { type: 'string', description: 'The text.' } },
//       required: ['text'],
//       additionalProperties: false,
//     },
//     annotations: { readOnly: true, idempotent: true },
//     run: ({ text }) => text.toUpperCase(),
//   });
//
//   export const tool = exportTools([shout]);
//
// The wasm-agent host checks the arguments against `parameters` before the
// component runs (a mismatch fails with `invalid-arguments` naming the JSON
// pointer), so `run` gets them decoded and never checked twice. `run` returns
// a string or an Output (or a promise of one, under componentize-js; QuickJS
// built by componentize-qjs --sync has no event loop); throwing a ToolError
// fails the call with its message, any other exception fails it with
// "Name: message". The module runs under componentize-qjs (QuickJS: small and
// quick to start) and componentize-js (SpiderMonkey: web APIs, promises).

import * as wit from 'wasm-agent:tool/host@0.1.3';
import { getRandomBytes } from 'wasi:random/random@0.2.12';

const NAME = /^[A-Za-z0-9_-]{1,64}$/;
const LEVELS = ['trace', 'debug', 'info', 'warn', 'error'];
const ANNOTATIONS = ['readOnly', 'destructive', 'idempotent', 'openWorld'];

/** The tool could not do its job; the message is read by the model. */
export class ToolError extends Error {
  constructor(message) {
    super(String(message));
    this.name = 'ToolError';
    this.kind = 'failed';
  }
}

/** A call of another tool (host.callTool) that did not succeed; `errorKind`
 * is the host's kind (capability_denied, invalid_arguments, denied, failed,
 * timeout, ...). Thrown on, it fails this tool's call with its message. */
export class ToolCallError extends ToolError {
  constructor(tool, errorKind, message) {
    super(`${tool}: ${errorKind}: ${message}`);
    this.name = 'ToolCallError';
    this.tool = tool;
    this.errorKind = errorKind;
    this.detail = message;
  }
}

/** Arguments that fit the schema but make no sense (e.g. an empty name). */
export class InvalidArguments extends ToolError {
  constructor(message) {
    super(message);
    this.name = 'InvalidArguments';
    this.kind = 'invalid-arguments';
  }
}

class UnknownTool extends ToolError {
  constructor(message) {
    super(message);
    this.kind = 'unknown-tool';
  }
}

/** The UTF-8 bytes of `text`, lone surrogates as U+FFFD, as TextEncoder
 * gives them; QuickJS (componentize-qjs) has no TextEncoder. */
export function utf8(text) {
  if (typeof TextEncoder === 'function') return new TextEncoder().encode(text);
  const bytes = [];
  for (const char of text) {
    let code = char.codePointAt(0);
    if (code >= 0xd800 && code <= 0xdfff) code = 0xfffd;
    if (code < 0x80) {
      bytes.push(code);
    } else if (code < 0x800) {
      bytes.push(0xc0 | (code >> 6), 0x80 | (code & 63));
    } else if (code < 0x10000) {
      bytes.push(0xe0 | (code >> 12), 0x80 | ((code >> 6) & 63), 0x80 | (code & 63));
    } else {
      bytes.push(0xf0 | (code >> 18), 0x80 | ((code >> 12) & 63), 0x80 | ((code >> 6) & 63),
        0x80 | (code & 63));
    }
  }
  return new Uint8Array(bytes);
}

/**
 * A `Math.random` seeded with 16 bytes (xoshiro128**, 53-bit doubles).
 *
 * The engine's own generator is part of the snapshot componentize-qjs takes
 * at build time, so every fresh instance would repeat the same numbers; each
 * call gets a generator seeded from the host's random source instead.
 */
export function seededRandom(seed) {
  const s = new Uint32Array(4);
  for (let i = 0; i < 4; i += 1) {
    s[i] = seed[4 * i] | (seed[4 * i + 1] << 8) | (seed[4 * i + 2] << 16) | (seed[4 * i + 3] << 24);
  }
  if ((s[0] | s[1] | s[2] | s[3]) === 0) s[0] = 1;
  const rotl = (x, k) => (x << k) | (x >>> (32 - k));
  const next = () => {
    const result = Math.imul(rotl(Math.imul(s[1], 5), 7), 9) >>> 0;
    const t = s[1] << 9;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 11);
    return result;
  };
  return () => ((next() >>> 11) * 2 ** 32 + next()) / 2 ** 53;
}

/** Makes `Math.random` seed itself from the host's random source when this
 * call first draws a number (a call that draws none asks the host nothing). */
function seedOnFirstDraw() {
  Math.random = () => {
    Math.random = seededRandom(getRandomBytes(16));
    return Math.random();
  };
}

/** Text for the model plus artifacts for the application (which the model never sees). */
export class Output {
  constructor(content = '') {
    this.content = String(content);
    this.artifacts = [];
  }

  /** Adds `value` as an `application/json` artifact. Returns this output. */
  withJson(kind, value) {
    const text = JSON.stringify(value);
    if (text === undefined) {
      throw new TypeError(`artifact ${kind}: ${typeof value} has no JSON form`);
    }
    return this.withBytes(kind, 'application/json', text);
  }

  /** Adds raw data (Uint8Array, ArrayBuffer, or a string as UTF-8). Returns this output. */
  withBytes(kind, mimeType, data) {
    const bytes = typeof data === 'string' ? utf8(data) : new Uint8Array(data);
    this.artifacts.push({ kind: String(kind), mimeType: mimeType ?? undefined, data: bytes });
    return this;
  }
}

// ------------------------------------------------------------------ decoding
//
// The host checks every call's arguments against the tool's schema before the
// component runs (one validator, the host's), so the helper only decodes them.

const ARTICLE = { string: 'a string', number: 'a number', boolean: 'a boolean', array: 'an array' };

function jsonType(value) {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  if (typeof value === 'number') return Number.isInteger(value) ? 'integer' : 'number';
  return typeof value; // string, boolean, object
}

/** The arguments JSON text as an object; blank text and `null` mean `{}`. */
function decode(text) {
  const trimmed = text.trim();
  if (trimmed === '' || trimmed === 'null') return {};
  let value;
  try {
    value = JSON.parse(trimmed);
  } catch (error) {
    throw new InvalidArguments(`arguments are not valid JSON: ${error.message}`);
  }
  const kind = jsonType(value);
  if (kind !== 'object') {
    const name = kind === 'integer' ? 'a number' : ARTICLE[kind];
    throw new InvalidArguments(`arguments must be a JSON object, not ${name}`);
  }
  return value;
}

// --------------------------------------------------------------------- tools

const EMPTY = { type: 'object', properties: {}, additionalProperties: false };

/**
 * Describes one tool.
 *
 * - `name`: 1-64 characters of [A-Za-z0-9_-].
 * - `description`: what it does and when to use it, written for the model.
 * - `parameters`: JSON Schema of the arguments object (default: no arguments).
 * - `annotations`: `{ readOnly, destructive, idempotent, openWorld }` hints.
 * - `run(args, ctx)`: returns a string or an Output, or (componentize-js only)
 *   a promise of one.
 *   `ctx` is `{ runId, sessionId, userId, tenantId, metadata }`.
 */
export function defineTool({ name, description, parameters = EMPTY, annotations = {}, run }) {
  if (typeof name !== 'string' || !NAME.test(name)) {
    throw new Error(`tool name ${JSON.stringify(name)} is invalid: use 1-64 characters of [a-zA-Z0-9_-]`);
  }
  if (typeof run !== 'function') throw new Error(`tool ${name}: run must be a function`);
  if (parameters === null || typeof parameters !== 'object' || (parameters.type ?? 'object') !== 'object') {
    throw new Error(`tool ${name}: parameters must be the JSON Schema of an object`);
  }
  for (const key of Object.keys(annotations)) {
    if (!ANNOTATIONS.includes(key)) {
      throw new Error(`tool ${name}: unknown annotation ${key}; use ${ANNOTATIONS.join(', ')}`);
    }
  }
  const flags = Object.fromEntries(ANNOTATIONS.map((key) => [key, Boolean(annotations[key])]));
  return Object.freeze({
    name,
    description: String(description ?? ''),
    parameters,
    parametersJson: JSON.stringify(parameters),
    annotations: flags,
    run,
  });
}

function toOutput(result) {
  if (result instanceof Output) return result;
  if (result === undefined || result === null) return new Output('');
  if (typeof result === 'string') return new Output(result);
  return new Output(JSON.stringify(result));
}

function toContext(context) {
  let metadata = {};
  try {
    const parsed = JSON.parse(context.metadata);
    if (jsonType(parsed) === 'object') metadata = parsed;
  } catch {
    // The contract says metadata is an object; anything else becomes {}.
  }
  return {
    runId: context.runId,
    sessionId: context.sessionId,
    userId: context.userId ?? null,
    tenantId: context.tenantId ?? null,
    metadata,
  };
}

/** A failed call as the component throws it: the `tool-error` in `payload`. */
function errorResult(kind, message) {
  return { payload: { tag: kind, val: message } };
}

function isThenable(value) {
  return value !== null && (typeof value === 'object' || typeof value === 'function')
    && typeof value.then === 'function';
}

/** A successful call's `tool-output`. */
function answer(result) {
  const output = toOutput(result);
  return { content: output.content, artifacts: output.artifacts };
}

/** What the call throws for `error`, thrown by the tool or by the helper. */
function failure(error) {
  if (error instanceof ToolError) return errorResult(error.kind, error.message);
  if (error === 'out of memory') {
    // SpiderMonkey throws this string when memory cannot grow. Trap instead
    // of failing, so the host reports its memory limit.
    return new Error('out of memory');
  }
  if (error instanceof Error) {
    try {
      host.debug(error.stack ? `${error.name}: ${error.message}\n${error.stack}` : String(error));
    } catch {
      // Logging is best effort.
    }
    return errorResult('failed', error.message ? `${error.name}: ${error.message}` : error.name);
  }
  return errorResult('failed', `uncaught exception: ${String(error)}`);
}

/**
 * The `tool` interface export for a list of tools made by defineTool:
 * `export const tool = exportTools([a, b]);`
 */
export function exportTools(tools) {
  if (!Array.isArray(tools) || tools.length === 0) {
    throw new Error('a component must export at least one tool');
  }
  const byName = new Map();
  for (const item of tools) {
    if (!item || typeof item.run !== 'function' || !item.parametersJson) {
      throw new Error('exportTools takes tools made by defineTool');
    }
    if (byName.has(item.name)) throw new Error(`tool name "${item.name}" is used twice`);
    byName.set(item.name, item);
  }
  const specs = tools.map((item) => ({
    name: item.name,
    description: item.description,
    parameters: item.parametersJson,
    annotations: item.annotations,
  }));

  return {
    listTools() {
      return specs;
    },

    // A result is returned and an error thrown as `{ payload }`, the
    // convention of both componentize-js and componentize-qjs. The answer is
    // a promise only when `run` gives one: QuickJS built with `--sync` has no
    // event loop to wait for it.
    call(name, argumentsJson, context) {
      seedOnFirstDraw();
      let result;
      try {
        const found = byName.get(name);
        if (!found) {
          throw new UnknownTool(`this component has no tool named ${JSON.stringify(name)}; `
            + `it offers: ${[...byName.keys()].join(', ')}`);
        }
        result = found.run(decode(argumentsJson), toContext(context));
        if (!isThenable(result)) return answer(result);
      } catch (error) {
        throw failure(error);
      }
      if (typeof setTimeout !== 'function') {
        throw errorResult('failed', `tool ${name} returned a promise, but this JavaScript engine has `
          + 'no event loop to wait for it (componentize-qjs --sync): make its run synchronous, '
          + 'or build the component with componentize-js');
      }
      return Promise.resolve(result).then(answer).catch((error) => { throw failure(error); });
    },
  };
}

// ---------------------------------------------------------------------- host

function toJson(value, what) {
  const text = JSON.stringify(value);
  if (text === undefined) throw new ToolError(`${what} cannot be represented as JSON`);
  return text;
}

/** What the host offers a tool besides WASI. */
export const host = {
  /** A log line at level 'trace', 'debug', 'info', 'warn' or 'error'. */
  log(level, message) {
    if (!LEVELS.includes(level)) throw new Error(`log level must be one of ${LEVELS.join(', ')}`);
    wit.log(level, String(message));
  },
  trace(message) { host.log('trace', message); },
  debug(message) { host.log('debug', message); },
  info(message) { host.log('info', message); },
  warn(message) { host.log('warn', message); },
  error(message) { host.log('error', message); },

  /** Session state of this tool, as JSON values under string keys. */
  state: {
    /** The value stored under `key`, or `fallback` (default undefined). */
    get(key, fallback = undefined) {
      const text = wit.getState(key);
      if (text === undefined || text === null) return fallback;
      try {
        return JSON.parse(text);
      } catch (error) {
        throw new ToolError(`session state ${JSON.stringify(key)} is not JSON: ${error.message}`);
      }
    },
    /** Stores `value` (anything JSON.stringify takes) under `key`. */
    set(key, value) {
      wit.setState(key, toJson(value, `the value for session state ${JSON.stringify(key)}`));
    },
    getRaw(key) {
      return wit.getState(key) ?? null;
    },
    setRaw(key, text) {
      wit.setState(key, text);
    },
  },

  /** The value the operator configured for this tool under `name`, or null. */
  dependency(name) {
    return wit.dependency(name) ?? null;
  },

  /** Publishes event `name` with a JSON `payload` on the host's event bus. */
  emit(name, payload = null) {
    wit.emit(name, toJson(payload, `the payload of event ${JSON.stringify(name)}`));
  },

  /** True once the call was cancelled or hit its deadline; check it in long loops. */
  cancelled() {
    return wit.cancelled();
  },

  /** The host's tools this tool may call with callTool (those its policy
   * grants in call_tools): `{ name, description, parameters, annotations }`. */
  callableTools() {
    return wit.callableTools().map((spec) => {
      let parameters = {};
      try {
        parameters = JSON.parse(spec.parameters);
      } catch {
        // A host always sends JSON; keep going with no schema otherwise.
      }
      const flags = spec.annotations ?? {};
      return {
        name: spec.name,
        description: spec.description,
        parameters,
        annotations: ANNOTATIONS.filter((key) => flags[key]),
      };
    });
  },

  /** Calls the host's tool `name` with `args` (an object) on the path a call
   * from the agent takes (validation, approval, that tool's policy); returns
   * `{ content, artifacts }` or throws a ToolCallError. */
  callTool(name, args = {}) {
    let output;
    try {
      output = wit.callTool(name, toJson(args, `the arguments for tool ${JSON.stringify(name)}`));
    } catch (error) {
      if (error && Object.hasOwn(error, 'payload')) {
        throw new ToolCallError(name, error.payload.kind, error.payload.message);
      }
      throw error;
    }
    return { content: output.content, artifacts: output.artifacts };
  },

  /** Hands a sub-task to the host's agent `agent`; returns its answer or throws
   * a ToolError saying why the host refused. */
  delegate(agent, input) {
    try {
      return wit.delegate(agent, input);
    } catch (error) {
      if (error && Object.hasOwn(error, 'payload')) throw new ToolError(String(error.payload));
      throw error;
    }
  },
};
