// A small synchronous file API for the code run_javascript runs, over the
// folders the host preopens (wasi:filesystem): the granted ones and, with
// `scratch`, `/scratch`, which is also the working directory. Nothing else
// exists; the host refuses `..` or a symlink out of a folder, and a write
// into a read-only one. Errors are Node-like: `ENOENT: no such file or
// directory, open '/etc/passwd'`, with `code`.

import { getDirectories } from 'wasi:filesystem/preopens@0.2.12';

/** The scratch folder the host preopens when the policy grants one. */
export const SCRATCH = '/scratch';

const encoder = new TextEncoder();
const decoder = new TextDecoder();
/** Bytes read per call of the host. */
const CHUNK = 64n * 1024n;

/** wasi:filesystem error codes as Node's names and messages. */
const CODES = {
  access: ['EACCES', 'permission denied'],
  'not-permitted': ['EPERM', 'operation not permitted'],
  'read-only': ['EROFS', 'read-only file system'],
  'no-entry': ['ENOENT', 'no such file or directory'],
  exist: ['EEXIST', 'file already exists'],
  'not-directory': ['ENOTDIR', 'not a directory'],
  'is-directory': ['EISDIR', 'illegal operation on a directory'],
  'not-empty': ['ENOTEMPTY', 'directory not empty'],
  'name-too-long': ['ENAMETOOLONG', 'name too long'],
  'insufficient-space': ['ENOSPC', 'no space left (the call\'s write budget is spent)'],
  quota: ['EDQUOT', 'quota exceeded (the call\'s write budget is spent)'],
  loop: ['ELOOP', 'too many symbolic links'],
  invalid: ['EINVAL', 'invalid argument'],
};

function failure(code, operation, path) {
  const [name, message] = CODES[code] ?? ['EIO', `${code}`];
  const error = new Error(`${name}: ${message}, ${operation} '${path}'`);
  error.code = name;
  return error;
}

/** Runs a host operation, turning its error code into a Node-like error. */
function host(operation, path, run) {
  try {
    return run();
  } catch (error) {
    const code = error?.payload ?? error?.code;
    if (typeof code === 'string') throw failure(code, operation, path);
    throw error;
  }
}

/** `path` made absolute against the working directory, `.` and `..` applied. */
function absolute(path) {
  const text = String(path);
  const start = text.startsWith('/') ? [] : cwd().split('/');
  const parts = [];
  for (const part of [...start, ...text.split('/')]) {
    if (part === '' || part === '.') continue;
    if (part === '..') parts.pop();
    else parts.push(part);
  }
  return `/${parts.join('/')}`;
}

let preopens;
function folders() {
  preopens ??= getDirectories()
    .map(([descriptor, guest]) => ({ descriptor, guest: absolute(guest).replace(/\/$/, '') }))
    .sort((a, b) => b.guest.length - a.guest.length);
  return preopens;
}

/** The working directory: `/scratch` when granted, else `/`. */
export function cwd() {
  return scratchGranted() ? SCRATCH : '/';
}

let hasScratch;
function scratchGranted() {
  hasScratch ??= getDirectories().some(([, guest]) => guest === SCRATCH);
  return hasScratch;
}

/** The preopened folder holding `path` and the path inside it. */
function locate(path, operation) {
  const full = absolute(path);
  for (const folder of folders()) {
    if (full === folder.guest) return { folder, inner: '.', full };
    if (full.startsWith(`${folder.guest}/`) || folder.guest === '') {
      return { folder, inner: full.slice(folder.guest.length + 1) || '.', full };
    }
  }
  throw failure('no-entry', operation, String(path));
}

function open(path, operation, openFlags, descriptorFlags) {
  const { folder, inner } = locate(path, operation);
  return host(operation, path, () => folder.descriptor.openAt(
    { symlinkFollow: true }, inner, openFlags, descriptorFlags,
  ));
}

function bytesOf(data) {
  if (typeof data === 'string') return encoder.encode(data);
  if (data instanceof Uint8Array) return data;
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  return encoder.encode(String(data));
}

