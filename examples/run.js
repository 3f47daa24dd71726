// Run one kvdsl variant with WebGPU through the npm package kvdsl (emitted/): size the buffers
// from a shape, write the params, fill the bindings the kernel reads with values a model could
// hold (valid page tables, slots and seqlens_k), dispatch, read the bindings it writes back.
// index.html drives it (its import map points "kvdsl" at ../emitted/kvdsl.js) and check.js
// computes what the simple modes must write; docs/host.md describes the contract they use.
import { variant } from "kvdsl";

// The params of `v` for `shape` (the shape variables of docs/host.md): each field's value
// formula, v.params[i].value, evaluated by the module; the fields without one (attend's f32
// scale and softcap, the model's numbers) from `chosen`.
export function paramsFor(v, shape, chosen = CHOSEN) {
  return v.paramsFor(shape, chosen);
}

// The model's numbers the params take as they are: attend's logit scale and soft-cap.
export const CHOSEN = { scale: 0.125, softcap: 30 };

// A shape small enough to read, valid for every mode (shapeFor widens `positions` for a
// paged variant's page size).
export const SHAPE = {
  batch: 2, seq: 8, pastSeq: 4, keySeq: 3, totalSeq: 16, kvSeq: 5, rows: 3, perChannel: 0,
  positions: 32, headBase: 0, slices: 1, batchBase: 0, pages: 4, maxPages: 2, copies: 1, live: 2,
  window: 16, queries: 1, chunk: 8, chunks: 1,
};

// The shape variables of `v` from `shape`: a paged variant's rotary tables cover its page
// table's positions (maxPages pages) and its slot mapping's pool.
export function shapeFor(v, shape = SHAPE) {
  const own = Object.fromEntries(v.shape.map((k) => [k, shape[k]]));
  const pageSize = v.config.page_size;
  if ("positions" in own && pageSize) own.positions = Math.max(own.positions, shape.maxPages * pageSize);
  return own;
}

// A small deterministic generator (mulberry32): the same seed gives the same inputs.
export function generator(seed) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return {
    int: (lo, hi) => lo + Math.floor(next() * (hi - lo + 1)), // lo..hi inclusive
    uniform: (lo, hi) => lo + next() * (hi - lo),
  };
}

// 0 .. n-1 shuffled by `r`.
function permutation(n, r) {
  const ids = Array.from({ length: n }, (_, i) => i);
  for (let i = n - 1; i > 0; i--) {
    const j = r.int(0, i);
    [ids[i], ids[j]] = [ids[j], ids[i]];
  }
  return ids;
}

// seqlens_k (each sequence's last token after the step) of mode `v.mode` for shape `s`: inside
// the cache's capacity, at least the new tokens; a paged_window's tables full (so that the
// window releases their first pages), another page table's partly.
export function seqlensFor(v, s) {
  const pageSize = v.config.page_size;
  const last = (capacity, least = 0) =>
    Array.from({ length: s.batch }, (_, b) => Math.max(least, capacity - 1 - 3 * b));
  switch (v.mode) {
    case "paged_window":
      return Array.from({ length: s.batch }, (_, b) => s.maxPages * pageSize - 1 - b);
    case "paged_append": case "paged_qkv": case "paged_read":
      return last(s.maxPages * pageSize - 5);
    case "attend": {
      const rows = v.config.cache === "paged" ? s.maxPages * pageSize : s.seq;
      return last(Math.min(rows, s.chunk * s.chunks), s.queries - 1);
    }
    case "append_quant":
      return last(s.totalSeq, s.seq - 1);
    default:
      return last(s.seq, (s.keySeq ?? 1) - 1);
  }
}

// The address tables of `v` for shape `s`: a page table of distinct pages of the pool (a
// paged_window's naming every page once), distinct slots and their rotary positions, copy pairs
// of distinct pages (no destination another pair's source), live pages.
export function tablesFor(v, s, seqlens, r) {
  const tokens = v.mode === "paged_read" ? s.batch * s.seq : s.batch * (s.keySeq ?? 0);
  if (v.mode === "paged_window") return { page_table: permutation(s.batch * s.maxPages, r) };
  if (v.mode === "paged_copy") {
    const ids = permutation(s.pages, r);
    return { page_pairs: Array.from({ length: s.copies }, (_, i) => [ids[i], ids[s.copies + i]]).flat() };
  }
  if (v.mode === "paged_compact") return { live_pages: permutation(s.pages, r).slice(0, s.live) };
  if (!v.bindings.some((b) => b.name === "page_table" || b.name === "slot_mapping")) return {};
  return {
    page_table: permutation(s.pages, r).slice(0, s.batch * s.maxPages),
    slot_mapping: permutation(s.pages * (v.config.page_size ?? 1), r).slice(0, tokens),
    token_positions: Array.from({ length: tokens }, () => r.int(0, s.positions - 1)),
  };
}

// The float16 bits of `x` (round to nearest even; the values here stay in the normal range).
export function halfBits(x) {
  const f = new Float32Array([x]);
  const u = new Uint32Array(f.buffer)[0];
  const sign = (u >>> 16) & 0x8000;
  const exp = ((u >>> 23) & 0xff) - 127 + 15;
  let mant = u & 0x7fffff;
  let h = sign | (exp << 10) | (mant >>> 13);
  const rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest === 0x1000 && (h & 1))) h += 1;
  return h;
}

