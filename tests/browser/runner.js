// A WebGPU host for kvdsl's kernels that knows nothing of kvdsl but the npm package kvdsl (the
// emitted ES module, installed from its tarball; runner.html's import map finds it): it sizes
// buffers with bufferSizes(), writes params with paramsBytes(), builds the pipeline from code and
// layoutEntries() and dispatches workgroups(). tests/browser drives it through Playwright;
// runner.html puts the exports below on window.kvdslRunner.
import * as kvdsl from "kvdsl";

const READ_WRITE = "read_write";
const UNIFORM = "uniform";

// ---- bytes <-> base64 (Playwright passes JSON; binary travels as base64) ----

export function toBase64(bytes) {
  const u8 = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes);
  let s = "";
  for (let i = 0; i < u8.length; i += 0x8000) {
    s += String.fromCharCode.apply(null, u8.subarray(i, i + 0x8000));
  }
  return btoa(s);
}

export function fromBase64(text) {
  const s = atob(text);
  const u8 = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) u8[i] = s.charCodeAt(i);
  return u8;
}

// ---- adapter and devices ----

let adapter = null;
const devices = new Map(); // features and limits (JSON) -> GPUDevice

// A fresh adapter: WebGPU lets an adapter make one device only.
async function requestAdapter() {
  if (!navigator.gpu) throw new Error("this browser has no navigator.gpu (WebGPU is off)");
  const a = await navigator.gpu.requestAdapter();
  if (a === null) throw new Error("navigator.gpu.requestAdapter() gave no adapter");
  return a;
}

// The adapter whose info, features and limits the runner reads (it makes no device).
async function getAdapter() {
  if (adapter === null) adapter = await requestAdapter();
  return adapter;
}

// The adapter as the test reports it: vendor, architecture, features, subgroup sizes.
export async function adapterInfo() {
  const a = await getAdapter();
  return {
    vendor: a.info.vendor,
    architecture: a.info.architecture,
    device: a.info.device,
    description: a.info.description,
    features: [...a.features].sort(),
    subgroupMinSize: a.info.subgroupMinSize ?? null,
    subgroupMaxSize: a.info.subgroupMaxSize ?? null,
    userAgent: navigator.userAgent,
  };
}

// The features of v the adapter lacks (empty: it can run v).
async function lacking(v) {
  const a = await getAdapter();
  return v.features.filter((f) => !a.features.has(f));
}

// The limits of v past what the adapter offers: {limit: {need, offers}} (empty: it can run v).
async function shortOf(v) {
  const a = await getAdapter();
  const short = {};
  for (const [name, value] of Object.entries(v.limits)) {
    if (!(name in a.limits)) throw new Error(`${v.name}: limits names '${name}', which WebGPU does not know`);
    if (a.limits[name] < value) short[name] = { need: value, offers: a.limits[name] };
  }
  return short;
}

// A device with v's features and limits; one per distinct set, made again if lost.
async function deviceFor(v) {
  const a = await getAdapter();
  for (const [name, value] of Object.entries(v.limits)) {
    if (!(name in a.limits)) throw new Error(`${v.name}: limits names '${name}', which WebGPU does not know`);
    if (a.limits[name] < value) {
      throw new Error(`${v.name}: needs limit ${name} = ${value}; the adapter offers ${a.limits[name]}`);
    }
  }
  const key = JSON.stringify([[...v.features].sort(), Object.entries(v.limits).sort()]);
  let device = devices.get(key);
  if (device === undefined) {
    device = await (await requestAdapter()).requestDevice({
      requiredFeatures: v.features,
      requiredLimits: v.limits,
    });
    devices.set(key, device);
    device.lost.then(() => devices.delete(key));
  }
  return device;
}

// ---- one dispatch ----

const pipelines = new Map(); // device -> (variant name -> {pipeline, layout})

