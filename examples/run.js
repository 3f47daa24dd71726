// Run one kvdsl variant with WebGPU through the npm package kvdsl (emitted/): size the buffers
// from a shape, write the params, fill the inputs with random values, dispatch, read an output
// back. index.html drives it (its import map points "kvdsl" at ../emitted/kvdsl.js); docs/host.md
// describes the contract it uses.
import { variant } from "kvdsl";

// The params of `v` for `shape` (the shape variables of docs/host.md), per mode: each field's
// meaning is in v.params[i].meaning.
export function paramsFor(v, shape) {
  const params = modeParams(v, shape);
  if (!v.config.window) return params;
  // A windowed variant's dispatch covers its window: `slices` slices of rows from `headBase`.
  const perHead = params.count === undefined ? shape.kvSeq : params.count / (shape.batch * v.config.kv_heads);
  return {
    ...params, count: shape.slices * perHead, headBase: shape.headBase, batchBase: shape.batchBase,
  };
}

function modeParams(v, shape) {
  const heads = v.config.kv_heads;
  const region = v.config.region;
  switch (v.mode) {
    case "transpose":
      return { batchSize: shape.batch, kvSeq: shape.kvSeq };
    case "copy":
      return { count: shape.rows };
    case "merge": {
      const seq = shape.pastSeq + shape.keySeq;
      return { count: shape.batch * heads * seq, seq, pastSeq: shape.pastSeq, keySeq: shape.keySeq };
    }
    case "merge_share":
    case "window_shift":
    case "dense_retain":
    case "dense_window_shift": {
      const rows = region === "append" ? shape.keySeq : shape.seq;
      return { count: shape.batch * heads * rows, seq: shape.seq, keySeq: shape.keySeq };
    }
    case "build":
      return { count: shape.batch * heads * shape.seq, seq: shape.seq, pastSeq: shape.pastSeq };
    case "build_quant":
      return {
        count: shape.batch * heads * shape.seq, seq: shape.seq, pastSeq: shape.pastSeq,
        perChannel: shape.perChannel,
      };
    case "append_quant":
      return {
        count: shape.batch * heads * shape.seq, seq: shape.seq, pastSeq: 0,
        totalSeq: shape.totalSeq, perChannel: shape.perChannel,
      };
    case "dense_append":
      return { count: shape.batch * heads * shape.keySeq, keySeq: shape.keySeq, seq: shape.seq };
    case "dense_build":
      return { count: shape.batch * heads * shape.seq, seq: shape.seq, pastSeq: shape.pastSeq };
    case "dense_read":
    case "dense_convert":
      return { count: shape.rows };
    case "paged_append":
      return {
        count: shape.batch * heads * shape.keySeq, keySeq: shape.keySeq,
        ...(v.config.addressing === "page_table" ? { maxPages: shape.maxPages } : {}),
      };
    case "paged_read":
      return {
        count: shape.batch * heads * shape.seq, seq: shape.seq,
        ...(v.config.addressing === "page_table" ? { maxPages: shape.maxPages } : {}),
      };
    case "paged_copy":
      return { count: shape.copies };
    case "paged_compact":
      return { count: shape.live };
    case "paged_window":
      return { count: shape.batch * shape.maxPages, maxPages: shape.maxPages, window: shape.window };
    case "qkv": {
      const perToken = v.config.q_heads + (v.config.split ? 2 : 1) * heads;
      const rows = shape.batch * shape.keySeq * perToken;
      return { count: rows, keySeq: shape.keySeq, seq: shape.seq };
    }
    case "paged_qkv": {
      const perToken = v.config.q_heads + (v.config.split ? 2 : 1) * heads;
      return {
        count: shape.batch * shape.keySeq * perToken, keySeq: shape.keySeq,
        ...(v.config.addressing === "page_table" ? { maxPages: shape.maxPages } : {}),
      };
    }
  }
  throw new Error(`no params rule for mode ${v.mode}`);
}

// A shape small enough to read, valid for every mode.
export const SHAPE = {
  batch: 2, seq: 8, pastSeq: 4, keySeq: 3, totalSeq: 16, kvSeq: 5, rows: 3, perChannel: 0,
  positions: 32, headBase: 0, slices: 1, batchBase: 0, pages: 4, maxPages: 2, copies: 1, live: 2,
  window: 16,
};

