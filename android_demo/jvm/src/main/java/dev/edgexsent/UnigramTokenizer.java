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
  private final Map<Integer, String> charMap; // a student's rules (tokenizer_rules.json), or null: NFKC
  private final boolean compose; // the rules' "compose": "NFC" (NFC before and after the map)
  private final String prefix;
  private final int[] head;
  private final int[] tail;

  /**
   * json: the bundle's tokenizer.json (Hugging Face `tokenizers` format, model.type "Unigram").
   * Pad and unk carry a NUL there, so no normalised text can spell them; "<mask>" is an
   * ordinary piece, matched when typed, as SentencePiece does.
   */
  public UnigramTokenizer(JsonObject json) {
    this(json, null);
  }

  /**
   * rules: the folder's tokenizer_rules.json (a student of multilingual-e5-small), or null. With rules
   * the text is read as e5 reads it: prefix + text, each character through the map, runs of spaces
   * collapsed to one (nothing trimmed), and the pieces between bos_id and eos_id.
   */
  public UnigramTokenizer(JsonObject json, JsonObject rules) {
    charMap = rules == null ? null : new HashMap<>();
    if (rules != null) {
      for (Map.Entry<String, com.google.gson.JsonElement> e : rules.getAsJsonObject("char_map").entrySet()) {
        charMap.put(Integer.parseInt(e.getKey()), e.getValue().getAsString());
      }
    }
    prefix = rules == null ? "" : rules.get("prefix").getAsString();
    compose = rules != null && rules.has("compose") && rules.get("compose").getAsString().equals("NFC");
    head = rules == null || rules.get("bos_id").isJsonNull() ? new int[0] : new int[] {rules.get("bos_id").getAsInt()};
    tail = rules == null || rules.get("eos_id").isJsonNull() ? new int[0] : new int[] {rules.get("eos_id").getAsInt()};
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

  /** e5's rules: prefix, NFC (when the rules compose), each character through the map, NFC again, runs of
   * U+0020 collapsed to one (edge_xsent/encode/tokenizer.py, TextRules.normalize). */
  String normalizeByRules(String text) {
    String in = compose ? Normalizer.normalize(prefix + text, Normalizer.Form.NFC) : prefix + text;
    StringBuilder out = new StringBuilder(in.length());
    for (int cp : in.codePoints().toArray()) {
      String to = charMap.get(cp);
      if (to == null) out.appendCodePoint(cp);
      else out.append(to);
    }
    String mapped = compose ? Normalizer.normalize(out, Normalizer.Form.NFC) : out.toString();
    return mapped.replaceAll(" {2,}", " ");
  }

  /** The ids a model reading at most maxLen of them gets: the first ones, the closing id kept last. */
  public int[] encode(String text, int maxLen) {
    int[] ids = encode(text);
    if (ids.length <= maxLen) return ids;
    int[] cut = Arrays.copyOf(ids, maxLen);
    if (tail.length > 0) cut[maxLen - 1] = tail[0];
    return cut;
  }

  public int[] encode(String text) {
    if (charMap != null) {
      String norm = normalizeByRules(text);
      if (norm.substring(prefix.length()).replace(" ", "").isEmpty()) return new int[0]; // blank: no tokens
      int[] pieces = pieces(norm);
      int[] out = new int[head.length + pieces.length + tail.length];
      System.arraycopy(head, 0, out, 0, head.length);
      System.arraycopy(pieces, 0, out, head.length, pieces.length);
      System.arraycopy(tail, 0, out, head.length + pieces.length, tail.length);
      return out;
    }
    return pieces(normalize(text));
  }

  private int[] pieces(String norm) {
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
