// What a run of run.js must have written, computed here from its inputs for the modes whose
// meaning is a few lines (CHECKED), and the comparison of a run's outputs with it. The other
// modes' outputs are shown, not checked: tests/ holds every variant to the interpreter.
import { scalarOf, view } from "./run.js";

// The modes whose written bindings this page computes itself.
export const CHECKED = ["copy", "transpose", "merge", "paged_copy", "paged_compact", "paged_window"];

// The value of f16 bits `h`.
export function halfValue(h) {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >>> 10) & 0x1f;
  const mant = h & 0x3ff;
  if (exp === 0x1f) return mant ? NaN : sign * Infinity;
  if (exp === 0) return sign * mant * 2 ** -24;
  return sign * (1 + mant / 1024) * 2 ** (exp - 15);
}

// Binding `b`'s host values in `bytes` (f16 bits decoded).
export function values(b, bytes) {
  const raw = Array.from(view(b, bytes));
  return scalarOf(b) === "f16" ? raw.map(halfValue) : raw;
}

// What `b` holds in its poison (0xff bytes): NaN as a float, -1 or 0xffffffff as an integer.
function isPoison(b, x) {
  return Number.isNaN(x) || x === -1 || x === 0xffffffff;
}

// The expected values of each binding variant `v` writes, for run.js's `result`: name ->
// { index, want, tol } (the elements the kernel writes, their values, and each one's allowed
// difference: 0, or one f16 step where f32 inputs are stored as f16); null for a mode not in
// CHECKED (or windowed: it writes the slices its params name).
export function expected(v, result) {
  if (!CHECKED.includes(v.mode) || v.config.window) return null;
  const s = result.shape;
  const binding = Object.fromEntries(v.bindings.map((b) => [b.name, b]));
  const input = (name) => values(binding[name], result.inputs[name]);
  const ints = (name) => Array.from(new Int32Array(result.inputs[name]));
  const out = {};
  // out[o] = src[gather(o)] for every element o of `name`, from binding `from`
  const gather = (name, from, count, at) => {
    const src = input(from);
    const convert = scalarOf(binding[from]) === "f32" && scalarOf(binding[name]) === "f16";
    const index = Array.from({ length: count }, (_, o) => o);
    const want = index.map((o) => src[at(o)]);
    const tol = want.map((x) => (convert ? Math.abs(x) * 2 ** -10 : 0));
    out[name] = { index, want, tol };
  };
  const H = v.config.kv_heads, D = v.config.head_dim;
  switch (v.mode) {
    case "copy":
      for (const [o, i] of [["present_key", "src_k"], ["present_value", "src_v"]]) {
        gather(o, i, view(binding[o], result.outputs[o]).length, (e) => e);
      }
      break;
    case "transpose": {
      const S = s.kvSeq;
      for (const [o, i] of [["present_key", "key"], ["present_value", "value"]]) {
        // present [B, H, S, D] from key [B, S, H, D]
        gather(o, i, s.batch * H * S * D, (e) => {
          const d = e % D, t = Math.floor(e / D) % S, h = Math.floor(e / (D * S)) % H;
          const b = Math.floor(e / (D * S * H));
          return ((b * S + t) * H + h) * D + d;
        });
      }
      break;
    }
    case "merge": {
      const P = s.pastSeq, K = s.keySeq, S = P + K;
      for (const [o, past, add] of [["present_key", "past_k", "new_k"], ["present_value", "past_v", "new_v"]]) {
        // present [B, H, S, D]: rows t < pastSeq from past [B, H, pastSeq, D], the others from
        // new [B, keySeq, H, D]
        const from = [input(past), input(add)];
        const convert = [past, add].map((n) => scalarOf(binding[n]) === "f32" && scalarOf(binding[o]) === "f16");
        const index = [], want = [], tol = [];
        for (let e = 0; e < s.batch * H * S * D; e++) {
          const d = e % D, t = Math.floor(e / D) % S, h = Math.floor(e / (D * S)) % H;
          const b = Math.floor(e / (D * S * H));
          const which = t < P ? 0 : 1;
          const x = which === 0 ? from[0][((b * H + h) * P + t) * D + d] : from[1][((b * K + t - P) * H + h) * D + d];
          index.push(e);
          want.push(x);
          tol.push(convert[which] ? Math.abs(x) * 2 ** -10 : 0);
        }
        out[o] = { index, want, tol };
      }
      break;
    }
    case "paged_copy": {
      // every page as it was, but each pair's destination a copy of its source
      const pairs = ints("page_pairs");
      for (const b of v.bindings.filter((b) => b.use === "read_write")) {
        const before = input(b.name);
        const page = before.length / s.pages;
        const want = before.slice();
        const dst = new Set();
        for (let i = 0; i < pairs.length; i += 2) {
          dst.add(pairs[i + 1]);
          for (let k = 0; k < page; k++) want[pairs[i + 1] * page + k] = before[pairs[i] * page + k];
        }
        // the destination pages first (what the page shows), then the pages left as they were
        const pages = [...dst, ...Array.from({ length: s.pages }, (_, p) => p).filter((p) => !dst.has(p))];
        const index = pages.flatMap((p) => Array.from({ length: page }, (_, k) => p * page + k));
        out[b.name] = { index, want: index.map((e) => want[e]), tol: index.map(() => 0) };
      }
      break;
    }
    case "paged_compact": {
      // page i of the compact pool is page live_pages[i] of the pool
      const live = ints("live_pages");
      const from = { compact_key: "key_pages", compact_value: "value_pages", compact_kv: "kv_pages", compact_scales: "scale_pages" };
      for (const b of v.bindings.filter((b) => b.use === "write")) {
        const page = input(from[b.name]).length / s.pages;
        gather(b.name, from[b.name], live.length * page, (e) => live[Math.floor(e / page)] * page + (e % page));
      }
      break;
    }
    case "paged_window": {
      // an entry whose page ends at or before the window's first token: -1, its id freed
      const table = ints("page_table"), seqlens = ints("seqlens_k");
      const P = v.config.page_size;
      const gone = table.map((_, e) => {
        const b = Math.floor(e / s.maxPages), i = e % s.maxPages;
        const first = Math.max(Math.max(seqlens[b], -1) + 1 - s.window, 0);
        return (i + 1) * P <= first;
      });
      const index = table.map((_, e) => e);
      const zero = table.map(() => 0);
      out.page_table = { index, want: table.map((id, e) => (gone[e] ? -1 : id)), tol: zero };
      out.freed_pages = { index, want: table.map((id, e) => (gone[e] ? id : -1)), tol: zero };
      break;
    }
  }
  return out;
}

