// A phrase index kept as int8 codes, a quarter of float32's memory: each dimension's calibrated
// range [min, max] (the bundle's calibration.json, measured on real sentences) mapped onto
// -128..127, as edge_xsent/compact.py does. Queries stay float; a phrase's score is the cosine
// between the query and the phrase's decoded vector.

// In float32 arithmetic (Math.fround after each step), as numpy computes it.
export function quantize(vec, lo, step) {
  const f = Math.fround;
  const codes = new Int8Array(vec.length);
  for (let d = 0; d < vec.length; d++) {
    const c = roundHalfEven(f(f(f(vec[d]) - lo[d]) / step[d])) - 128;
    codes[d] = Math.max(-128, Math.min(127, c));
  }
  return codes;
}

// numpy's rint (ties to even), so that codes equal Python's for the same vector.
function roundHalfEven(x) {
  const r = Math.round(x);
  return Math.abs(x % 1) === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

export class Int8Index {
  constructor(calibration, dim) {
    this.dim = dim;
    this.lo = Float32Array.from(calibration.min.slice(0, dim));
    const f = Math.fround;
    this.step = Float32Array.from(calibration.max.slice(0, dim),
      (hi, d) => f(Math.max(f(f(hi) - this.lo[d]), f(1e-9)) / 255));
    this.codes = new Int8Array(0);
    this.norms = [];
  }

  get size() { return this.norms.length; }
  get bytes() { return this.codes.byteLength; }

  add(vec) {
    const codes = quantize(vec, this.lo, this.step);
    const grown = new Int8Array(this.codes.length + this.dim);
    grown.set(this.codes);
    grown.set(codes, this.codes.length);
    this.codes = grown;
    let n = 0;
    for (let d = 0; d < this.dim; d++) n += this.decode(codes[d], d) ** 2;
    this.norms.push(Math.sqrt(n) || 1);
  }

  decode(code, d) { return (code + 128) * this.step[d] + this.lo[d]; }

  // Cosine of a unit-length float query with every stored phrase.
  scores(query) {
    const out = new Float32Array(this.size);
    for (let i = 0; i < this.size; i++) {
      let s = 0;
      const base = i * this.dim;
      for (let d = 0; d < this.dim; d++) s += query[d] * this.decode(this.codes[base + d], d);
      out[i] = s / this.norms[i];
    }
    return out;
  }
}
