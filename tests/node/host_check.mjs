// The compiled TypeScript host (host.ts, emitted by tsc as host.js next to this script in the
// project the npm package kvdsl is installed in) on the cases tests/contract/test_package.py
// writes:
//   node host_check.mjs <cases.json path>
// <cases.json> is an array of {name, shape, params}; prints the array of plan(name, shape, params).
import { readFileSync } from "node:fs";
import { plan } from "./host.js";

const [casesPath] = process.argv.slice(2);
const cases = JSON.parse(readFileSync(casesPath, "utf8"));
process.stdout.write(JSON.stringify(cases.map((c) => plan(c.name, c.shape, c.params))));
