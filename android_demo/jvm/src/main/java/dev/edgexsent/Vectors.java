package dev.edgexsent;

/** Pooling and similarity, as in edge_xsent (masked mean over real tokens, L2, cosine). */
public final class Vectors {
  private Vectors() {}

  /** Mean of the token states whose mask is 1: states [T][C], mask [T]. Empty -> zeros. */
  public static float[] meanPool(float[][] states, long[] mask) {
    int c = states.length == 0 ? 0 : states[0].length;
    float[] out = new float[c];
    int count = 0;
    for (int t = 0; t < states.length; t++) {
      if (mask[t] == 0) continue;
      count++;
      for (int j = 0; j < c; j++) out[j] += states[t][j];
    }
    for (int j = 0; j < c; j++) out[j] /= Math.max(count, 1);
    return out;
  }

  public static float[] l2Normalize(float[] v) {
    double s = 0;
    for (float x : v) s += x * x;
    double norm = Math.max(Math.sqrt(s), 1e-12);
    float[] out = new float[v.length];
    for (int i = 0; i < v.length; i++) out[i] = (float) (v[i] / norm);
    return out;
  }

  public static double cosine(float[] a, float[] b) {
    double dot = 0, na = 0, nb = 0;
    for (int i = 0; i < a.length; i++) {
      dot += a[i] * b[i];
      na += a[i] * a[i];
      nb += b[i] * b[i];
    }
    return na == 0 || nb == 0 ? 0 : dot / Math.sqrt(na * nb);
  }
}
