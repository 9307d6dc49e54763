// Sentence embeddings on the device: tokenizer (Hugging Face tokenizers.js, reading the bundle's
// tokenizer.json) + int8 ONNX model (onnxruntime-web, WASM) + L2 normalisation. Mean pooling
// is inside the model graph.
import { Tokenizer } from "./vendor/tokenizers.min.mjs";

export class Embedder {
  static async load(base = "model/") {
    const [tokJson, tokConfig, config] = await Promise.all(
      ["tokenizer.json", "tokenizer_config.json", "config.json"].map((f) => fetch(base + f).then((r) => r.json())));
    ort.env.wasm.numThreads = 1; // threads need COOP/COEP headers, which a plain static host lacks
    ort.env.wasm.wasmPaths = new URL("vendor/", location.href).href;
    const session = await ort.InferenceSession.create(base + "model_int8.onnx", { executionProviders: ["wasm"] });
    return new Embedder(new Tokenizer(tokJson, tokConfig), session, config);
  }

  constructor(tokenizer, session, config) {
    this.tokenizer = tokenizer;
    this.session = session;
    this.maxLen = config.model.max_len;
    this.dim = config.model.d_model;
  }

  tokenize(text) {
    return this.tokenizer.encode(text, { add_special_tokens: false }).ids.slice(0, this.maxLen);
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
    const out = (await this.session.run(feeds, ["sentence_embedding"])).sentence_embedding.data;
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