function readAll(file, path) {
  const chunks = [];
  let offset = 0n;
  for (;;) {
    const [data, end] = host('read', path, () => file.read(CHUNK, offset));
    chunks.push(data);
    offset += BigInt(data.length);
    if (end || data.length === 0) break;
  }
  const all = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
  let at = 0;
  for (const chunk of chunks) {
    all.set(chunk, at);
    at += chunk.length;
  }
  return all;
}

function writeAll(file, path, bytes, offset) {
  let written = 0;
  while (written < bytes.length) {
    const piece = bytes.subarray(written);
    written += Number(host('write', path, () => file.write(piece, offset + BigInt(written))));
  }
}

/** The file API: `fs.readFile`, `fs.writeFile`, `fs.appendFile`, `fs.readdir`,
 * `fs.stat`, `fs.exists`, `fs.mkdir`, `fs.rm`, `fs.cwd`. */
export const fs = Object.freeze({
  /** A file's text (`encoding` 'utf8', the default) or bytes (`null`). */
  readFile(path, encoding = 'utf8') {
    const file = open(path, 'open', {}, { read: true });
    const bytes = readAll(file, path);
    return encoding === null || encoding === 'buffer' ? bytes : decoder.decode(bytes);
  },
  /** Writes text or bytes to a file, creating or replacing it. */
  writeFile(path, data) {
    const file = open(path, 'open', { create: true, truncate: true }, { write: true });
    writeAll(file, path, bytesOf(data), 0n);
  },
  /** Adds text or bytes at the end of a file, creating it if need be. */
  appendFile(path, data) {
    const file = open(path, 'open', { create: true }, { write: true });
    const size = host('stat', path, () => file.stat()).size;
    writeAll(file, path, bytesOf(data), size);
  },
  /** The names in a folder, sorted. */
  readdir(path = '.') {
    const dir = open(path, 'scandir', { directory: true }, { read: true });
    const stream = host('scandir', path, () => dir.readDirectory());
    const names = [];
    for (let entry; (entry = host('scandir', path, () => stream.readDirectoryEntry()));) {
      names.push(entry.name);
    }
    return names.sort();
  },
  /** `{ size, isFile, isDirectory, modified }` of a file or folder. */
  stat(path) {
    const { folder, inner } = locate(path, 'stat');
    const stat = host('stat', path, () => folder.descriptor.statAt({ symlinkFollow: true }, inner));
    const modified = stat.dataModificationTimestamp;
    return {
      size: Number(stat.size),
      isFile: stat.type === 'regular-file',
      isDirectory: stat.type === 'directory',
      modified: modified ? new Date(Number(modified.seconds) * 1000 + modified.nanoseconds / 1e6) : null,
    };
  },
  /** Whether a file or folder is there (and visible). */
  exists(path) {
    try {
      fs.stat(path);
      return true;
    } catch (error) {
      if (error.code === 'ENOENT') return false;
      throw error;
    }
  },
  /** Makes a folder. */
  mkdir(path) {
    const { folder, inner } = locate(path, 'mkdir');
    host('mkdir', path, () => folder.descriptor.createDirectoryAt(inner));
  },
  /** Removes a file, or an empty folder. */
  rm(path) {
    const { folder, inner } = locate(path, 'rm');
    const stat = host('rm', path, () => folder.descriptor.statAt({}, inner));
    if (stat.type === 'directory') {
      host('rm', path, () => folder.descriptor.removeDirectoryAt(inner));
    } else {
      host('rm', path, () => folder.descriptor.unlinkFileAt(inner));
    }
  },
  /** The working directory. */
  cwd,
});

/** Every file under `/scratch` (when granted): relative path and stat key. */
export function scratchListing() {
  const listing = new Map();
  if (!scratchGranted()) return listing;
  const walk = (folder) => {
    for (const name of fs.readdir(folder)) {
      const path = `${folder}/${name}`;
      const stat = fs.stat(path);
      if (stat.isDirectory) walk(path);
      else listing.set(path.slice(SCRATCH.length + 1), `${stat.size}:${stat.modified?.getTime()}`);
    }
  };
  walk(SCRATCH);
  return listing;
}
