package dev.edgexsent;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

/** The JVM logic against the shared test vectors that Python wrote (android_demo/prepare.py). */
class SharedVectorsTest {
  private static Path vectorsPath() {
    String p = System.getProperty("vectors");
    assumeTrue(p != null && !p.isEmpty() && !p.equals("${vectors}"), "pass -Dvectors=.../testvectors.json");
    return Path.of(p);
  }

  private static JsonObject read(Path p) throws IOException {
    return JsonParser.parseString(Files.readString(p, StandardCharsets.UTF_8)).getAsJsonObject();
  }

  private static float[] floats(JsonArray a) {
    float[] out = new float[a.size()];
    for (int i = 0; i < out.length; i++) out[i] = a.get(i).getAsFloat();
    return out;
  }

  @Test
  void tokenIdsEqualPython() throws IOException {
    Path vectors = vectorsPath();
    Path rules = vectors.resolveSibling("tokenizer_rules.json"); // a student's, where the folder has them
    UnigramTokenizer tok = new UnigramTokenizer(read(vectors.resolveSibling("tokenizer.json")),
                                                Files.exists(rules) ? read(rules) : null);
    int maxLen = read(vectors.resolveSibling("config.json")).getAsJsonObject("model").get("max_len").getAsInt();
    JsonArray cases = read(vectors).getAsJsonArray("cases");
    assumeTrue(cases.size() > 0);
    for (JsonElement e : cases) {
      JsonObject c = e.getAsJsonObject();
      int[] expected = c.getAsJsonArray("ids").asList().stream().mapToInt(JsonElement::getAsInt).toArray();
      assertArrayEquals(expected, tok.encode(c.get("text").getAsString(), maxLen), "ids of " + c.get("text").getAsString());
    }
  }

  @Test
  void embeddingsAreUnitLengthAndCosineMatchesDotProduct() throws IOException {
    JsonArray cases = read(vectorsPath()).getAsJsonArray("cases");
    float[] first = null;
    for (JsonElement e : cases) {
      JsonObject c = e.getAsJsonObject();
      if (c.getAsJsonArray("ids").isEmpty()) continue;
      float[] v = floats(c.getAsJsonArray("embedding"));
      assertEquals(1.0, Vectors.cosine(v, v), 1e-5);
      assertArrayEquals(v, Vectors.l2Normalize(v), 1e-5f);
      if (first == null) first = v;
      double dot = 0;
      for (int i = 0; i < v.length; i++) dot += v[i] * first[i];
      assertEquals(dot, Vectors.cosine(v, first), 1e-4);
    }
  }

  @Test
  void normalizationMatchesPythonRules() {
    assertEquals("a b c", UnigramTokenizer.normalize("  a \t b\n\u00a0c  "));
    assertEquals("file Full", UnigramTokenizer.normalize("\ufb01le \uff26\uff55\uff4c\uff4c"));
    assertEquals("ab", UnigramTokenizer.normalize("a\u0007b"));
  }
}