async function pipelineFor(device, v) {
  let byName = pipelines.get(device);
  if (byName === undefined) pipelines.set(device, (byName = new Map()));
  let made = byName.get(v.name);
  if (made === undefined) {
    const module = device.createShaderModule({ label: v.name, code: v.code });
    const info = await module.getCompilationInfo();
    const errors = info.messages.filter((m) => m.type === "error");
    if (errors.length) {
      throw new Error(
        `${v.name}: the browser's WGSL compiler refuses the shader: ` +
          errors.map((m) => `${m.lineNum}:${m.linePos} ${m.message}`).join("; ")
      );
    }
    const layout = device.createBindGroupLayout({ label: v.name, entries: v.layoutEntries() });
    const pipeline = await device.createComputePipelineAsync({
      label: v.name,
      layout: device.createPipelineLayout({ bindGroupLayouts: [layout] }),
      compute: { module, entryPoint: v.entryPoint },
    });
    made = { pipeline, layout };
    byName.set(v.name, made);
  }
  return made;
}

// Upload `inputs` (binding name -> bytes; every storage binding), write `params`, dispatch once
// and read back every read_write binding. The contract is checked on the way: each binding's
// bytes are exactly bufferSizes(shape) of it, the params buffer exactly paramsSize.
export async function dispatch(v, shape, params, inputs) {
  const device = await deviceFor(v);
  const sizes = v.bufferSizes(shape);
  const named = new Set(v.bindings.map((b) => b.name));
  for (const name of Object.keys(inputs)) {
    if (!named.has(name)) throw new Error(`${v.name}: bytes given for '${name}', which is no binding`);
  }
  for (const name of Object.keys(sizes)) {
    if (!named.has(name)) throw new Error(`${v.name}: bufferSizes() names '${name}', which is no binding`);
  }
  device.pushErrorScope("validation");
  device.pushErrorScope("out-of-memory");
  let staging, buffers, workgroups;
  try {
    ({ staging, buffers, workgroups } = await encode(device, v, sizes, shape, params, inputs));
  } finally {
    const oom = await device.popErrorScope();
    const invalid = await device.popErrorScope();
    const problem = invalid ?? oom;
    if (problem) throw new Error(`${v.name}: WebGPU error: ${problem.message}`);
  }
  const outputs = {};
  for (const [name, dst] of Object.entries(staging)) {
    await dst.mapAsync(GPUMapMode.READ);
    outputs[name] = new Uint8Array(dst.getMappedRange()).slice();
    dst.unmap();
    dst.destroy();
  }
  for (const buffer of Object.values(buffers)) buffer.destroy();
  return { outputs, workgroups };
}

// Buffers made and filled, the dispatch and the copies to read back encoded and submitted.
async function encode(device, v, sizes, shape, params, inputs) {
  const { pipeline, layout } = await pipelineFor(device, v);
  const buffers = {};
  const entries = [];
  for (const b of v.bindings) {
    const size = sizes[b.name];
    if (!Number.isInteger(size) || size <= 0 || size % 4) {
      throw new Error(`${v.name}: bufferSizes() gives binding '${b.name}' ${size} bytes, not a positive multiple of 4`);
    }
    let bytes;
    let usage;
    if (b.access === UNIFORM) {
      bytes = new Uint8Array(v.paramsBytes(params));
      if (size !== v.paramsSize) {
        throw new Error(`${v.name}: bufferSizes() gives the params binding ${size} bytes, paramsSize is ${v.paramsSize}`);
      }
      usage = GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST;
    } else {
      if (!(b.name in inputs)) throw new Error(`${v.name}: no bytes given for binding '${b.name}'`);
      bytes = inputs[b.name];
      usage = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST;
      if (b.access === READ_WRITE) usage |= GPUBufferUsage.COPY_SRC;
    }
    if (bytes.byteLength !== size) {
      throw new Error(
        `${v.name}: binding '${b.name}' holds ${bytes.byteLength} bytes, ` +
          `bufferSizes(${JSON.stringify(shape)}) gives ${size}`
      );
    }
    const buffer = device.createBuffer({ label: `${v.name}.${b.name}`, size, usage });
    device.queue.writeBuffer(buffer, 0, bytes);
    buffers[b.name] = buffer;
    entries.push({ binding: b.binding, resource: { buffer } });
  }
  const bindGroup = device.createBindGroup({ label: v.name, layout, entries });
  const workgroups = v.workgroups(params);
  const encoder = device.createCommandEncoder({ label: v.name });
  const pass = encoder.beginComputePass({ label: v.name });
  pass.setPipeline(pipeline);
  pass.setBindGroup(0, bindGroup);
  pass.dispatchWorkgroups(...workgroups);
  pass.end();
  const staging = {};
  for (const b of v.bindings) {
    if (b.access !== READ_WRITE) continue;
    const src = buffers[b.name];
    staging[b.name] = device.createBuffer({
      label: `${v.name}.${b.name} read back`,
      size: src.size,
      usage: GPUBufferUsage.COPY_DST | GPUBufferUsage.MAP_READ,
    });
    encoder.copyBufferToBuffer(src, 0, staging[b.name], 0, src.size);
  }
  device.queue.submit([encoder.finish()]);
  return { staging, buffers, workgroups };
}

