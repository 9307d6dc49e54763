package dev.edgexsent;

import com.google.gson.JsonArray;
import com.google.gson.JsonObject;
import java.nio.charset.StandardCharsets;
import java.text.Normalizer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * SentencePiece unigram tokenizer from the bundle's tokenizer.json. Mirrors
 * edge_xsent/text.py (normalisation) and SentencePiece's Viterbi search, including the
 * merge of consecutive unknown characters into one unk id, or, when the model has byte
 * fallback, each unknown character spelled as the byte pieces of its UTF-8 bytes.
 */
public final class UnigramTokenizer {
  private static final double UNK_PENALTY = 10.0;
  private final Map<String, Integer> ids = new HashMap<>();
  private final double[] scores;
  private final int unkId;
  private final int maxLen;
  private final double unkScore;
  private final int[] byteIds; // id of <0x00>..<0xFF>, or null without byte fallback

  /**
   * json: the bundle's tokenizer.json (Hugging Face `tokenizers` format, model.type "Unigram").
   * Pad and unk carry a NUL there, so no normalised text can spell them; "<mask>" is an
   * ordinary piece, matched when typed, as SentencePiece does.
   */
  public UnigramTokenizer(JsonObject json) {
    JsonObject model = json.getAsJsonObject("model");
    JsonArray pieces = model.getAsJsonArray("vocab");
    unkId = model.get("unk_id").getAsInt();
    scores = new double[pieces.size()];
    boolean fallback = model.has("byte_fallback") && model.get("byte_fallback").getAsBoolean();
    byteIds = fallback ? new int[256] : null;
    double min = Double.POSITIVE_INFINITY;
    int longest = 1;
    for (int id = 0; id < pieces.size(); id++) {
      JsonArray p = pieces.get(id).getAsJsonArray();
      String piece = p.get(0).getAsString();
      scores[id] = p.get(1).getAsDouble();
      if (fallback && piece.matches("<0x[0-9A-F]{2}>")) { // a fallback, never matched as text
        byteIds[Integer.parseInt(piece.substring(3, 5), 16)] = id;
        continue;
      }
      if (id == unkId) continue;
      ids.put(piece, id);
      min = Math.min(min, scores[id]);
      longest = Math.max(longest, piece.codePointCount(0, piece.length()));
    }
    maxLen = longest;
    unkScore = min - UNK_PENALTY;
  }

  /** NFKC, control characters dropped, whitespace runs collapsed to one space, trimmed. */
  public static String normalize(String text) {
    String nfkc = Normalizer.normalize(text, Normalizer.Form.NFKC);
    StringBuilder out = new StringBuilder(nfkc.length());
    boolean pendingSpace = false;
    for (int cp : nfkc.codePoints().toArray()) {
      if (isControl(cp)) continue;
      if (isSpace(cp)) {
        pendingSpace = out.length() > 0;
        continue;
      }
      if (pendingSpace) out.append(' ');
      pendingSpace = false;
      out.appendCodePoint(cp);
    }
    return out.toString();
  }

  /** The characters edge_xsent.text drops: C0 except tab, newline, return; DEL and C1; the BOM. */
  private static boolean isControl(int cp) {
    return (cp <= 0x1f && cp != '\t' && cp != '\n' && cp != '\r') || (cp >= 0x7f && cp <= 0x9f) || cp == 0xfeff;
  }

  /** Python's str.isspace (Java's isWhitespace misses no-break spaces; U+FEFF is dropped before). */
  private static boolean isSpace(int cp) {
    return Character.isWhitespace(cp) || Character.isSpaceChar(cp);
  }

  public int[] encode(String text) {
    String norm = normalize(text);
    if (norm.isEmpty()) return new int[0];
    int[] chars = ("\u2581" + norm.replace(" ", "\u2581")).codePoints().toArray();
    int n = chars.length;
    double[] best = new double[n + 1];
    int[] back = new int[n + 1];
    int[] backId = new int[n + 1];
    Arrays.fill(best, Double.NEGATIVE_INFINITY);
    best[0] = 0;
    for (int i = 0; i < n; i++) {
      if (best[i] == Double.NEGATIVE_INFINITY) continue;
      boolean single = false;
      StringBuilder piece = new StringBuilder();
      for (int len = 1; len <= maxLen && i + len <= n; len++) {
        piece.appendCodePoint(chars[i + len - 1]);
        Integer id = ids.get(piece.toString());
        if (id == null) continue;
        if (len == 1) single = true;
        double s = best[i] + scores[id];
        if (s > best[i + len]) {
          best[i + len] = s;
          back[i + len] = i;
          backId[i + len] = id;
        }
      }
      if (!single && best[i] + unkScore > best[i + 1]) {
        best[i + 1] = best[i] + unkScore;
        back[i + 1] = i;
        backId[i + 1] = unkId;
      }
    }
    List<Integer> rev = new ArrayList<>();
    List<Integer> starts = new ArrayList<>();
    for (int j = n; j > 0; j = back[j]) {
      rev.add(backId[j]);
      starts.add(back[j]);
    }
    List<Integer> out = new ArrayList<>();
    for (int k = rev.size() - 1; k >= 0; k--) {
      int id = rev.get(k);
      if (id == unkId && byteIds != null) { // an unknown node covers one character
        byte[] utf8 = new String(Character.toChars(chars[starts.get(k)])).getBytes(StandardCharsets.UTF_8);
        for (byte b : utf8) out.add(byteIds[b & 0xff]);
        continue;
      }
      if (id == unkId && !out.isEmpty() && out.get(out.size() - 1) == unkId) continue;
      out.add(id);
    }
    return out.stream().mapToInt(Integer::intValue).toArray();
  }
}
