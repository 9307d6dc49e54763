// SentencePiece unigram tokenizer in plain JavaScript, from the bundle's tokenizer.json.
// Mirrors edge_xsent/text.py (normalisation) and SentencePiece's Viterbi search, including
// the merge of consecutive unknown characters into one <unk>. Checked against Python's ids
// by the shared test vectors.

const CONTROL = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f]/g;
const WHITESPACE = /[^\S\ufeff]+/g; // Python's \s (str.isspace); JS's \s also takes U+FEFF
const UNK_PENALTY = 10.0;

export function normalize(text) {
  // Not .trim(): it also strips U+FEFF, which Python keeps (it is not whitespace there).
  return text.normalize("NFKC").replace(CONTROL, "").replace(WHITESPACE, " ").replace(/^ +| +$/g, "");
}

export class UnigramTokenizer {
  // json: the bundle's tokenizer.json (Hugging Face `tokenizers` format, model.type "Unigram").
  // Pad and unk carry a NUL there, so no normalised text can spell them; "<mask>" is an
  // ordinary piece, matched when typed, as SentencePiece does.
  constructor(json) {
    const { vocab, unk_id: unkId } = json.model;
    this.unkId = unkId;
    this.vocabSize = vocab.length;
    this.ids = new Map();
    this.scores = new Float64Array(vocab.length);
    let minScore = Infinity;
    this.maxLen = 1;
    vocab.forEach(([piece, score], id) => {
      this.scores[id] = score;
      if (id === unkId) return;
      this.ids.set(piece, id);
      minScore = Math.min(minScore, score);
      this.maxLen = Math.max(this.maxLen, Array.from(piece).length);
    });
    this.unkScore = minScore - UNK_PENALTY;
  }

  encode(text) {
    const norm = normalize(text);
    if (!norm) return [];
    const chars = Array.from("\u2581" + norm.replaceAll(" ", "\u2581"));
    const n = chars.length;
    const best = new Float64Array(n + 1).fill(-Infinity);
    const back = new Int32Array(n + 1);   // start of the piece ending here
    const backId = new Int32Array(n + 1); // its id
    best[0] = 0;
    for (let i = 0; i < n; i++) {
      if (best[i] === -Infinity) continue;
      let single = false;
      let piece = "";
      for (let len = 1; len <= this.maxLen && i + len <= n; len++) {
        piece += chars[i + len - 1];
        const id = this.ids.get(piece);
        if (id === undefined) continue;
        if (len === 1) single = true;
        const s = best[i] + this.scores[id];
        if (s > best[i + len]) { best[i + len] = s; back[i + len] = i; backId[i + len] = id; }
      }
      if (!single) { // an unknown character
        const s = best[i] + this.unkScore;
        if (s > best[i + 1]) { best[i + 1] = s; back[i + 1] = i; backId[i + 1] = this.unkId; }
      }
    }
    const out = [];
    for (let j = n; j > 0; j = back[j]) out.push(backId[j]);
    out.reverse();
    return out.filter((id, k) => !(id === this.unkId && k > 0 && out[k - 1] === this.unkId));
  }
}