// ---- what Python asks for ----

// One case given by Python: {name, shape, params, inputs: {binding: base64}}. Returns
// {name, outputs: {binding: base64}, workgroups}, or {name, lacking: [features]} where the
// adapter lacks a feature the variant needs, or {name, short: {limit: {need, offers}}} where it
// offers less of a limit than the variant needs (nothing runs), or {name, error} naming what
// failed.
export async function runCase(request) {
  const { name, shape, params, inputs } = request;
  try {
    const v = kvdsl.variant(name);
    const missing = await lacking(v);
    if (missing.length) return { name, lacking: missing };
    const short = await shortOf(v);
    if (Object.keys(short).length) return { name, short };
    const bytes = {};
    for (const [k, text] of Object.entries(inputs)) bytes[k] = fromBase64(text);
    const { outputs, workgroups } = await dispatch(v, shape, params, bytes);
    const out = {};
    for (const [k, u8] of Object.entries(outputs)) out[k] = toBase64(u8);
    return { name, outputs: out, workgroups };
  } catch (err) {
    return { name, error: String(err && err.stack ? err.message : err) };
  }
}

export async function runCases(requests) {
  const results = [];
  for (const r of requests) results.push(await runCase(r));
  return results;
}

// A shader needing `feature` on a device without it must be refused: the variant's features
// list is what its code enables. Returns the compiler's error messages (empty: accepted).
export async function refusedWithout(name) {
  const v = kvdsl.variant(name);
  const device = await (await requestAdapter()).requestDevice();
  try {
    const module = device.createShaderModule({ label: name, code: v.code });
    const info = await module.getCompilationInfo();
    return info.messages.filter((m) => m.type === "error").map((m) => m.message);
  } finally {
    device.destroy();
  }
}

// The validation errors of v's bind group layout on a device at WebGPU's default limits (the
// limits v states are past them: empty would mean v does not need them).
export async function refusedAtDefaults(name) {
  const v = kvdsl.variant(name);
  const device = await (await requestAdapter()).requestDevice();
  try {
    device.pushErrorScope("validation");
    device.createBindGroupLayout({ label: name, entries: v.layoutEntries() });
    const error = await device.popErrorScope();
    return error === null ? [] : [error.message];
  } finally {
    device.destroy();
  }
}

// Every variant's name, mode and features, as the module lists them.
export function listVariants() {
  return Object.values(kvdsl.variants).map((v) => ({ name: v.name, mode: v.mode, features: v.features }));
}

// ---- a host that chooses its own shapes (the foreign-host tests) ----
//
// What a runtime does with nothing but the module: pick a shape, derive the params from the
// contract's meanings (each Param's `meaning`, with the variant's config: kv_heads, region), fill
// the inputs and dispatch. One entry per mode: a small random shape, and the params for a shape.

