// A TypeScript host of the npm package kvdsl: everything kvdsl.d.ts declares, used as a host uses
// it to plan a dispatch (no WebGPU: Node.js has none). tests/contract/test_package.py copies it
// into the project the package is installed in, checks it with `tsc --noEmit --strict` (so a
// declaration that is wrong for this use fails there) and runs its compiled form on one variant of
// each mode, comparing each plan with Python's contract (so a declaration that is stale against
// kvdsl.js fails there).
import { variant, variants } from "kvdsl";
import type { Binding, GPUBindGroupLayoutEntry, Param, Variant } from "kvdsl";

/** One buffer of the bind group: its binding, its bytes and its layout entry. */
export interface Buffer {
  binding: number;
  name: string;
  access: "read" | "read_write" | "uniform";
  type: string;
  elementBytes: number;
  elements: string;
  data: "f16" | "f32" | "i32" | "u32" | null;
  bytes: number;
  layout: GPUBindGroupLayoutEntry;
}

/** One uniform field, read back from paramsBytes()'s bytes at its offset as its type. */
export interface Field {
  name: string;
  type: "u32" | "i32" | "f32";
  offset: number;
  meaning: string;
  value: number;
}

/** What a host needs to dispatch variant `name` for a shape and its params. */
export interface Plan {
  name: string;
  mode: string;
  entryPoint: string;
  workgroupSize: [number, number, number];
  features: string[];
  limits: Record<string, number>;
  config: Record<string, unknown>;
  codeLines: number;
  shape: string[];
  buffers: Buffer[];
  paramsSize: number;
  fields: Field[];
  workgroups: [number, number, number];
  bytesPerTokenHead: number | null;
  pages: {
    pageSize: number; layout: "nhd" | "hnd"; pool: "separate" | "combined";
    pageValues: number; pageBytes: number; pageStrideValues: number; scalePageValues: number;
  } | null;
  bytesMoved: string | null;
}

function readField(view: DataView, p: Param): Field {
  const value =
    p.type === "u32"
      ? view.getUint32(p.offset, true)
      : p.type === "i32"
        ? view.getInt32(p.offset, true)
        : view.getFloat32(p.offset, true);
  return { name: p.name, type: p.type, offset: p.offset, meaning: p.meaning, value };
}

function buffer(b: Binding, sizes: Record<string, number>, layout: GPUBindGroupLayoutEntry): Buffer {
  const bytes = sizes[b.name];
  if (bytes === undefined) throw new Error(`bufferSizes() has no size for binding '${b.name}'`);
  if (layout.binding !== b.binding) throw new Error(`layout entry ${layout.binding} for ${b.binding}`);
  return {
    binding: b.binding, name: b.name, access: b.access, type: b.type,
    elementBytes: b.elementBytes, elements: b.elements, data: b.data ?? null, bytes, layout,
  };
}

/** The plan of variant `name` (found through `variant`, and the same object in `variants`). */
export function plan(name: string, shape: Record<string, number>, params: Record<string, number>): Plan {
  const v: Variant = variant(name);
  if (variants[name] !== v) throw new Error(`variants['${name}'] is not variant('${name}')`);
  const sizes = v.bufferSizes(shape);
  const layout = v.layoutEntries();
  const bytes: ArrayBuffer = v.paramsBytes(params);
  if (bytes.byteLength !== v.paramsSize) {
    throw new Error(`paramsBytes() gave ${bytes.byteLength} bytes, paramsSize is ${v.paramsSize}`);
  }
  const view = new DataView(bytes);
  const [x, y, z] = v.workgroupSize;
  return {
    name: v.name,
    mode: v.mode,
    entryPoint: v.entryPoint,
    workgroupSize: [x, y, z],
    features: [...v.features],
    limits: { ...v.limits },
    config: { ...v.config },
    codeLines: v.code.split("\n").length,
    shape: [...v.shape],
    buffers: v.bindings.map((b, i) => buffer(b, sizes, layout[i])),
    paramsSize: v.paramsSize,
    fields: v.params.map((p) => readField(view, p)),
    workgroups: v.workgroups(params),
    bytesPerTokenHead: v.bytesPerTokenHead ?? null,
    pages: v.pages === undefined ? null : { ...v.pages },
    bytesMoved: v.bytesMoved ?? null,
  };
}
