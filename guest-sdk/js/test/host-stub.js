// In-memory stand-in for the 'wasm-agent:tool/host@0.1.3' import, shaped the
// way componentize-js hands WIT functions to JavaScript: kebab-case names
// become camelCase (get-state -> getState), an enum value is its case name as
// a string ('info'), option<string> is a string or undefined, and an `err`
// result is thrown as an Error whose own `payload` property holds the value.
// The extra exports (logs, state, reset, ...) let tests set up and inspect it.

export const logs = [];
export const state = new Map();
export const dependencies = new Map();
export const events = [];
export const agents = new Map();
let isCancelled = false;
let logFails = false;

export function reset() {
  logs.length = 0;
  state.clear();
  dependencies.clear();
  events.length = 0;
  agents.clear();
  isCancelled = false;
  logFails = false;
}

export function setCancelled(value) {
  isCancelled = value;
}

export function setLogFails(value) {
  logFails = value;
}

function expectString(what, value) {
  if (typeof value !== 'string') throw new TypeError(`${what} must be a string, got ${typeof value}`);
}

export function log(level, message) {
  if (!['trace', 'debug', 'info', 'warn', 'error'].includes(level)) {
    throw new TypeError(`not a level: ${level}`);
  }
  expectString('message', message);
  if (logFails) throw new Error('log is gone');
  logs.push({ level, message });
}

export function getState(key) {
  expectString('key', key);
  return state.get(key);
}

export function setState(key, value) {
  expectString('key', key);
  expectString('value', value);
  state.set(key, value);
}

export function dependency(name) {
  expectString('name', name);
  return dependencies.get(name);
}

export function emit(name, payload) {
  expectString('name', name);
  expectString('payload', payload);
  events.push({ name, payload });
}

export function cancelled() {
  return isCancelled;
}

class ComponentError extends Error {
  constructor(payload) {
    super(payload);
    Object.defineProperty(this, 'payload', { value: payload, enumerable: false });
  }
}

export function delegate(agent, input) {
  expectString('agent', agent);
  expectString('input', input);
  const answer = agents.get(agent);
  if (!answer) throw new ComponentError(`agent "${agent}" is not allowed for this tool`);
  return answer(input);
}
