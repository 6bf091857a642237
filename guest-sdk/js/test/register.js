// Maps the component-only imports 'wasm-agent:tool/host@0.1.3' and
// 'wasi:random/random@0.2.12' to ./host-stub.js and ./random-stub.js, so that
// wasm-agent-tool.js loads in plain Node (20.6+). Import this module
// before the helper is imported (the test does, then imports the helper with
// a dynamic import()); `node --import ./guest-sdk/js/test/register.js` works too.
import { register } from 'node:module';

const STUBS = {
  'wasm-agent:tool/host@0.1.3': new URL('./host-stub.js', import.meta.url).href,
  'wasi:random/random@0.2.12': new URL('./random-stub.js', import.meta.url).href,
};
const hooks = `
const stubs = ${JSON.stringify(STUBS)};
export async function resolve(specifier, context, nextResolve) {
  if (Object.hasOwn(stubs, specifier)) {
    return { url: stubs[specifier], format: 'module', shortCircuit: true };
  }
  return nextResolve(specifier, context);
}`;

register(`data:text/javascript,${encodeURIComponent(hooks)}`);
