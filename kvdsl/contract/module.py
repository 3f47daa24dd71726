"""``emitted/kvdsl.js`` (an ES module with no imports) and ``emitted/kvdsl.d.ts``, its types.

The module embeds ``index.json``'s entries and each variant's WGSL text, and implements, over that
data alone, the rules :mod:`kvdsl.contract.index` states in Python: buffer sizes from the shape
variables, the params for a shape, the uniform block's bytes, the dispatch's workgroups, the
kernel's requirements, the bind group layout. A test runs
it under Node.js and compares every variant's answers with Python's.
"""

from __future__ import annotations

import json
from typing import Any

from kvdsl import __version__
from kvdsl.kernels.paged import PageLayout, Pool

_RUNTIME = r"""
const COMPUTE = 4; // GPUShaderStage.COMPUTE
const BUFFER_TYPES = { read: "read-only-storage", read_write: "storage", uniform: "uniform" };
const RANGES = { u32: [0, 4294967295], i32: [-2147483648, 2147483647] };
const MAX_PER_DIMENSION = 65535; // WebGPU's default maxComputeWorkgroupsPerDimension

// The contract's expression language (docs/host.md): integers, names, + - * and parentheses,
// evaluated exactly (BigInt). `what` names the variables in errors.
function evaluate(text, values, what) {
  const toks = [];
  const re = /\s*(?:(\d+)|([A-Za-z_][A-Za-z0-9_]*)|([-+*()]))/y;
  const end = text.trimEnd().length;
  re.lastIndex = 0;
  while (re.lastIndex < end) {
    const from = re.lastIndex;
    const m = re.exec(text);
    if (m === null) {
      const at = text.length - text.slice(from).trimStart().length;
      throw new Error(`expression '${text}': '${text[at]}' at ${at} is not an integer, a name, '+', '-', '*' or a parenthesis`);
    }
    toks.push(m[1] ?? m[2] ?? m[3]);
  }
  let pos = 0;
  const take = () => {
    if (pos >= toks.length) throw new Error(`expression '${text}' ends early`);
    return toks[pos++];
  };
  const factor = () => {
    const tok = take();
    if (tok === "(") {
      const v = expr();
      if (take() !== ")") throw new Error(`expression '${text}': expected ')'`);
      return v;
    }
    if (/^\d+$/.test(tok)) return BigInt(tok);
    if (/^[A-Za-z_]/.test(tok)) {
      if (!Object.hasOwn(values, tok)) {
        const known = Object.keys(values).sort().join(", ") || "none";
        throw new Error(`${what} '${tok}' is missing (needed by ${text}); given: ${known}`);
      }
      return BigInt(values[tok]);
    }
    throw new Error(`expression '${text}': unexpected '${tok}'`);
  };
  const term = () => {
    let v = factor();
    while (toks[pos] === "*") { pos++; v *= factor(); }
    return v;
  };
  const expr = () => {
    let v = term();
    while (toks[pos] === "+" || toks[pos] === "-") v = take() === "+" ? v + term() : v - term();
    return v;
  };
  const v = expr();
  if (pos !== toks.length) throw new Error(`expression '${text}': unexpected '${toks[pos]}' after a whole expression`);
  return v;
}

function safe(v, what) {
  if (v > BigInt(Number.MAX_SAFE_INTEGER)) throw new Error(`${what} is ${v}, past 2^53 - 1`);
  return Number(v);
}

// `given` must hold exactly `names`, each an integer >= 0.
function counts(variant, what, given, names) {
  if (given === null || typeof given !== "object") throw new Error(`${variant}: ${what} must be an object of ${names.join(", ")}; got ${given}`);
  for (const k of Object.keys(given)) {
    if (!names.includes(k)) throw new Error(`${variant}: ${what} has no variable '${k}'; it has ${names.join(", ")}`);
  }
  for (const k of names) {
    if (!Object.hasOwn(given, k)) throw new Error(`${variant}: ${what} variable '${k}' is missing; give ${names.join(", ")}`);
    const v = given[k];
    if (!Number.isSafeInteger(v) || v < 0) throw new Error(`${variant}: ${what} variable '${k}' is ${v}; expected an integer >= 0`);
  }
  return given;
}

function checkParams(v, params) {
  const names = v.params.map((p) => p.name);
  if (params === null || typeof params !== "object") throw new Error(`${v.name}: params must be an object of ${names.join(", ")}; got ${params}`);
  for (const k of Object.keys(params)) {
    if (!names.includes(k)) throw new Error(`${v.name}: params has no field '${k}'; the fields are ${names.join(", ")}`);
  }
  for (const p of v.params) {
    if (!Object.hasOwn(params, p.name)) throw new Error(`${v.name}: params field '${p.name}' is missing; the fields are ${names.join(", ")}`);
    const x = params[p.name];
    if (p.type === "f32") {
      if (typeof x !== "number") throw new Error(`${v.name}: params field '${p.name}' is f32: got ${x}, expected a number`);
    } else {
      const [lo, hi] = RANGES[p.type];
      if (!Number.isInteger(x)) throw new Error(`${v.name}: params field '${p.name}' is ${p.type}: got ${x}, expected an integer`);
      if (x < lo || x > hi) throw new Error(`${v.name}: params field '${p.name}' is ${p.type}: ${x} is outside [${lo}, ${hi}]`);
    }
  }
}

// The largest value of integer input `input` as the host gave it: the value itself, or an
// array (-1 when empty, as the kernel reads an empty batch).
function largest(input, data) {
  if (Number.isSafeInteger(data)) return BigInt(data);
  const listed = data !== null && typeof data === "object" && typeof data.length === "number";
  const items = listed ? Array.from(data, (x) => (Number.isSafeInteger(x) ? BigInt(x) : null)) : [null];
  if (items.includes(null)) throw new Error(`input '${input}' is ${data}: expected an array of integers or its largest value`);
  return items.length === 0 ? -1n : items.reduce((a, b) => (b > a ? b : a));
}

const HOLDS = { "<=": (a, b) => a <= b, ">=": (a, b) => a >= b, "<": (a, b) => a < b, ">": (a, b) => a > b };

function makeVariant(name, d, code) {
  const v = {
    name,
    mode: d.mode,
    code,
    entryPoint: d.entry_point,
    workgroupSize: Object.freeze([...d.workgroup_size]),
    features: Object.freeze([...d.features]),
    limits: Object.freeze({ ...d.limits }),
    config: Object.freeze({ ...d.config }),
    bindings: Object.freeze(d.bindings.map((b) => Object.freeze({
      binding: b.binding, name: b.name, access: b.access, use: b.use, type: b.type,
      elementBytes: b.element_bytes, elements: b.elements,
      ...(b.data === undefined ? {} : { data: b.data }),
    }))),
    params: Object.freeze(d.params.map((p) => Object.freeze({
      name: p.name, type: p.type, offset: p.offset, meaning: p.meaning,
      ...(p.value === undefined ? {} : { value: p.value }),
    }))),
    requires: Object.freeze((d.requires ?? []).map((r) => Object.freeze({
      rule: r.rule, left: r.left, op: r.op, right: r.right,
      largest: Object.freeze([...(r.largest ?? [])]), says: r.says,
    }))),
    paramsSize: d.params_size,
    shape: Object.freeze([...d.shape]),
    ...(d.bytes_per_token_head === undefined ? {} : { bytesPerTokenHead: d.bytes_per_token_head }),
    ...(d.pages === undefined ? {} : { pages: Object.freeze({
      pageSize: d.pages.page_size, layout: d.pages.layout, pool: d.pages.pool,
      pageValues: d.pages.page_values, pageBytes: d.pages.page_bytes,
      pageStrideValues: d.pages.page_stride_values, scalePageValues: d.pages.scale_page_values,
    }) }),
    ...(d.bytes_moved === undefined ? {} : { bytesMoved: d.bytes_moved }),
    layoutEntries() {
      return this.bindings.map((b) => ({
        binding: b.binding, visibility: COMPUTE, buffer: { type: BUFFER_TYPES[b.access] },
      }));
    },
    paramsBytes(params) {
      checkParams(this, params);
      const buf = new ArrayBuffer(this.paramsSize);
      const view = new DataView(buf);
      for (const p of this.params) {
        const x = params[p.name];
        if (p.type === "u32") view.setUint32(p.offset, x, true);
        else if (p.type === "i32") view.setInt32(p.offset, x, true);
        else view.setFloat32(p.offset, x, true);
      }
      return buf;
    },
    workgroups(params) {
      checkParams(this, params);
      const rule = d.dispatch;
      if (rule === null) throw new Error(`${name}: the kernel has no dispatch rule`);
      let items = evaluate(rule.items, params, "params field");
      if (items < 0n) items = 0n;
      const per = BigInt(rule.per_workgroup), fold = BigInt(rule.fold);
      const n = (items + per - 1n) / per;
      let x = n, y = 1n;
      if (n > fold) {
        y = (n + fold - 1n) / fold;
        x = rule.balanced ? (n + y - 1n) / y : fold;
      }
      if (x > BigInt(MAX_PER_DIMENSION) || y > BigInt(MAX_PER_DIMENSION)) {
        throw new Error(`${name}: ${n} workgroups need (${x}, ${y}) with fold ${rule.fold}, past ${MAX_PER_DIMENSION} per dimension`);
      }
      return [Number(x), Number(y), 1];
    },
    paramsFor(shape, chosen = {}) {
      counts(name, "shape", shape, this.shape);
      const out = {};
      for (const p of this.params) {
        if (p.value === undefined) {
          if (chosen === null || typeof chosen !== "object" || !Object.hasOwn(chosen, p.name)) {
            throw new Error(`${name}: params field '${p.name}' has no value formula: the host chooses it (${p.meaning}); give it in chosen`);
          }
          out[p.name] = chosen[p.name];
          continue;
        }
        out[p.name] = safe(evaluate(p.value, shape, "shape variable"), `${name}: params field '${p.name}'`);
      }
      return out;
    },
    checkRequirements(params, inputs = {}) {
      checkParams(this, params);
      for (const r of this.requires) {
        const values = { ...params };
        for (const b of r.largest) {
          if (inputs === null || typeof inputs !== "object" || !Object.hasOwn(inputs, b)) {
            throw new Error(`kernel ${name} requires ${r.rule}: give the values of input '${b}' (its largest is checked)`);
          }
          values[b] = largest(b, inputs[b]);
        }
        if (!HOLDS[r.op](evaluate(r.left, values, "params field"), evaluate(r.right, values, "params field"))) {
          const shown = Object.keys(params).sort().map((k) => `${k}=${params[k]}`);
          for (const b of r.largest) shown.push(`largest ${b}=${values[b]}`);
          throw new Error(`kernel ${name} requires ${r.rule}; got ${shown.join(", ")}: ${r.says}`);
        }
      }
    },
    bufferSizes(shape) {
      counts(name, "shape", shape, this.shape);
      const out = {};
      for (const b of this.bindings) {
        if (b.access === "uniform") { out[b.name] = this.paramsSize; continue; }
        const stride = BigInt(b.elementBytes);
        const bytes = evaluate(b.elements, shape, "shape variable") * stride;
        const least = (stride + 3n) / 4n * 4n;
        const padded = (bytes + 3n) / 4n * 4n;
        out[b.name] = safe(padded > least ? padded : least, `${name}: binding '${b.name}' bytes`);
      }
      return out;
    },
  };
  return Object.freeze(v);
}

/** Every catalog variant by name. */
export const variants = Object.freeze(Object.fromEntries(
  Object.entries(INDEX).map(([name, d]) => [name, makeVariant(name, d, CODE[name])]),
));

// Python's difflib.SequenceMatcher(null, a, b).ratio(): 2 * matches / (|a| + |b|), the matches
// found as difflib finds them (the longest match, then each side of it), an element of b that
// is in more than 1% of b's 200 or more elements junk ("autojunk").
function similarity(a, b) {
  a = Array.from(a);
  b = Array.from(b);
  const b2j = new Map();
  b.forEach((c, j) => (b2j.has(c) ? b2j.get(c).push(j) : b2j.set(c, [j])));
  if (b.length >= 200) {
    const most = Math.floor(b.length / 100) + 1;
    for (const [c, js] of [...b2j]) if (js.length > most) b2j.delete(c);
  }
  const longest = (alo, ahi, blo, bhi) => {
    let besti = alo, bestj = blo, best = 0;
    let j2len = new Map();
    for (let i = alo; i < ahi; i++) {
      const next = new Map();
      for (const j of b2j.get(a[i]) ?? []) {
        if (j < blo) continue;
        if (j >= bhi) break;
        const k = (j2len.get(j - 1) ?? 0) + 1;
        next.set(j, k);
        if (k > best) [besti, bestj, best] = [i - k + 1, j - k + 1, k];
      }
      j2len = next;
    }
    while (besti > alo && bestj > blo && a[besti - 1] === b[bestj - 1]) [besti, bestj, best] = [besti - 1, bestj - 1, best + 1];
    while (besti + best < ahi && bestj + best < bhi && a[besti + best] === b[bestj + best]) best++;
    return [besti, bestj, best];
  };
  let matches = 0;
  const queue = [[0, a.length, 0, b.length]];
  while (queue.length) {
    const [alo, ahi, blo, bhi] = queue.pop();
    const [i, j, k] = longest(alo, ahi, blo, bhi);
    if (!k) continue;
    matches += k;
    if (alo < i && blo < j) queue.push([alo, i, blo, j]);
    if (i + k < ahi && j + k < bhi) queue.push([i + k, ahi, j + k, bhi]);
  }
  return a.length + b.length ? (2 * matches) / (a.length + b.length) : 1;
}

// Python's difflib.get_close_matches(word, candidates, n, cutoff): the best n of those at least
// cutoff similar to word, the higher score first, then the later name.
function closeMatches(word, candidates, n, cutoff) {
  return candidates
    .map((x) => [similarity(x, word), x])
    .filter(([score]) => score >= cutoff)
    .sort(([s, x], [t, y]) => t - s || (x < y ? 1 : x > y ? -1 : 0))
    .slice(0, n)
    .map(([, x]) => x);
}

// "; did you mean 'a' or 'b'?" naming the variants spelled like `name`, or the beginning of a
// name that `name` misspells; "" where nothing is near (Python's kvdsl.catalog.did_you_mean).
function didYouMean(name) {
  const names = Object.keys(variants);
  const near = closeMatches(name, names, 3, 0.75);
  if (near.length) return `; did you mean ${near.map((x) => `'${x}'`).join(" or ")}?`;
  const n = Array.from(name).length;
  const beginnings = new Set();
  for (const v of names) {
    const chars = Array.from(v);
    for (const k of [n - 1, n, n + 1]) if (k > 0 && k < chars.length) beginnings.add(chars.slice(0, k).join(""));
  }
  const begins = closeMatches(name, [...beginnings], 1, 0.8);
  return begins.length ? `; did you mean a variant beginning '${begins[0]}'?` : "";
}

/** The variant called `name`; for any other name an Error suggesting the names spelled like it. */
export function variant(name) {
  if (!Object.hasOwn(variants, name)) {
    throw new Error(`unknown variant '${name}'${didYouMean(String(name))} (the catalog's ${Object.keys(variants).length} names are the keys of variants)`);
  }
  return variants[name];
}
"""

