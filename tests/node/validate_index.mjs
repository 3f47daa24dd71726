// index.json against index.schema.json under ajv (the JSON Schema validator of JavaScript), both
// read through the exports of the npm package kvdsl installed in <project>:
//   node validate_index.mjs <project> <entries.json>
// prints one JSON object: "index", the errors of the package's index.json (null when it
// validates), and "entries", the errors of each object of <entries.json> (an array of index.json
// objects). An error is "<instancePath> <message>". ajv checks the schema against the 2020-12
// metaschema and compiles it with its default strictness (an unknown keyword throws).
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import Ajv2020 from "ajv/dist/2020.js";

const [project, entriesPath] = process.argv.slice(2);
const fromProject = createRequire(join(project, "package.json"));
const exported = (path) => JSON.parse(readFileSync(fromProject.resolve(path), "utf8"));

const ajv = new Ajv2020({ allErrors: true });
const validate = ajv.compile(exported("kvdsl/index.schema.json"));
const check = (value) =>
  validate(value) ? null : validate.errors.map((e) => `${e.instancePath} ${e.message}`);

const entries = JSON.parse(readFileSync(entriesPath, "utf8"));
process.stdout.write(
  JSON.stringify({ index: check(exported("kvdsl/index.json")), entries: entries.map(check) }),
);
