// Run one kvdsl variant with WebGPU through the npm package kvdsl (emitted/): size the buffers
// from a shape, write the params, fill the inputs with random values, dispatch, read an output
// back. index.html drives it (its import map points "kvdsl" at ../emitted/kvdsl.js); docs/host.md
// describes the contract it uses.
import { variant } from "kvdsl";

// The params of `v` for `shape` (the shape variables of docs/host.md): each field's value
// formula, v.params[i].value, evaluated by the module; the fields without one (attend's f32
// scale and softcap, the model's numbers) from `chosen`.
export function paramsFor(v, shape, chosen = CHOSEN) {
  return v.paramsFor(shape, chosen);
}

// The model's numbers the params take as they are: attend's logit scale and soft-cap.
export const CHOSEN = { scale: 0.125, softcap: 30 };

// A shape small enough to read, valid for every mode.
export const SHAPE = {
  batch: 2, seq: 8, pastSeq: 4, keySeq: 3, totalSeq: 16, kvSeq: 5, rows: 3, perChannel: 0,
  positions: 32, headBase: 0, slices: 1, batchBase: 0, pages: 4, maxPages: 2, copies: 1, live: 2,
  window: 16, queries: 1, chunk: 8, chunks: 1,
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