// A small deterministic generator (mulberry32): the same seed gives the same inputs.
function generator(seed) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return {
    next,
    int: (lo, hi) => lo + Math.floor(next() * (hi - lo + 1)), // lo..hi inclusive
    uniform: (lo, hi) => lo + next() * (hi - lo),
  };
}

function windowHost(r) {
  return { batch: r.int(2, 3), seq: r.int(6, 20), keySeq: r.int(1, 6) };
}

// A window pass (merge_share, window_shift, their dense forms) owns the appended rows (region
// "append") or the whole window (the others).
function windowParams(v, s) {
  const rows = v.config.region === "append" ? s.keySeq : s.seq;
  return { count: s.batch * v.config.kv_heads * rows, seq: s.seq, keySeq: s.keySeq };
}

const HOSTS = {
  transpose: {
    shape: (r) => ({ batch: r.int(1, 2), kvSeq: r.int(1, 9) }),
    params: (v, s) => ({ batchSize: s.batch, kvSeq: s.kvSeq }),
  },
  copy: {
    shape: (r) => ({ rows: r.int(1, 70) }),
    params: (v, s) => ({ count: s.rows }),
  },
  merge: {
    shape: (r) => ({ batch: r.int(1, 2), pastSeq: r.int(1, 12), keySeq: r.int(1, 5) }),
    params: (v, s) => ({
      count: s.batch * v.config.kv_heads * (s.pastSeq + s.keySeq),
      seq: s.pastSeq + s.keySeq,
      pastSeq: s.pastSeq,
      keySeq: s.keySeq,
    }),
  },
  // The rotary tables' rows: merge_share rotates a token by its cache row; window_shift by its
  // absolute position, up to seqlens_k + keySeq.
  merge_share: { shape: windowHost, params: windowParams, capacity: "seq", positions: (s) => s.seq },
  window_shift: {
    shape: windowHost,
    params: windowParams,
    capacity: "seq",
    positions: (s, seqlens) => Math.max(...seqlens) + s.keySeq + 1,
  },
  build: {
    shape: (r) => ({ batch: r.int(1, 2), seq: r.int(1, 20), pastSeq: r.int(0, 10) }),
    params: (v, s) => ({ count: s.batch * v.config.kv_heads * s.seq, seq: s.seq, pastSeq: s.pastSeq }),
    positions: (s) => s.pastSeq + s.seq,
  },
  build_quant: {
    shape: (r) => ({ batch: r.int(1, 2), seq: r.int(1, 20), pastSeq: r.int(0, 10), perChannel: r.int(0, 1) }),
    params: (v, s) => ({
      count: s.batch * v.config.kv_heads * s.seq,
      seq: s.seq,
      pastSeq: s.pastSeq,
      perChannel: s.perChannel,
    }),
    positions: (s) => s.pastSeq + s.seq,
  },
  append_quant: {
    shape: (r) => {
      const seq = r.int(1, 6);
      return { batch: r.int(2, 3), seq, totalSeq: seq + r.int(0, 12), perChannel: r.int(0, 1) };
    },
    params: (v, s) => ({
      count: s.batch * v.config.kv_heads * s.seq,
      seq: s.seq,
      pastSeq: 0,
      totalSeq: s.totalSeq,
      perChannel: s.perChannel,
    }),
    capacity: "totalSeq",
    positions: (s) => s.totalSeq, // a token's row in the cache, or its place among the new ones
  },
  // A dense append rotates a token by its cache row.
  dense_append: {
    shape: windowHost,
    params: (v, s) => ({ count: s.batch * v.config.kv_heads * s.keySeq, keySeq: s.keySeq, seq: s.seq }),
    capacity: "seq",
    positions: (s) => s.seq,
  },
  dense_build: {
    shape: (r) => ({ batch: r.int(1, 2), seq: r.int(1, 20), pastSeq: r.int(0, 10) }),
    params: (v, s) => ({ count: s.batch * v.config.kv_heads * s.seq, seq: s.seq, pastSeq: s.pastSeq }),
    positions: (s) => s.pastSeq + s.seq,
  },
  // A read's rows are (token, head) rows of the dense cache, its words random: every 16-bit
  // half a normal f16 and every word, read as an f32, finite and below 2 (the scales too).
  dense_read: {
    shape: (r) => ({ rows: r.int(1, 70) }),
    params: (v, s) => ({ count: s.rows }),
  },
  // The fused QKV kernel: every head of the input a row (a K head and its V head one row with
  // a dense format not split), tokens rotated by their cache row.
  qkv: {
    shape: windowHost,
    params: (v, s) => {
      const perToken = v.config.q_heads + (v.config.split ? 2 : 1) * v.config.kv_heads;
      return { count: s.batch * s.keySeq * perToken, keySeq: s.keySeq, seq: s.seq };
    },
    capacity: "seq",
    positions: (s) => s.seq,
  },
  // The dense cache passes: merge_share's retain pass and window_shift's regions over a dense
  // cache's words; a copy's dense source words are random as dense_read's.
  dense_retain: { shape: windowHost, params: windowParams, capacity: "seq" },
  dense_window_shift: {
    shape: windowHost,
    params: windowParams,
    capacity: "seq",
    positions: (s, seqlens) => Math.max(...seqlens) + s.keySeq + 1,
  },
  dense_convert: {
    shape: (r) => ({ rows: r.int(1, 70) }),
    params: (v, s) => ({ count: s.rows }),
  },
  // Paged caches: a pool of `pages` pages of `page_size` tokens. Tables hold distinct page ids
  // (one page in two tables' rows would put two tokens in one slot: a race), a few entries -1
  // (no page: skipped); slots are distinct, positions inside the rotary tables.
  paged_append: pagedWriter((v) => v.config.kv_heads),
  // The fused QKV kernel into pages: rows as qkv's, tokens placed as paged_append's.
  paged_qkv: pagedWriter((v) => v.config.q_heads + (v.config.split ? 2 : 1) * v.config.kv_heads),
  paged_read: {
    shape: (r) => pagedShape(r, { seq: r.int(1, 40) }),
    params: (v, s) => ({
      count: s.batch * v.config.kv_heads * s.seq,
      seq: s.seq,
      ...tableBound(v, s),
    }),
    seqlens: pagedSeqlens,
    tables: (v, s, seqlens, r) => pagedTables(v, s, s.batch * s.seq, r),
  },
  paged_copy: {
    shape: (r) => {
      const pages = r.int(3, 9);
      return { pages, copies: r.int(1, Math.floor(pages / 2)) };
    },
    params: (v, s) => ({ count: s.copies }),
    inout: ["key_pages", "value_pages", "kv_pages", "scale_pages"], // pages copied onto pages
    // (src, dst) pairs: distinct pages, no destination another pair's source
    tables: (v, s, seqlens, r) => {
      const ids = permutation(s.pages, r);
      const pairs = [];
      for (let i = 0; i < s.copies; i++) pairs.push(ids[i], ids[s.copies + i]);
      return { page_pairs: pairs };
    },
  },
  paged_compact: {
    shape: (r) => {
      const pages = r.int(2, 8);
      return { pages, live: r.int(1, pages) };
    },
    params: (v, s) => ({ count: s.live }),
    tables: (v, s, seqlens, r) => ({ live_pages: permutation(s.pages, r).slice(0, s.live) }),
  },
  paged_window: {
    shape: (r) => ({ batch: r.int(1, 3), maxPages: r.int(2, 7), window: r.int(1, 8) }),
    params: (v, s) => ({ count: s.batch * s.maxPages, maxPages: s.maxPages, window: s.window }),
    // tables nearly full, so that the window releases their first pages
    seqlens: (v, s, r) => {
      const p = v.config.page_size;
      return Array.from({ length: s.batch }, () => r.int((s.maxPages - 1) * p + 8, s.maxPages * p - 1));
    },
    tables: (v, s, seqlens, r) => ({ page_table: permutation(s.batch * s.maxPages, r) }),
  },
};