// Per binding `v` writes: { name, type, got (the written region's values, or where nothing is
// computed the elements not holding the poison), want (or null), poisoned (elements of the
// region still holding the poison where something else was due, or of the whole binding where
// nothing is computed),
// differ (elements off by more than their tol), first (the first that differs, or null) }.
export function compare(v, result) {
  const due = expected(v, result);
  const rows = [];
  for (const b of v.bindings.filter((b) => b.use !== "read")) {
    const got = values(b, result.outputs[b.name]);
    const type = scalarOf(b);
    if (due === null) {
      const written = got.filter((x) => !isPoison(b, x));
      const poisoned = got.length - written.length;
      rows.push({ name: b.name, type, got: written, want: null, poisoned, differ: 0, first: null, size: got.length });
      continue;
    }
    const { index, want, tol } = due[b.name];
    const region = index.map((e) => got[e]);
    let differ = 0, poisoned = 0, first = null;
    region.forEach((x, k) => {
      if (Math.abs(x - want[k]) <= tol[k] || Object.is(x, want[k])) return;
      differ++;
      if (isPoison(b, x) && !isPoison(b, want[k])) poisoned++;
      if (first === null) first = { at: index[k], got: x, want: want[k] };
    });
    rows.push({ name: b.name, type, got: region, want, poisoned, differ, first, size: got.length });
  }
  return { checked: due !== null, rows, passed: due !== null && rows.every((r) => r.differ === 0) };
}

// `xs` as text, `perLine` values to a line, each line indented.
export function wrap(xs, perLine = 8, indent = "    ") {
  const text = xs.map((x) => (Number.isInteger(x) ? String(x) : Number.isNaN(x) ? "NaN" : x.toPrecision(5)));
  const lines = [];
  for (let i = 0; i < text.length; i += perLine) lines.push(indent + text.slice(i, i + perLine).join(", "));
  return lines.join("\n");
}
