// What models write in JavaScript, accepted where the sandbox can honour it:
// `require('fs')` (and 'fs/promises', 'path') returning the sandboxed file
// API with Node's names beside ours (`readFileSync`, `writeFileSync`,
// `existsSync`, `statSync`, `fs.promises`, ...), a small `process`. Any
// other module is refused with what to write instead.

import { fs, cwd } from './fs.js';

const decoder = new TextDecoder();

/** Bytes that read as text, like Node's Buffer: `String(fs.readFileSync(p))`. */
class Buffer extends Uint8Array {
  toString(encoding = 'utf8') {
    if (encoding !== 'utf8' && encoding !== 'utf-8') return super.toString();
    return decoder.decode(this);
  }
}

/** Node's `encoding` argument: a name, or `{ encoding }`. */
function encodingOf(options) {
  if (typeof options === 'string') return options;
  return options?.encoding ?? null;
}

/** A stat as Node shows it: `isFile()` and `isDirectory()` are methods. */
function nodeStat(path) {
  const stat = fs.stat(path);
  return {
    size: stat.size,
    mtime: stat.modified,
    isFile: () => stat.isFile,
    isDirectory: () => stat.isDirectory,
  };
}

function mkdirs(path) {
  const parts = String(path).split('/');
  for (let i = 1; i <= parts.length; i += 1) {
    const prefix = parts.slice(0, i).join('/');
    if (prefix && prefix !== '.' && !fs.exists(prefix)) fs.mkdir(prefix);
  }
}

function rmTree(path) {
  if (fs.stat(path).isDirectory) {
    for (const name of fs.readdir(path)) rmTree(`${path}/${name}`);
  }
  fs.rm(path);
}

const sync = {
  readFileSync(path, options) {
    const encoding = encodingOf(options);
    if (encoding) return fs.readFile(path, 'utf8');
    const bytes = fs.readFile(path, null);
    return new Buffer(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  },
  writeFileSync: (path, data) => fs.writeFile(path, data),
  appendFileSync: (path, data) => fs.appendFile(path, data),
  existsSync: (path) => fs.exists(path),
  readdirSync: (path = '.') => fs.readdir(path),
  statSync: nodeStat,
  lstatSync: nodeStat,
  mkdirSync(path, options) {
    if (options?.recursive) mkdirs(path);
    else fs.mkdir(path);
  },
  unlinkSync: (path) => fs.rm(path),
  rmSync(path, options) {
    if (options?.force && !fs.exists(path)) return;
    if (options?.recursive) rmTree(path);
    else fs.rm(path);
  },
  rmdirSync: (path) => fs.rm(path),
};

/** The same, as promises (`fs.promises`, `require('fs/promises')`). */
const promises = Object.freeze({
  readFile: async (path, options) => sync.readFileSync(path, options),
  writeFile: async (path, data) => sync.writeFileSync(path, data),
  appendFile: async (path, data) => sync.appendFileSync(path, data),
  readdir: async (path) => sync.readdirSync(path),
  stat: async (path) => sync.statSync(path),
  mkdir: async (path, options) => sync.mkdirSync(path, options),
  unlink: async (path) => sync.unlinkSync(path),
  rm: async (path, options) => sync.rmSync(path, options),
  access: async (path) => {
    fs.stat(path);
  },
});

/** `fn`, also in Node's callback style: a function as the last argument
 * gets `(error, result)` instead of the result being returned. */
function callbackable(fn) {
  return (...args) => {
    if (typeof args[args.length - 1] !== 'function') return fn(...args);
    const done = args.pop();
    let result;
    try {
      result = fn(...args);
    } catch (error) {
      queueMicrotask(() => done(error));
      return undefined;
    }
    queueMicrotask(() => done(null, result));
    return undefined;
  };
}

/** `fs`: our names (`readFile`, `writeFile`, ...; with a callback as Node
 * calls them) and Node's. */
export const nodeFs = Object.freeze({
  ...fs,
  readFile: callbackable(fs.readFile),
  writeFile: callbackable(fs.writeFile),
  appendFile: callbackable(fs.appendFile),
  readdir: callbackable(fs.readdir),
  stat: callbackable(fs.stat),
  mkdir: callbackable(fs.mkdir),
  ...sync,
  promises,
});

/** `path`, the parts models use. */
const path = Object.freeze({
  sep: '/',
  join: (...parts) => parts.filter((p) => p !== '').join('/').replace(/\/+/g, '/') || '.',
  resolve: (...parts) => {
    const joined = parts.reduce((at, part) => (String(part).startsWith('/') ? part : `${at}/${part}`), cwd());
    return joined.replace(/\/+/g, '/');
  },
  basename: (p, ext) => {
    const base = String(p).replace(/\/+$/, '').split('/').pop();
    return ext && base.endsWith(ext) ? base.slice(0, -ext.length) : base;
  },
  dirname: (p) => String(p).replace(/\/+$/, '').split('/').slice(0, -1).join('/') || (String(p).startsWith('/') ? '/' : '.'),
  extname: (p) => {
    const base = String(p).split('/').pop();
    const dot = base.lastIndexOf('.');
    return dot > 0 ? base.slice(dot) : '';
  },
});

const MODULES = {
  fs: nodeFs,
  'fs/promises': promises,
  path,
};

/** Node's `require` for what the sandbox has; anything else is refused
 * with what to write instead. */
export function require(name) {
  const module = MODULES[String(name).replace(/^node:/, '')];
  if (module) return module;
  const error = new Error(`Cannot find module '${name}': this sandbox has require('fs'), `
    + "require('fs/promises') and require('path') (files in granted folders and /scratch), "
    + 'fetch() for HTTP to granted hosts, and the host\'s tools as functions of `tools`; '
    + 'no other modules, no processes');
  error.code = 'MODULE_NOT_FOUND';
  throw error;
}

/** A small `process`: no environment, the working folder, no exit. */
export const process = Object.freeze({
  env: Object.freeze({}),
  argv: Object.freeze(['node', 'code.js']),
  platform: 'wasi',
  cwd,
  exit() {
    throw new Error('process.exit is not available: end the code (or throw) instead');
  },
});
