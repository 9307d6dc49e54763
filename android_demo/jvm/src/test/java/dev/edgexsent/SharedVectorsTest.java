package dev.edgexsent;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The JVM logic against the shared test vectors that Python wrote (android_demo/prepare.py): one model's
 * testvectors.json, or several joined by the path separator (one Maven run checks every model).
 */
class SharedVectorsTest {
  private static List<Path> vectorsPaths() {
    String p = System.getProperty("vectors");
    assumeTrue(p != null && !p.isEmpty() && !p.equals("${vectors}"), "pass -Dvectors=.../testvectors.json");
    return Arrays.stream(p.split(File.pathSeparator)).map(Path::of).toList();
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
    for (Path vectors : vectorsPaths()) {
      Path rules = vectors.resolveSibling("tokenizer_rules.json"); // a student's, where the folder has them
      UnigramTokenizer tok = new UnigramTokenizer(read(vectors.resolveSibling("tokenizer.json")),
                                                  Files.exists(rules) ? read(rules) : null);
      int maxLen = read(vectors.resolveSibling("config.json")).getAsJsonObject("model").get("max_len").getAsInt();
      JsonArray cases = read(vectors).getAsJsonArray("cases");
      assertTrue(cases.size() > 0, vectors + ": no cases");
      for (JsonElement e : cases) {
        JsonObject c = e.getAsJsonObject();
        int[] expected = c.getAsJsonArray("ids").asList().stream().mapToInt(JsonElement::getAsInt).toArray();
        String text = c.get("text").getAsString();
        assertArrayEquals(expected, tok.encode(text, maxLen), vectors + ": ids of " + text);
      }
    }
  }

  @Test
  void embeddingsAreUnitLengthAndCosineMatchesDotProduct() throws IOException {
    for (Path vectors : vectorsPaths()) {
      JsonArray cases = read(vectors).getAsJsonArray("cases");
      float[] first = null;
      for (JsonElement e : cases) {
        JsonObject c = e.getAsJsonObject();
        if (c.getAsJsonArray("ids").isEmpty()) continue;
        float[] v = floats(c.getAsJsonArray("embedding"));
        assertEquals(1.0, Vectors.cosine(v, v), 1e-5, vectors.toString());
        assertArrayEquals(v, Vectors.l2Normalize(v), 1e-5f, vectors.toString());
        if (first == null) first = v;
        double dot = 0;
        for (int i = 0; i < v.length; i++) dot += v[i] * first[i];
        assertEquals(dot, Vectors.cosine(v, first), 1e-4, vectors.toString());
      }
    }
  }

  @Test
  void normalizationMatchesPythonRules() {
    assertEquals("a b c", UnigramTokenizer.normalize("  a \t b\n\u00a0c  "));
    assertEquals("file Full", UnigramTokenizer.normalize("\ufb01le \uff26\uff55\uff4c\uff4c"));
    assertEquals("ab", UnigramTokenizer.normalize("a\u0007b"));
  }
}
