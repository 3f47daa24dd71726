// Answers of the npm package kvdsl (emitted/, installed from its tarball) for the cases
// tests/contract/test_module.py writes; this script and examples/run.js are copied into the
// project the package is installed in, so "kvdsl" resolves as a runtime's import does:
//   node module_check.mjs <cases.json path>
// prints one JSON object: per variant its fields (bytesPerTokenHead and pages where it has them),
// layoutEntries(), whether its exported WGSL file ("kvdsl/<name>.wgsl") is its code and, per
// case, bufferSizes, paramsBytes (hex), workgroups (or the error each threw), paramsFor(shape,
// chosen) and the example's (chosen: the case's fields without a value formula); per entry of "requirements", what checkRequirements threw (null: nothing);
// the exported index.json; and the messages of the errors each call in
// "refusals" threw.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import * as kvdsl from "kvdsl";
import * as example from "./run.js";

const [casesPath] = process.argv.slice(2);
const input = JSON.parse(readFileSync(casesPath, "utf8"));
// The package's other exports are files: require.resolve finds them through its "exports".
const require = createRequire(import.meta.url);
const exported = (path) => readFileSync(require.resolve(path), "utf8");

const attempt = (f) => {
  try {
    return { value: f() };
  } catch (e) {
    return { error: `${e.constructor.name}: ${e.message}` };
  }
};
const hex = (buf) => Buffer.from(buf).toString("hex");

const out = {
  names: Object.keys(kvdsl.variants), variants: {}, refusals: [],
  index: JSON.parse(exported("kvdsl/index.json")),
};
for (const [name, cases] of Object.entries(input.cases)) {
  const v = kvdsl.variant(name);
  out.variants[name] = {
    name: v.name, mode: v.mode, code: v.code, entryPoint: v.entryPoint,
    workgroupSize: v.workgroupSize, features: v.features, limits: v.limits, config: v.config,
    bindings: v.bindings, params: v.params, paramsSize: v.paramsSize, shape: v.shape,
    requires: v.requires,
    ...("bytesPerTokenHead" in v ? { bytesPerTokenHead: v.bytesPerTokenHead } : {}),
    ...("pages" in v ? { pages: v.pages } : {}),
    layoutEntries: v.layoutEntries(),
    wgslIsCode: exported(`kvdsl/${name}.wgsl`) === v.code,
    cases: cases.map((c) => ({
      sizes: attempt(() => v.bufferSizes(c.shape)),
      paramsBytes: attempt(() => hex(v.paramsBytes(c.params))),
      workgroups: c.dispatch.map((p) => attempt(() => v.workgroups(p))),
      exampleParams: attempt(() => example.paramsFor(v, c.shape, c.chosen)),
      paramsFor: attempt(() => v.paramsFor(c.shape, c.chosen)),
    })),
  };
}
// checkRequirements: null where the params meet every requirement, else the error it threw.
out.requirements = input.requirements.map((r) => {
  const got = attempt(() => kvdsl.variant(r.name).checkRequirements(r.params, r.inputs));
  return got.error ?? null;
});
for (const r of input.refusals) {
  const call = {
    variant: () => kvdsl.variant(r.name),
    bufferSizes: () => kvdsl.variant(r.name).bufferSizes(r.arg),
    paramsBytes: () => kvdsl.variant(r.name).paramsBytes(r.arg),
    workgroups: () => kvdsl.variant(r.name).workgroups(r.arg),
    paramsFor: () => kvdsl.variant(r.name).paramsFor(r.arg),
    checkRequirements: () => kvdsl.variant(r.name).checkRequirements(r.arg, r.inputs),
  }[r.call];
  out.refusals.push(attempt(call));
}
process.stdout.write(JSON.stringify(out));
