// Sentence embeddings on the device: tokenizer + int8 ONNX model (onnxruntime-web, WASM)
// + L2 normalisation. Mean pooling is inside the model graph.
import { UnigramTokenizer } from "./tokenizer.js";

export class Embedder {
  static async load(base = "model/") {
    const [tokJson, config] = await Promise.all([
      fetch(base + "tokenizer.json").then((r) => r.json()),
      fetch(base + "config.json").then((r) => r.json()),
    ]);
    ort.env.wasm.numThreads = 1; // threads need COOP/COEP headers, which a plain static host lacks
    ort.env.wasm.wasmPaths = new URL("vendor/", location.href).href;
    const session = await ort.InferenceSession.create(base + "model_int8.onnx", { executionProviders: ["wasm"] });
    return new Embedder(new UnigramTokenizer(tokJson), session, config);
  }

  constructor(tokenizer, session, config) {
    this.tokenizer = tokenizer;
    this.session = session;
    this.maxLen = config.model.max_len;
    this.dim = config.model.d_model;
  }

  tokenize(text) {
    return this.tokenizer.encode(text).slice(0, this.maxLen);
  }

  // One sentence -> Float32Array(dim), unit length (zeros for empty text).
  async embed(text) {
    const ids = this.tokenize(text);
    if (ids.length === 0) return new Float32Array(this.dim);
    const data = BigInt64Array.from(ids, BigInt);
    const mask = new BigInt64Array(ids.length).fill(1n);
    const feeds = {
      input_ids: new ort.Tensor("int64", data, [1, ids.length]),
      attention_mask: new ort.Tensor("int64", mask, [1, ids.length]),
    };
    const out = (await this.session.run(feeds)).sentence_embedding.data;
    let norm = 0;
    for (const x of out) norm += x * x;
    norm = Math.sqrt(norm) || 1;
    return Float32Array.from(out, (x) => x / norm);
  }
}

export function cosine(a, b) {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i] * b[i];
  return s;
}