// Attention reads the cache: `queries` new tokens (up to the variant's max_queries) over keys cut
// into `chunks` ranges of `chunk`; a contiguous cache of capacity `seq`, or `pages` in a pool.
// The params are the contract's values, the model's scale and soft-cap given as `chosen`.
const ATTEND_CHOSEN = { scale: 0.125, softcap: 20 };

function attendShape(r, v) {
  const chunk = r.int(8, 64);
  return pagedShape(r, {
    queries: r.int(1, v.config.max_queries), chunk, chunks: r.int(1, 3), seq: r.int(8, 60),
    groups: r.int(1, 3), window: r.int(1, 40),
  });
}

// The variant's own shape variables of `s`, and its params from the contract's formulas of them
// (attention's and KIVI's hosts; the chosen scale and soft-cap as ATTEND_CHOSEN).
function contractParams(v, s) {
  return v.paramsFor(Object.fromEntries(v.shape.map((k) => [k, s[k]])), ATTEND_CHOSEN);
}

Object.assign(HOSTS, {
  attend: {
    shape: attendShape,
    params: contractParams,
    // each sequence at least its new tokens, within the chunks and the cache
    seqlens: (v, s, r) => {
      const seq = v.config.kivi_group ? s.groups * v.config.kivi_group : s.seq; // KIVI: groups
      const rows = v.config.cache === "paged" ? s.maxPages * v.config.page_size : seq;
      const most = Math.min(rows, s.chunk * s.chunks);
      return Array.from({ length: s.batch }, () => r.int(s.queries - 1, most - 1));
    },
    tables: (v, s, seqlens, r) => (
      v.config.cache === "paged" ? { page_table: permutation(s.pages, r).slice(0, s.batch * s.maxPages) } : {}
    ),
  },
  attend_merge: {
    shape: (r) => ({ batch: r.int(1, 3), queries: r.int(1, 4), chunks: r.int(1, 5) }),
    params: contractParams,
  },
});

