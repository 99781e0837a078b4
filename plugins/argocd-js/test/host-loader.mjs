// Node module hooks: resolves the component's import `ksm:adapter/host@<version>` to a stub that
// records log lines in `globalThis.ksmHostLog`, so src/plugin.js runs unchanged under Node.
const HOST = /^ksm:adapter\/host@\d+\.\d+\.\d+$/;
const STUB = `export default { log(level, message) { (globalThis.ksmHostLog ??= []).push([level, message]); } };`;

export async function resolve(specifier, context, next) {
  if (HOST.test(specifier)) {
    return { url: `data:text/javascript,${encodeURIComponent(STUB)}`, shortCircuit: true };
  }
  return next(specifier, context);
}