DTS = """\
// Generated by kvdsl {version}: the types of kvdsl.js. Do not edit: regenerate with `kvdsl emit`.

/** Every catalog variant by name. */
export const variants: Readonly<Record<string, Variant>>;
/** The variant called `name`; throws Error("unknown variant 'x'; did you mean 'y'? ...") for any
 * other name (the suggestion where a catalog name is spelled like it). */
export function variant(name: string): Variant;

/** Every mode of the catalog (index.schema.json's "mode"). */
export type Mode =
{modes};

export interface Variant {{
  readonly name: string;
  /** The mode (index.json's "mode"; docs/modes.md describes each). */
  readonly mode: Mode;
  /** The WGSL text (the same as emitted/<name>.wgsl). */
  readonly code: string;
  readonly entryPoint: string;
  readonly workgroupSize: readonly [number, number, number];
  /** GPUFeatureName values the device must have. */
  readonly features: readonly string[];
  /** GPU limits needed beyond WebGPU's defaults (GPUSupportedLimits names). */
  readonly limits: Readonly<Record<string, number>>;
  /** The variant's config (index.json's "config": kv_heads, head_dim, region, ...). */
  readonly config: Readonly<Record<string, unknown>>;
  /** In binding order, the uniform params binding included (last). */
  readonly bindings: readonly Binding[];
  /** The uniform struct's fields. */
  readonly params: readonly Param[];
  /** Bytes of the uniform buffer. */
  readonly paramsSize: number;
  /** The names of the shape variables bufferSizes() takes. */
  readonly shape: readonly string[];
  /** The dense modes only: bytes of one (token, head) row of K, or of V, in the cache's format,
   * its scales included (index.json's "bytes_per_token_head"). */
  readonly bytesPerTokenHead?: number;
  /** The paged modes only: the page geometry (index.json's "pages"): tokens per page, the
   * order of a page's rows, whether K and V have a pool each or share one, the
   * host values and bytes of one page of K (or V), the host values between pages of a pool,
   * and the f32 values of one page of side scales (0 inline). */
  readonly pages?: Readonly<{{
    pageSize: number; layout: {layouts}; pool: {pools};
    pageValues: number; pageBytes: number; pageStrideValues: number; scalePageValues: number;
  }}>;
  /** The qkv mode only: the least bytes one dispatch moves, an expression of the shape
   * variables (index.json's "bytes_moved"). */
  readonly bytesMoved?: string;
  /** What the kernel requires of the params (and of the largest value of an integer input,
   * for the names in `largest`) before a dispatch; checkRequirements() checks them. */
  readonly requires: readonly Requirement[];
  /** One entry per binding: visibility COMPUTE, buffer.type by access. */
  layoutEntries(): GPUBindGroupLayoutEntry[];
  /** The uniform buffer's bytes; throws naming a missing or unknown field or a bad value. */
  paramsBytes(params: Record<string, number>): ArrayBuffer;
  /** The dispatch's workgroup counts; throws when they do not fit 65535 per dimension. */
  workgroups(params: Record<string, number>): [number, number, number];
  /** The params for `shape` (each field's `value` evaluated; a field without one, the f32
   * scale and softcap of attend, from `chosen`); throws naming a missing or unknown shape
   * variable, or a field without a value formula that `chosen` lacks. */
  paramsFor(shape: Record<string, number>, chosen?: Record<string, number>): Record<string, number>;
  /** Throws Error("kernel <name> requires <rule>; got <values>: <what it keeps true>") at the
   * first requirement `params` break; `inputs` gives each integer input a requirement reads
   * (`seqlens_k`): its values or their largest. Call before dispatch. */
  checkRequirements(
    params: Record<string, number>,
    inputs?: Record<string, number | ArrayLike<number>>,
  ): void;
  /** Bytes per binding name: storage bindings padded to a multiple of 4 and at least one
   * element, the params binding paramsSize; throws naming a missing or unknown shape variable. */
  bufferSizes(shape: Record<string, number>): Record<string, number>;
}}

export interface Binding {{
  readonly binding: number;
  readonly name: string;
  readonly access: "read" | "read_write" | "uniform";
  /** What the kernel does with the binding: loads (read), stores (write) or both. */
  readonly use: "read" | "write" | "read_write";
  /** The WGSL type, e.g. "array<vec4<f32>>". */
  readonly type: string;
  /** Bytes per element of the WGSL array (the params binding: its whole size). */
  readonly elementBytes: number;
  /** The element count as an expression of the shape variables (docs/host.md). */
  readonly elements: string;
  /** The scalar type of the host's data where it is not the WGSL element's: "f16" for f16
   * values carried in u32 words. */
  readonly data?: "f16" | "f32" | "i32" | "u32";
}}

export interface Param {{
  readonly name: string;
  readonly type: "u32" | "i32" | "f32";
  /** Byte offset in the uniform buffer. */
  readonly offset: number;
  /** What the field means, in one line. */
  readonly meaning: string;
  /** Its value for a shape: an expression of the shape variables (absent where the host
   * chooses it). */
  readonly value?: string;
}}

export interface Requirement {{
  /** The kernel's words for it, as errors show it. */
  readonly rule: string;
  /** `left op right`: expressions of the params fields and the names in `largest`. */
  readonly left: string;
  readonly op: "<=" | ">=" | "<" | ">";
  readonly right: string;
  /** Names that stand for the largest value of that integer input binding. */
  readonly largest: readonly string[];
  /** What it keeps true, in words. */
  readonly says: string;
}}

/** The parts of WebGPU's GPUBindGroupLayoutEntry kvdsl.js fills in (structurally compatible
 * with @webgpu/types' type). */
export interface GPUBindGroupLayoutEntry {{
  binding: number;
  visibility: number;
  buffer: {{ type: "read-only-storage" | "storage" | "uniform" }};
}}
"""