// A paged shape: `batch` sequences of up to `maxPages` pages in a pool of `pages` (every
// table entry its own page, and a spare or two).
function pagedShape(r, extra) {
  const batch = r.int(1, 3);
  const maxPages = r.int(1, 4);
  return { batch, ...extra, maxPages, pages: batch * maxPages + r.int(0, 2) };
}

// A host of a kernel writing `keySeq` new tokens a sequence into pages, `rows(v)` rows a token.
function pagedWriter(rows) {
  return {
    shape: (r) => pagedShape(r, { keySeq: r.int(1, 6) }),
    params: (v, s) => ({ count: s.batch * s.keySeq * rows(v), keySeq: s.keySeq, ...tableBound(v, s) }),
    seqlens: pagedSeqlens,
    positions: (s) => s.maxPages * 256, // page_table: a position below maxPages pages of tokens
    tables: (v, s, seqlens, r) => pagedTables(v, s, s.batch * s.keySeq, r),
  };
}

// The params field bounding a page table's rows (page_table addressing only).
function tableBound(v, s) {
  return v.config.addressing === "page_table" ? { maxPages: s.maxPages } : {};
}

// seqlens_k of a page table's sequences: from an empty one to its table full.
function pagedSeqlens(v, s, r) {
  return Array.from({ length: s.batch }, () => r.int(-1, s.maxPages * v.config.page_size - 1));
}

// 0 .. n-1 shuffled.
function permutation(n, r) {
  const ids = Array.from({ length: n }, (_, i) => i);
  for (let i = n - 1; i > 0; i--) {
    const j = r.int(0, i);
    [ids[i], ids[j]] = [ids[j], ids[i]];
  }
  return ids;
}

