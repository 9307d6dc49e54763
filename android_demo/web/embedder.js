// Sentence embeddings on the device: tokenizer (Hugging Face tokenizers.js, reading the bundle's
// tokenizer.json) + int8 ONNX model (onnxruntime-web, WASM) + L2 normalisation. Mean pooling
// is inside the model graph. tokenizers.js has no byte fallback for Unigram models, so `bytes`
// below adds it: SentencePiece spells a character without a piece as its UTF-8 bytes (<0xE0>...).
import { Tokenizer } from "./vendor/tokenizers.min.mjs";

export class Embedder {
  static async load(base = "model/") {
    const [tokJson, tokConfig, config] = await Promise.all(
      ["tokenizer.json", "tokenizer_config.json", "config.json"].map((f) => fetch(base + f).then((r) => r.json())));
    ort.env.wasm.numThreads = 1; // threads need COOP/COEP headers, which a plain static host lacks
    ort.env.wasm.wasmPaths = new URL("vendor/", location.href).href;
    const session = await ort.InferenceSession.create(base + "model_int8.onnx", { executionProviders: ["wasm"] });
    // a student of e5-small: its tokenizer.json prepends `passage: `, and its rules file says how exactly
    const student = (tokJson.normalizer?.normalizers ?? []).some((n) => n.type === "Prepend");
    const rules = student ? await fetch(base + "tokenizer_rules.json").then((r) => r.json()) : null;
    return new Embedder(new Tokenizer(rules ? Rules.spacesOnly(tokJson) : tokJson, tokConfig), session, config,
                        tokJson.model, rules && new Rules(rules));
  }

  constructor(tokenizer, session, config, unigram, rules = null) {
    this.tokenizer = tokenizer;
    this.session = session;
    this.maxLen = config.model.max_len;
    this.dim = config.model.d_model;
    this.bytes = unigram.byte_fallback ? new ByteFallback(unigram) : null;
    this.rules = rules;
  }

  tokenize(text) {
    if (this.rules) {
      const norm = this.rules.normalize(text);
      if (!norm.slice(this.rules.prefix.length).replaceAll(" ", "")) return []; // blank: no tokens, a zero vector
      return this.rules.wrap(this.tokenizer.encode(norm, { add_special_tokens: false }).ids, this.maxLen);
    }
    const ids = this.tokenizer.encode(text, { add_special_tokens: false }).ids;
    const full = this.bytes ? this.bytes.apply(ids, this.tokenizer.normalizer(text)) : ids;
    return full.slice(0, this.maxLen);
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

// A student of multilingual-e5-small reads text by e5's rules (the folder's tokenizer_rules.json): NFC, its
// per-character map, NFC, runs of spaces collapsed, a prefix, <s> ... </s>. tokenizers.js approximates that map
// by NFKC, so the page applies the map itself and lets tokenizers.js only mark the spaces.
class Rules {
  constructor(rules) {
    this.map = new Map(Object.entries(rules.char_map).map(([cp, out]) => [Number(cp), out]));
    this.prefix = rules.prefix;
    this.compose = rules.compose === "NFC";
    this.head = rules.bos_id === null ? [] : [rules.bos_id];
    this.tail = rules.eos_id === null ? [] : [rules.eos_id];
  }

  static spacesOnly(tokJson) {
    const keep = (n) => n.type === "Replace" && (n.content === "\u2581");
    return { ...tokJson, post_processor: null,
             normalizer: { type: "Sequence", normalizers: tokJson.normalizer.normalizers.filter(keep) } };
  }

  // As TextRules.normalize: NFC (when the rules compose), the map, NFC again, runs of spaces collapsed.
  normalize(text) {
    let out = "";
    const nfc = (s) => (this.compose ? s.normalize("NFC") : s);
    for (const ch of nfc(this.prefix + text)) {
      const to = this.map.get(ch.codePointAt(0));
      out += to === undefined ? ch : to;
    }
    return nfc(out).replace(/ {2,}/g, " ");
  }

  wrap(ids, maxLen) {
    const all = [...this.head, ...ids, ...this.tail];
    return all.length <= maxLen || !this.tail.length ? all.slice(0, maxLen) : [...all.slice(0, maxLen - 1), ...this.tail];
  }
}

// Replaces each <unk> by the bytes of the characters it stands for. A character without a piece
// of its own is in no longer piece either (SentencePiece builds pieces from its characters), so
// every path passes the same <unk> places and a run of such characters is one <unk> (tokenizers.js
// fuses them) or one per character: fused first, either way each run gives its characters' bytes.
class ByteFallback {
  constructor(unigram) {
    this.unkId = unigram.unk_id;
    this.single = new Set(unigram.vocab.map(([p]) => p).filter((p, i) => i !== this.unkId && [...p].length === 1));
    this.byteId = new Map(unigram.vocab.map(([p], i) => [p, i]).filter(([p]) => /^<0x[0-9A-F]{2}>$/.test(p)));
    this.encoder = new TextEncoder();
  }

  apply(ids, normalized) {
    const runs = [];
    let run = "";
    for (const ch of normalized) {
      if (!this.single.has(ch)) run += ch;
      else if (run) { runs.push(run); run = ""; }
    }
    if (run) runs.push(run);
    const out = [];
    let k = 0;
    for (let i = 0; i < ids.length; i++) {
      if (ids[i] !== this.unkId) { out.push(ids[i]); continue; }
      if (i > 0 && ids[i - 1] === this.unkId) continue; // the same run, unfused
      for (const b of this.encoder.encode(runs[k++])) {
        out.push(this.byteId.get(`<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`));
      }
    }
    return out;
  }
}

export function cosine(a, b) {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i] * b[i];
  return s;
}
