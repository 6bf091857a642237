// Maps the component-only import 'wasm-agent:tool/host@0.1.3' to ./host-stub.js,
// so that wasm-agent-tool.js loads in plain Node (20.6+). Import this module
// before the helper is imported (the test does, then imports the helper with
// a dynamic import()); `node --import ./guest-sdk/js/test/register.js` works too.
import { register } from 'node:module';

const SPECIFIER = 'wasm-agent:tool/host@0.1.3';
const stub = new URL('./host-stub.js', import.meta.url).href;
const hooks = `
export async function resolve(specifier, context, nextResolve) {
  if (specifier === ${JSON.stringify(SPECIFIER)}) {
    return { url: ${JSON.stringify(stub)}, format: 'module', shortCircuit: true };
  }
  return nextResolve(specifier, context);
}`;

register(`data:text/javascript,${encodeURIComponent(hooks)}`);