// A paged variant's table: page_table entries (distinct pages, about one in eight -1), or
// `tokens` distinct slots of the pool (about one in eight -1) and their rotary positions.
function pagedTables(v, s, tokens, r) {
  const hole = (x) => (r.int(0, 7) === 0 ? -1 : x);
  if (v.config.addressing === "page_table") {
    return { page_table: permutation(s.pages, r).slice(0, s.batch * s.maxPages).map(hole) };
  }
  const slots = permutation(s.pages * v.config.page_size, r).slice(0, tokens).map(hole);
  const positions = Array.from({ length: tokens }, () => r.int(0, (s.positions || 1) - 1));
  return { slot_mapping: slots, token_positions: positions };
}

function host(v) {
  const h = HOSTS[v.mode];
  if (h === undefined) throw new Error(`${v.name}: this host knows no mode '${v.mode}'`);
  return h;
}

// What v.checkRequirements(params, inputs) of variant `name` throws (null: nothing).
export function requirementRefusal(name, params, inputs) {
  try {
    kvdsl.variant(name).checkRequirements(params, inputs);
    return null;
  } catch (e) {
    return `${e.constructor.name}: ${e.message}`;
  }
}

// The params this host derives for `shape` of variant `name`.
export function paramsFor(name, shape) {
  const v = kvdsl.variant(name);
  const params = host(v).params(v, shape);
  if (!v.config.window) return params;
  // A windowed variant dispatches its window: `slices` slices of rows from slice `headBase`
  // (count: the window's rows; transpose's rows per head are its tokens).
  const perHead = params.count === undefined ? shape.kvSeq : params.count / (shape.batch * v.config.kv_heads);
  return {
    ...params, count: shape.slices * perHead, headBase: shape.headBase, batchBase: shape.batchBase,
  };
}

// The WGSL scalar of a binding's type ("array<vec4<f32>>" -> "f32").
function scalarOf(type) {
  const m = /^array<(?:vec[234]<)?(f32|f16|u32|i32)>?>$/.exec(type);
  if (m === null) throw new Error(`a storage binding of type ${type}, which this host cannot fill`);
  return m[1];
}

// f16 bits of a random value in ±[0.25, 2): exponent 13..15, any mantissa.
function randomHalf(r) {
  return (r.int(0, 1) << 15) | (r.int(13, 15) << 10) | r.int(0, 1023);
}

const POISON_WORD = 0x7fc0dead; // what the harness poisons 4-byte outputs with (a quiet NaN)
const POISON_HALF = 0x7e5a;

// The bytes of binding b: inputs random and non-zero (values a model could hold; seqlens_k as
// chosen), outputs poisoned.
function fill(v, b, size, seqlens, r) {
  const bytes = new Uint8Array(size);
  const words = new Uint32Array(bytes.buffer);
  const floats = new Float32Array(bytes.buffer);
  const ints = new Int32Array(bytes.buffer);
  const scalar = scalarOf(b.type);
  if (b.access === READ_WRITE) {
    if (scalar === "f16") new Uint16Array(bytes.buffer).fill(POISON_HALF);
    else words.fill(POISON_WORD);
  } else if (b.name === "seqlens_k") {
    ints.set(seqlens);
  } else if (b.name === "cos_cache" || b.name === "sin_cache") {
    for (let i = 0; i < floats.length; i++) floats[i] = r.uniform(-1, 1);
  } else if (b.name === "k_scale" || b.name === "v_scale") {
    for (let i = 0; i < floats.length; i++) floats[i] = r.uniform(0.01, 0.3);
  } else if (b.name === "partials") {
    // attention partials: outputs, maxima and sums a chunk could have (sums positive)
    for (let i = 0; i < floats.length; i++) floats[i] = r.uniform(0.25, 2);
  } else if (b.name === "k_norm_weight") {
    for (let i = 0; i < floats.length; i++) floats[i] = r.uniform(0.5, 1.5);
  } else if (scalar === "f32") {
    for (let i = 0; i < floats.length; i++) floats[i] = r.uniform(0.25, 2) * (r.int(0, 1) ? 1 : -1);
  } else if (scalar === "i32") {
    for (let i = 0; i < ints.length; i++) ints[i] = r.int(-(2 ** 31), 2 ** 31 - 1) || 1;
  } else {
    // f16 values, or u32 words holding two of them (f16 data moved as vec4<u32>)
    const halves = new Uint16Array(bytes.buffer);
    for (let i = 0; i < halves.length; i++) halves[i] = randomHalf(r);
  }
  return bytes;
}

