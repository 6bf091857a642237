// TEST-ONLY JavaScript component for the host's tests: benign probes of the
// host interface plus hostile behaviours (an endless loop, unbounded
// allocation, an uncaught exception). Never ship it.

import { defineTool, exportTools, host, ToolError } from '../../guest-sdk/js/wasm-agent-tool.js';

const object = (properties = {}, required = []) => ({
  type: 'object', properties, required, additionalProperties: false,
});
const anyJson = { description: 'Any JSON value.' };

export const tool = exportTools([
  defineTool({
    name: 'echo',
    description: 'Return the text unchanged.',
    parameters: object({ text: { type: 'string' } }, ['text']),
    annotations: { readOnly: true, idempotent: true },
    run: ({ text }) => text,
  }),
  defineTool({
    name: 'fail',
    description: 'Throw a ToolError (kind failed).',
    parameters: object({ message: { type: 'string' } }),
    run: ({ message = 'this tool always fails' }) => {
      throw new ToolError(message);
    },
  }),
  defineTool({
    name: 'crash',
    description: 'Throw an exception that is not a ToolError.',
    run: () => null.missing,
  }),
  defineTool({
    name: 'throw_string',
    description: 'Throw a value that is not an Error.',
    run: () => {
      throw 'a bare string'; // eslint-disable-line no-throw-literal
    },
  }),
  defineTool({
    name: 'spin',
    description: 'Loop forever without checking for cancellation.',
    run: () => {
      for (;;) { /* spin */ }
    },
  }),
  defineTool({
    name: 'spin_polite',
    description: 'Loop until the host says the call is cancelled or past its deadline.',
    run: () => {
      let count = 0;
      while (!host.cancelled()) count += 1;
      return `stopped after ${count} iterations`;
    },
  }),
  defineTool({
    name: 'alloc',
    description: 'Allocate memory in chunks until something stops it.',
    parameters: object({ chunk_kib: { type: 'integer', minimum: 1, default: 1024 } }),
    run: ({ chunk_kib: kib = 1024 }) => {
      const kept = [];
      for (;;) kept.push(new Uint8Array(kib * 1024).fill(1));
    },
  }),
  defineTool({
    name: 'recurse',
    description: 'Recurse without end (SpiderMonkey throws InternalError).',
    run: () => {
      const down = (depth) => down(depth + 1) + 1;
      return String(down(0));
    },
  }),
  defineTool({
    name: 'state',
    description: 'Store a JSON value under key (if given), then read it back; returns the '
      + 'value stored before and the value now.',
    parameters: object({ key: { type: 'string' }, value: anyJson }, ['key']),
    run: ({ key, value }) => {
      const before = host.state.get(key, null);
      if (value !== undefined) host.state.set(key, value);
      return JSON.stringify({ before, now: host.state.get(key, null) });
    },
  }),
  defineTool({
    name: 'dependency',
    description: 'Return the dependency value the operator configured, or <none>.',
    parameters: object({ name: { type: 'string' } }, ['name']),
    run: ({ name }) => host.dependency(name) ?? '<none>',
  }),
  defineTool({
    name: 'emit',
    description: 'Publish an event on the host\'s bus.',
    parameters: object({ name: { type: 'string' }, payload: anyJson }),
    run: ({ name = 'fixture.event', payload = { from: 'fixture-js' } }) => {
      host.emit(name, payload);
      return 'emitted';
    },
  }),
  defineTool({
    name: 'log',
    description: 'Write a log line.',
    parameters: object({ level: { enum: ['trace', 'debug', 'info', 'warn', 'error'] }, message: { type: 'string' } }),
    run: ({ level = 'info', message = 'hello from fixture-js' }) => {
      host.log(level, message);
      return 'logged';
    },
  }),
  defineTool({
    name: 'context',
    description: 'Return the call context.',
    annotations: { readOnly: true },
    run: (_, ctx) => JSON.stringify(ctx),
  }),
  defineTool({
    name: 'random',
    description: 'Draw three numbers with Math.random.',
    annotations: { readOnly: true },
    run: () => JSON.stringify([Math.random(), Math.random(), Math.random()]),
  }),
  defineTool({
    name: 'later',
    description: 'Answer with a promise (QuickJS built with --sync cannot wait for it).',
    run: async () => 'later',
  }),
]);