// The float16 bits of `x` (round to nearest even; the values here stay in the normal range).
function halfBits(x) {
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

// Random bytes for input binding `b`: floats in ±[0.25, 2), scales of 1/64, seqlens_k = the
// cache's last row, page ids within the pool (token i in slot i), other integers small.
export function inputBytes(b, bytes, shape) {
  const buf = new ArrayBuffer(bytes);
  const scalar = b.data ?? b.type.match(/(f32|i32|u32|f16)>*$/)[1];
  const random = () => (0.25 + 1.75 * Math.random()) * (Math.random() < 0.5 ? -1 : 1);
  if (b.name === "seqlens_k") new Int32Array(buf).fill((shape.seq ?? shape.totalSeq) - 1);
  else if (b.name.endsWith("_scale")) new Float32Array(buf).fill(1 / 64);
  else if (b.name === "slot_mapping" || b.name === "token_positions") {
    new Int32Array(buf).forEach((_, i, a) => (a[i] = i));
  } else if (["page_table", "page_pairs", "live_pages"].includes(b.name)) {
    new Int32Array(buf).forEach((_, i, a) => (a[i] = i % shape.pages));
  }
  else if (scalar === "f32") new Float32Array(buf).forEach((_, i, a) => (a[i] = random()));
  else if (scalar === "f16") new Uint16Array(buf).forEach((_, i, a) => (a[i] = halfBits(random())));
  else new Int32Array(buf).forEach((_, i, a) => (a[i] = Math.floor(Math.random() * 200) - 100));
  return buf;
}

// Run variant `name` on `device` for `shape`; returns the first values of each output (a
// read_write binding), as its host type says.
export async function run(device, name, shape, first = 8) {
  const v = variant(name);
  const shapeHere = Object.fromEntries(v.shape.map((k) => [k, shape[k]]));
  const sizes = v.bufferSizes(shapeHere);
  const params = paramsFor(v, shapeHere);
  const module = device.createShaderModule({ code: v.code });
  const layout = device.createBindGroupLayout({ entries: v.layoutEntries() });
  const pipeline = device.createComputePipeline({
    layout: device.createPipelineLayout({ bindGroupLayouts: [layout] }),
    compute: { module, entryPoint: v.entryPoint },
  });
  const S = GPUBufferUsage;
  const buffers = {};
  for (const b of v.bindings) {
    const usage = b.access === "uniform" ? S.UNIFORM : S.STORAGE | S.COPY_SRC;
    buffers[b.name] = device.createBuffer({ size: sizes[b.name], usage: usage | S.COPY_DST });
    const bytes =
      b.access === "uniform" ? v.paramsBytes(params)
      : b.access === "read" ? inputBytes(b, sizes[b.name], shapeHere)
      : new Uint8Array(sizes[b.name]).fill(0xff).buffer; // poison: unwritten elements show
    device.queue.writeBuffer(buffers[b.name], 0, bytes);
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
  const outputs = v.bindings.filter((b) => b.access === "read_write");
  const reads = outputs.map((b) => {
    const read = device.createBuffer({ size: sizes[b.name], usage: S.MAP_READ | S.COPY_DST });
    encoder.copyBufferToBuffer(buffers[b.name], 0, read, 0, sizes[b.name]);
    return read;
  });
  device.queue.submit([encoder.finish()]);
  const result = { params, workgroups: v.workgroups(params), sizes, outputs: {} };
  for (const [i, b] of outputs.entries()) {
    await reads[i].mapAsync(GPUMapMode.READ);
    const data = reads[i].getMappedRange().slice(0);
    reads[i].unmap();
    const scalar = b.data ?? b.type.match(/(f32|i32|u32|f16)>*$/)[1];
    const view = { f32: Float32Array, i32: Int32Array, u32: Uint32Array, f16: Uint16Array }[scalar];
    result.outputs[b.name] = { type: scalar, first: Array.from(new view(data).slice(0, first)) };
  }
  return result;
}