// The host on its own: a shape for variant `name` from `seed`, the params it derives, inputs it
// fills, one dispatch. Returns {shape, params, inputs, outputs (base64 by binding), workgroups}.
export async function hostRun(name, seed) {
  const v = kvdsl.variant(name);
  const h = host(v);
  const r = generator(seed);
  const shape = h.shape(r, v);
  // seqlens_k (total tokens - 1 per batch): from an empty sequence to past twice the capacity
  const seqlens = h.seqlens
    ? h.seqlens(v, shape, r)
    : h.capacity
      ? Array.from({ length: shape.batch }, () => r.int(-1, 2 * shape[h.capacity]))
      : [];
  if (v.shape.includes("positions")) shape.positions = h.positions(shape, seqlens);
  const params = h.params(v, shape);
  v.checkRequirements(params, { seqlens_k: seqlens }); // what the kernel requires, before dispatch
  // the variant's own shape variables (a paged host sizes its pool from maxPages either way)
  for (const k of Object.keys(shape)) if (!v.shape.includes(k)) delete shape[k];
  const sizes = v.bufferSizes(shape);
  const tables = h.tables ? h.tables(v, shape, seqlens, r) : {};
  const inputs = {};
  for (const b of v.bindings) {
    if (b.access === UNIFORM) continue;
    if (b.name in tables) {
      const bytes = new Uint8Array(sizes[b.name]);
      new Int32Array(bytes.buffer).set(tables[b.name]);
      inputs[b.name] = bytes;
    } else if (h.inout?.includes(b.name)) {
      inputs[b.name] = fill(v, { ...b, access: "read" }, sizes[b.name], seqlens, r);
    } else inputs[b.name] = fill(v, b, sizes[b.name], seqlens, r);
  }
  const { outputs, workgroups } = await dispatch(v, shape, params, inputs);
  const encode = (o) => Object.fromEntries(Object.entries(o).map(([k, u8]) => [k, toBase64(u8)]));
  return { shape, params, inputs: encode(inputs), outputs: encode(outputs), workgroups };
}

// KIVI's cache: each slice (sequence, KV head) holds an f16 residual of `group` rows and
// `groups` quantised groups, or (paged) each sequence's groups lie in pages of a pool of
// `pages`, through its row of `maxPages` distinct entries of page_table. An append writes its
// new tokens into the residual's free rows after `pastSeq` tokens; a flush quantises the full
// residual into group `flushGroup`; attention reads `total` tokens, the full groups quantised
// and the rest in the residual.
function kiviPages(r) {
  const batch = r.int(1, 3);
  const maxPages = r.int(1, 3);
  return { batch, maxPages, pages: batch * maxPages + r.int(0, 2) };
}

function kiviTables(v, s, seqlens, r) {
  return v.config.cache === "paged"
    ? { page_table: permutation(s.pages, r).slice(0, s.batch * s.maxPages) }
    : {};
}

Object.assign(HOSTS, {
  kivi_append: {
    shape: (r, v) => {
      const g = v.config.group;
      const pastSeq = r.int(0, 3 * g);
      return { batch: r.int(1, 3), keySeq: r.int(1, Math.min(6, g - (pastSeq % g))), pastSeq };
    },
    params: contractParams,
  },
  kivi_flush: {
    shape: (r, v) => {
      if (v.config.cache === "paged") {
        const s = kiviPages(r);
        return { ...s, flushGroup: r.int(0, (s.maxPages * v.config.page_size) / v.config.group - 1) };
      }
      const groups = r.int(1, 3);
      return { batch: r.int(1, 3), groups, flushGroup: r.int(0, groups - 1) };
    },
    params: contractParams,
    tables: kiviTables,
  },
});