def render(index: dict[str, dict[str, Any]], code: dict[str, str]) -> tuple[str, str]:
    """The text of ``kvdsl.js`` and ``kvdsl.d.ts`` for ``index`` (name → entry) and ``code``
    (name → WGSL file text)."""
    lines = [
        f"// Generated by kvdsl {__version__} from the catalog. Do not edit: regenerate with "
        "`kvdsl emit`.",
        "// Every catalog variant's host contract (the data of index.json) and WGSL, as an ES",
        "// module with no imports; docs/host.md describes it. Types: kvdsl.d.ts.",
        "",
        "const INDEX = {",
    ]
    lines += [
        f"  {json.dumps(name)}: {json.dumps(e, sort_keys=True)}," for name, e in index.items()
    ]
    lines += ["};", "", "const CODE = {"]
    lines += [f"  {json.dumps(name)}: {json.dumps(code[name])}," for name in index]
    lines += ["};"]
    js = "\n".join(lines) + "\n" + _RUNTIME

    def union(values) -> str:
        return " | ".join(json.dumps(v.value) for v in values)

    dts = DTS.format(
        version=__version__, modes=dts_modes(), layouts=union(PageLayout), pools=union(Pool)
    )
    return js, dts


def dts_modes() -> str:
    """The modes index.json's schema allows, as the lines of a TypeScript union of strings."""
    from kvdsl.contract.schema import schema

    modes = schema()["$defs"]["variant"]["properties"]["mode"]["enum"]
    return "\n".join(f"  | {json.dumps(m)}" for m in modes)
