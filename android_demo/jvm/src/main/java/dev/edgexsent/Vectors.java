package dev.edgexsent;

/** Similarity as in edge_xsent (L2 normalisation, cosine); mean pooling is inside the ONNX graph. */
public final class Vectors {
  private Vectors() {}

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
