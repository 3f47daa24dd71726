// The errors emitted/kvdsl.js gives for unknown variant names, for
// tests/contract/test_suggestions.py:
//   node suggest_check.mjs <kvdsl.js path> <names.json path>
// <names.json> is an array of names; prints the array of the messages variant(name) threw
// (null where it returned a variant).
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";

const [modulePath, namesPath] = process.argv.slice(2);
const { variant } = await import(pathToFileURL(modulePath).href);
const names = JSON.parse(readFileSync(namesPath, "utf8"));
const messages = names.map((name) => {
  try {
    variant(name);
    return null;
  } catch (e) {
    return `${e.constructor.name}: ${e.message}`;
  }
});
process.stdout.write(JSON.stringify(messages));