// The host scalar of binding `b` ("f16" for halves carried in u32 words).
export function scalarOf(b) {
  return b.data ?? b.type.match(/(f32|i32|u32|f16)>*$/)[1];
}

// The bytes of a binding the kernel loads (use "read" or "read_write"): seqlens_k and the
// address tables as above; scales positive, rotary tables in [-1, 1], norm weights near 1,
// attention partials positive; other floats in ±[0.25, 2); u32 words (dense formats' codes and
// scales) two f16 halves of that range, finite read either way; other integers small.
export function inputBytes(b, bytes, given, r) {
  const buf = new ArrayBuffer(bytes);
  const scalar = scalarOf(b);
  const floats = () => new Float32Array(buf);
  const fill = (view, f) => view.forEach((_, i, a) => (a[i] = f()));
  const random = () => r.uniform(0.25, 2) * (r.int(0, 1) ? 1 : -1);
  if (b.name in given) new Int32Array(buf).set(given[b.name]);
  else if (scalar === "f32" && /scale/.test(b.name)) fill(floats(), () => r.uniform(0.01, 0.3));
  else if (b.name === "cos_cache" || b.name === "sin_cache") fill(floats(), () => r.uniform(-1, 1));
  else if (/norm_weight$/.test(b.name)) fill(floats(), () => r.uniform(0.5, 1.5));
  else if (b.name === "partials") fill(floats(), () => r.uniform(0.25, 2));
  else if (scalar === "f32") fill(floats(), random);
  else if (scalar === "f16" || scalar === "u32") fill(new Uint16Array(buf), () => halfBits(random()));
  else fill(new Int32Array(buf), () => r.int(-100, 100) || 1);
  return buf;
}

// The typed array of binding `b`'s host scalars over `bytes` (f16 as their bits).
export function view(b, bytes) {
  const type = { f32: Float32Array, i32: Int32Array, u32: Uint32Array, f16: Uint16Array }[scalarOf(b)];
  return new type(bytes);
}

// A seed from a variant's name: the same variant gets the same inputs on every run.
function seedOf(name) {
  let h = 2166136261;
  for (const c of name) h = Math.imul(h ^ c.charCodeAt(0), 16777619);
  return h >>> 0;
}

// Run variant `name` on `device` for `shape`: the bindings the kernel loads (use "read" or
// "read_write") filled as above, those it only writes (use "write") poisoned with 0xff bytes
// (NaN, or -1 as an integer) so that an element it did not write shows. Returns the shape, the
// params, the dispatch, the buffer sizes, each binding's bytes before the run (`inputs`) and,
// for every binding the kernel writes, its bytes after (`outputs`).
export async function run(device, name, shape = SHAPE) {
  const v = variant(name);
  const own = shapeFor(v, shape);
  const sizes = v.bufferSizes(own);
  const params = paramsFor(v, own);
  const seqlens = seqlensFor(v, own);
  v.checkRequirements(params, { seqlens_k: seqlens }); // what the kernel requires of its inputs
  const r = generator(seedOf(name));
  const given = { seqlens_k: seqlens, ...tablesFor(v, own, seqlens, r) };
  const module = device.createShaderModule({ code: v.code });
  const layout = device.createBindGroupLayout({ entries: v.layoutEntries() });
  const pipeline = device.createComputePipeline({
    layout: device.createPipelineLayout({ bindGroupLayouts: [layout] }),
    compute: { module, entryPoint: v.entryPoint },
  });
  const S = GPUBufferUsage;
  const buffers = {};
  const inputs = {};
  for (const b of v.bindings) {
    const usage = b.access === "uniform" ? S.UNIFORM : S.STORAGE | S.COPY_SRC;
    buffers[b.name] = device.createBuffer({ size: sizes[b.name], usage: usage | S.COPY_DST });
    inputs[b.name] =
      b.access === "uniform" ? v.paramsBytes(params)
      : b.use === "write" ? new Uint8Array(sizes[b.name]).fill(0xff).buffer
      : inputBytes(b, sizes[b.name], given, r);
    device.queue.writeBuffer(buffers[b.name], 0, inputs[b.name]);
  }
  const bindGroup = device.createBindGroup({
    layout,
    entries: v.bindings.map((b) => ({ binding: b.binding, resource: { buffer: buffers[b.name] } })),
  });
  const encoder = device.createCommandEncoder();
  const pass = encoder.beginComputePass();
  pass.setPipeline(pipeline);
  pass.setBindGroup(0, bindGroup);
  pass.dispatchWorkgroups(...v.workgroups(params));
  pass.end();
  const written = v.bindings.filter((b) => b.use !== "read");
  const reads = written.map((b) => {
    const read = device.createBuffer({ size: sizes[b.name], usage: S.MAP_READ | S.COPY_DST });
    encoder.copyBufferToBuffer(buffers[b.name], 0, read, 0, sizes[b.name]);
    return read;
  });
  device.queue.submit([encoder.finish()]);
  const result = { shape: own, params, workgroups: v.workgroups(params), sizes, inputs, outputs: {} };
  for (const [i, b] of written.entries()) {
    await reads[i].mapAsync(GPUMapMode.READ);
    result.outputs[b.name] = reads[i].getMappedRange().slice(0);
    reads[i].unmap();
  }
  return result;
}
